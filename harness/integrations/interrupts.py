"""A Ctrl-C that arrives while a child process starts is raised once the child is known to its cleanup.

Between ``subprocess.Popen`` creating a process and the caller keeping it (in a variable a ``finally``
reads, in a pool's list), a KeyboardInterrupt leaves the process to nobody: nothing ends it, and
nothing ends what it starts. ``held()`` defers SIGINT over such a block and raises it at the block's
end, where the caller's cleanup sees the process.

``reached(point)`` is a test seam: with ``HARNESS_TEST_INTERRUPT_AT=<point>`` in the environment the
process sends SIGINT to its process group at that point, as a terminal's Ctrl-C does (the test starts
the harness in a session of its own), so a test of Ctrl-C there needs no timing. Unset, as outside the tests, it does nothing. The points: ``worker-started`` (a
pool worker's process exists, not yet kept), ``unit-started`` (a command unit's process exists, not
yet kept), ``analysis`` (the units have run; the analysis starts). A process that ignores SIGINT (a
pool worker) is unaffected.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

TEST_ENV = "HARNESS_TEST_INTERRUPT_AT"


@contextlib.contextmanager
def held():
    """SIGINT deferred to the end of the block (in the main thread, where Python runs signal handlers;
    elsewhere, or where SIGINT is ignored or not Python's, the block runs as it is)."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield
        return
    caught: list = []
    signal.signal(signal.SIGINT, lambda signum, frame: caught.append((signum, frame)))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            previous(*caught[0])  # KeyboardInterrupt, for Python's own handler


def reached(point: str) -> None:
    """The test seam (see the module's text): SIGINT to this process's group at ``point`` when asked."""
    if os.environ.get(TEST_ENV) == point:
        os.killpg(os.getpgrp(), signal.SIGINT)


_seen = False


def install() -> None:
    """Python's Ctrl-C (a KeyboardInterrupt in the main thread), remembered: ``seen()`` then says so
    even where some code swallowed the exception (an object's finalizer, an exit handler, a library's
    ``except BaseException``), so that the invocation still ends as interrupted."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)


def _on_sigint(signum, frame):
    global _seen
    _seen = True
    raise KeyboardInterrupt


def seen() -> bool:
    """Whether a Ctrl-C reached this process since ``install()``."""
    return _seen


def stop_if_seen() -> None:
    """Between two units: a Ctrl-C that the unit's code swallowed stops the run here."""
    if _seen:
        raise KeyboardInterrupt
