"""A command unit's working folder: a folder of its own that mirrors the launch folder.

Units side by side must not share the files they write (a script that saves ./model.pt and loads it
back would load the other unit's). Each unit runs in ``<unit folder>/work/<launch folder's name>``: a
real folder whose entries are symbolic links to the launch folder's (train.cwd, default: where the
harness was launched), inside ``<unit folder>/work/``, which mirrors the launch folder's parent the
same way. A script's relative reads (``./data/x``, ``python main.py``, ``--data ../data``) reach the
user's files through the links; a file it creates lands in the unit's folder. The links are removed
when the unit ends: the folder keeps what the script wrote, and no link into the launch folder is left
for a copy or a walk of the results to follow. A script's own files are still read from the launch
folder (its code identity, command_spec.code_files).

Not mirrored: the entry that holds the unit's folder (the output folder under the launch folder: a
link to it would be a cycle). A file or folder already in the launch folder is reached through its
link, so a script that writes into one (a model.pt left by a run by hand, an existing ./checkpoints/)
writes the user's file; ``written_through`` names the top-level files whose content changed.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Iterator

WORK = "work"


@contextlib.contextmanager
def unit_workdir(launch: Path, unit: Path, changed: list) -> Iterator[Path]:
    """The unit's working folder for the command's run; ``changed`` gets the launch folder's files
    (reached through a link) whose size or time changed while it ran."""
    launch, unit = Path(launch).resolve(), Path(unit).resolve()
    work = unit / WORK
    cwd = work if launch.parent == launch else work / launch.name
    levels = [(launch, cwd)] if cwd == work else [(launch.parent, work), (launch, cwd)]
    made: list[tuple[Path, str]] = []
    try:
        for source, place in levels:
            _clear(place, source)  # links a unit killed with the harness left behind
        cwd.mkdir(parents=True, exist_ok=True)
        for source, place in levels:
            made += _mirror(source, place, unit, keep=cwd)
        own = [target for link, target in made if link.parent == cwd]  # the launch folder's files
        before = _files_state(own)
        yield cwd
        changed += [target for target, state in _files_state(own).items() if before.get(target) != state]
    finally:
        for link, target in made:
            with contextlib.suppress(OSError):
                if os.readlink(link) == target:  # the script may have replaced it with a file of its own
                    os.unlink(link)


def _mirror(source: Path, place: Path, unit: Path, keep: Path) -> list[tuple[Path, str]]:
    made = []
    try:
        entries = sorted(os.scandir(source), key=lambda e: e.name)
    except OSError:  # an unreadable parent: the launch folder itself is still mirrored
        return made
    for entry in entries:
        target, link = source / entry.name, place / entry.name
        if link == keep or target == unit or target in unit.parents or os.path.lexists(link):
            continue  # our own folder, the one holding the unit (a cycle), or the script's earlier output
        try:
            os.symlink(target, link)
        except OSError:
            continue
        made.append((link, str(target)))
    return made


def _clear(place: Path, source: Path) -> None:
    if not place.is_dir():
        return
    for entry in os.scandir(place):
        if entry.is_symlink():
            with contextlib.suppress(OSError):
                if os.readlink(entry.path) == str(source / entry.name):
                    os.unlink(entry.path)


def _files_state(targets: list[str]) -> dict:
    out = {}
    for target in targets:
        with contextlib.suppress(OSError):
            st = os.stat(target)
            if stat.S_ISREG(st.st_mode):
                out[target] = (st.st_size, st.st_mtime_ns)
    return out
