"""Kill a unit's process group once the process that started the unit is gone, however it went.

A command unit runs in a process group (and session) of its own, so that the harness can end the
whole tree a script started (``sh run.sh`` starting python without ``exec``: the python is a
grandchild). While the harness lives it kills the group itself (process.py). A harness killed with
SIGKILL cannot, and the kernel's death signal (PR_SET_PDEATHSIG) reaches only the direct child: the
grandchildren would be re-parented and train on. This small process outlives it and does the kill.

It is started beside the unit (``python -I -S group_guard.py PGID MARK``, MARK the unit run's
environment mark, ranks/proc_tree.py), in a session of its own so
that a terminal's Ctrl-C or hang-up does not end it, with its stdin the read end of a pipe whose
write end only the unit's runner holds. The runner writes one byte when it has ended the group
itself, then closes its end: the guard exits. End of file with nothing written means the runner
died: the guard kills the group and exits. It ignores SIGINT, SIGHUP and SIGTERM: a scheduler's
SIGTERM to every process of a job (scancel, preemption) leaves the script its grace time, and the
guard goes on watching until the runner ends. Standard library only (ranks/proc_tree.py, read by path): it
starts in a few milliseconds.
"""

import os
import signal
import sys


def _kill(pgid: int, mark) -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ranks"))  # -I leaves it out
    import proc_tree  # stdlib only: a launcher's ranks in sessions of their own, found by parent

    tree = proc_tree.descendants(pgid)  # the group's leader is the command
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:  # the group has ended already
        pass
    proc_tree.kill(tree)
    if mark:  # the ranks of a launcher that died first: re-parented, found by the unit's mark
        proc_tree.kill_marked(mark)


def main(argv: list) -> int:
    pgid, mark = int(argv[0]), (argv[1] if len(argv) > 1 else None)
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):  # the runner's to handle; this one watches
        signal.signal(sig, signal.SIG_IGN)
    if not os.read(0, 1):  # end of file, nothing said: the runner is gone
        _kill(pgid, mark)
    return 0  # else the runner ended the group itself


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
