"""Ending a command without the interpreter's teardown.

Teardown frees every object one by one (scipy's, matplotlib's, omegaconf's, and after an analysis
the millions parsed from the result files): a few tenths of a second after the last line, on every
run. When every file is written, ``exit_now`` runs what an exit must still run (the exit handlers,
the log's and the terminal's buffers) and ends the process with its status.
"""

from __future__ import annotations

import sys


def exit_now(code: int = 0) -> None:
    """Exit with ``code`` now, skipping teardown. A non-daemon thread still running gets the ordinary
    exit instead (this returns), which waits for it."""
    import atexit
    import logging
    import os
    import threading

    if any(t is not threading.main_thread() and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    atexit._run_exitfuncs()  # wandb's and attach()'s handlers, as an ordinary exit runs them
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a pipe closed by its reader, or a closed stream: nothing reaches it
            pass
    os._exit(int(code))
