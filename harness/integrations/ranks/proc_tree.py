"""The processes a unit's command started, found by parent and by a mark in their environment
rather than by process group.

A unit's command runs in a process group of its own, which the harness (process.py) or its guard
(group_guard.py) kills. A launcher such as torchrun starts each rank in a session of its own, out of
that group: killing the group kills the launcher and leaves its ranks running. While the launcher
lives their parent is the launcher, so they are found from /proc by parent before the group is
killed. A launcher that died first (the OOM killer, kill -9) leaves them re-parented: they are
found by the mark every process of the unit inherits in its environment (UNIT_ENV, one value per
unit run; a process that cleared its environment escapes it). Standard library only (group_guard.py
imports it by path). Linux; elsewhere none is found and the group alone is killed.
"""

import os
import signal

UNIT_ENV = "HARNESS_UNIT_MARK"  # set by process.run for one run of one unit; inherited by all it starts


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


def marked(mark: str) -> list:
    """Every process whose environment holds UNIT_ENV=``mark`` (this user's: others' cannot be read)."""
    wanted = f"{UNIT_ENV}={mark}".encode()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if wanted in f.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue  # it ended meanwhile, or is not ours
    return found


def kill_marked(mark: str, rounds: int = 3) -> None:
    """Kill the processes marked ``mark``, again while a scan still finds some (one started meanwhile)."""
    for _ in range(rounds):
        found = marked(mark)
        if not found:
            return
        kill(found)


def kill(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # it has ended
            pass
