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

The launch folder's own files up to COPY_BYTES (scripts, a model.pt left by a run by hand) are
copied, not linked: a script that saves over one writes its own copy, never the user's file or the
other units'. A copy the script left as it was is removed with the links; one it wrote stays with
the unit. Not mirrored: the entry that holds the unit's folder (the output folder under the launch
folder: a link to it would be a cycle). A larger file or a folder already in the launch folder is
reached through its link, so a script that writes into one (an existing ./checkpoints/) writes the
user's file; ``changed`` names the linked top-level files whose content changed.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Iterator

WORK = "work"
COPY_BYTES = 16 * 2**20  # a top-level file up to this size is copied into each unit's folder


@contextlib.contextmanager
def unit_workdir(launch: Path, unit: Path, changed: list) -> Iterator[Path]:
    """The unit's working folder for the command's run; ``changed`` gets the launch folder's files
    (reached through a link) whose size or time changed while it ran."""
    launch, unit = Path(launch).resolve(), Path(unit).resolve()
    work = unit / WORK
    cwd = work if launch.parent == launch else work / launch.name
    levels = [(launch, cwd)] if cwd == work else [(launch.parent, work), (launch, cwd)]
    made: list[tuple[Path, str | None]] = []
    copies: dict = {}
    try:
        for source, place in levels:
            _clear(place, source)  # links a unit killed with the harness left behind
        cwd.mkdir(parents=True, exist_ok=True)
        for source, place in levels:
            made += _mirror(source, place, unit, keep=cwd, copy=place == cwd)
        copies = {link: (st.st_size, st.st_mtime_ns) for link, st in
                  ((link, _stat(link)) for link, target in made if target is None) if st is not None}
        own = [target for link, target in made if link.parent == cwd and target is not None]  # linked files
        before = _files_state(own)
        yield cwd
        changed += [target for target, state in _files_state(own).items() if before.get(target) != state]
    finally:
        for link, target in made:
            with contextlib.suppress(OSError):
                if target is None:  # a copy: removed unless the script wrote it (then it is the unit's)
                    st = os.lstat(link)
                    if stat.S_ISREG(st.st_mode) and copies.get(link) == (st.st_size, st.st_mtime_ns):
                        os.unlink(link)
                elif os.readlink(link) == target:  # the script may have replaced it with a file of its own
                    os.unlink(link)


def _stat(path: Path):
    try:
        return os.lstat(path)
    except OSError:
        return None


def _mirror(source: Path, place: Path, unit: Path, keep: Path, copy: bool) -> list[tuple[Path, str | None]]:
    """(entry made, the target it links to; None for a copy) for each entry of ``source`` put in
    ``place``; with ``copy``, regular files up to COPY_BYTES are copied rather than linked."""
    import shutil

    made = []
    try:
        entries = sorted(os.scandir(source), key=lambda e: e.name)
    except OSError:  # an unreadable parent: the launch folder itself is still mirrored
        return made
    for entry in entries:
        target, link = source / entry.name, place / entry.name
        if link == keep or target == unit or target in unit.parents:
            continue  # our own folder, or the one holding the unit (a cycle)
        try:
            if copy and entry.is_file(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_size <= COPY_BYTES:
                # a fresh copy of the launch folder's file, over what an interrupted run left there (never
                # written through: a link left there is removed first)
                if os.path.islink(link) or os.path.isfile(link):
                    os.unlink(link)
                shutil.copy2(target, link)  # its own copy: a write to it stays with this unit
                made.append((link, None))
                continue
            if os.path.lexists(link):
                continue  # the script's earlier output
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
