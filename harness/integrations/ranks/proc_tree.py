"""The processes a unit's command started, found by parent rather than by process group.

A unit's command runs in a process group of its own, which the harness (process.py) or its guard
(group_guard.py) kills. A launcher such as torchrun starts each rank in a session of its own, out of
that group: killing the group kills the launcher and leaves its ranks running. Their parent is still
the launcher until it dies, so they are found from /proc by parent before the group is killed, and
killed with it. Standard library only (group_guard.py imports it by path). Linux; elsewhere none is
found and the group alone is killed.
"""

import os
import signal


def descendants(pid: int) -> list:
    """Every process whose chain of parents leads to ``pid`` (not ``pid`` itself)."""
    children: dict = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])  # the name may hold spaces: after ")"
        except (OSError, IndexError, ValueError):
            continue  # it ended meanwhile
        children.setdefault(parent, []).append(int(name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # it has ended
            pass
