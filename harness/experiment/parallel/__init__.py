"""An invocation's units at once: long-lived worker processes (workers.py), the serial path's contract
kept while units run side by side (side_by_side.py), and workers that end with their launcher
(watchdog.py)."""
