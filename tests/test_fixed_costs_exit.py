"""Fixed costs of one invocation around a command arm's units (issue 29, item 6): the end of
``python -m harness`` skips the interpreter's teardown but not what an exit must do, and an
experiment without stats.fdr does not import the ledger's modules before its units."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

EXIT = """
import atexit, sys, threading
sys.argv = ["harness"]
import harness.__main__ as entry
atexit.register(lambda: print("exit handler ran"))
print("buffered line", flush=False)
go = threading.Event()
if {thread}:
    def late():  # alive until the main thread is past exit_now: no timing involved
        go.wait()
        print("thread finished")
    threading.Thread(target=late).start()
entry.exit_now()
print("ordinary exit")
go.set()
"""


def _run(thread: bool) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", EXIT.format(thread=thread)], capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, cwd=REPO)


def test_the_fast_exit_runs_the_exit_handlers_and_flushes_what_was_printed():
    proc = _run(thread=False)
    assert proc.returncode == 0, proc.stderr
    # stdout is a pipe here, so fully buffered: both lines are there only if it was flushed
    assert proc.stdout.splitlines() == ["buffered line", "exit handler ran"], proc.stdout


def test_a_thread_still_running_gets_the_ordinary_exit_which_waits_for_it():
    proc = _run(thread=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["buffered line", "ordinary exit", "thread finished", "exit handler ran"]


def test_the_fast_exit_of_a_closed_terminal_stream_is_still_exit_0():
    code = ("import sys\nsys.argv = ['harness']\nimport harness.__main__ as entry\n"
            "print('never read', end='')\nsys.stdout.close()\nentry.exit_now()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, cwd=REPO)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


def test_an_experiment_without_fdr_takes_no_level_and_imports_no_ledger_module():
    code = ("import sys, types\n"
            "from harness.experiment.execute import _ledger_level\n"
            "d = types.SimpleNamespace(fdr=None)\n"
            "assert _ledger_level(None, d, '.') is d\n"
            "print(sorted(m for m in sys.modules if m.startswith('harness.ledger')))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
