"""A changed declaration keeps the record of the one before: declaration.json moves to superseded/.

The folder then shows what was declared first and when it changed; a declaration made again on a
folder that already holds results records that it came after the data (Declaration.margin_declared
says so wherever the margin is shown)."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path


def supersede(path: Path, existing, new, changed: str, say=None):
    """Move the declaration at ``path`` to superseded/ and return ``new`` as it is to be written:
    with ``declared_after`` when the folder holds results. ``existing``: the old Declaration (None
    when unreadable); ``changed``: what differs, in words; ``say``: where the change is told."""
    from harness.results import find_result_files

    folder = path.parent
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    dest = folder / "superseded" / f"declaration-{stamp}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, dest)
    held = len(find_result_files(folder))
    if held:  # declared again after results: the analysis says so (margin_declared)
        new = replace(new, declared_after={"results": held, "superseded": dest.relative_to(folder).as_posix(),
                                           "margin": existing.margin if existing else None})
    if say is not None:
        say(f"the declaration changed ({changed}); the earlier one was moved to {dest.relative_to(folder).as_posix()}")
    return new
