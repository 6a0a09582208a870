"""What a refused single run (app.refuse) may remove or must put back in its output folder.

A refusal changes nothing it did not write before its first unit: a folder this invocation created
goes while it holds only what precedes any unit (``written_before_units``); in a folder that existed,
what Hydra rewrote before the task function ran (.hydra/, the log) is put back (``hydra_files`` notes
it in the precheck, ``put_back`` restores it). From the first unit on, nothing is removed.
"""

from __future__ import annotations

import os
from pathlib import Path

# Noted by the precheck before Hydra writes into a single run's folder, read by app.refuse: "created"
# (the topmost folder this invocation made), "before" (hydra_files of a folder that existed), and
# "units_began" (set by units_begin, which drops the other two: nothing is removed or put back then).
MARKS: dict = {}


def note_run_start(folder: Path, subdir) -> None:
    """Before Hydra creates ``folder`` (.hydra/ as ``subdir``, the log) or rewrites them in it."""
    new = folder.resolve()
    while not new.parent.exists():
        new = new.parent  # with the parents created for it (outputs/<experiment>/): the topmost new one
    MARKS.clear()
    MARKS.update(created=None if new.exists() else new, before=hydra_files(folder, subdir) if folder.is_dir() else None)


def units_begin() -> None:
    """A unit is about to run: from here on a refusal removes and puts back nothing, and names the folder."""
    MARKS.pop("created", None)
    MARKS.pop("before", None)
    MARKS["units_began"] = True


# What an invocation writes into its output folder before any unit runs: Hydra's .hydra/ and the
# log, the declaration. A folder holding anything else holds what a unit computed.
_BEFORE_UNITS = ("declaration.json",)


def written_before_units(root: Path) -> bool:
    """Whether every file under ``root`` is one an invocation writes before its first unit."""
    for path in root.rglob("*"):
        if path.is_dir() and not path.is_symlink():
            continue
        inside = path.relative_to(root).parts
        if ".hydra" in inside or path.suffix == ".log" or path.name in _BEFORE_UNITS:
            continue
        return False
    return True


def hydra_files(folder: Path, subdir) -> dict:
    """What Hydra rewrites in an output folder that exists before the task function runs: its
    ``subdir`` (.hydra/: the files' bytes, or None when there is none) and the logs (their sizes)."""
    saved = folder / subdir if subdir else None
    return {"folder": folder, "subdir": saved,
            "files": {p: p.read_bytes() for p in saved.iterdir() if p.is_file()} if saved and saved.is_dir() else None,
            "logs": {p: p.stat().st_size for p in folder.glob("*.log") if p.is_file()}}


def put_back(before: dict) -> None:
    """The folder's Hydra files and logs as ``hydra_files`` found them (a refusal changes nothing)."""
    import shutil

    saved, files = before["subdir"], before["files"]
    if saved is not None and saved.is_dir():
        if files is None:
            shutil.rmtree(saved, ignore_errors=True)
        else:
            for p in saved.iterdir():
                if p.is_file() and p not in files:
                    p.unlink()
            for p, content in files.items():
                if not p.is_file() or p.read_bytes() != content:
                    p.write_bytes(content)
    for p in before["folder"].glob("*.log"):
        if p not in before["logs"]:
            p.unlink()
        elif p.stat().st_size != before["logs"][p]:
            os.truncate(p, before["logs"][p])
