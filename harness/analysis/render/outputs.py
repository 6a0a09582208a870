"""The files that describe one analysis (json, report, figure), replaced together or not at all.

Written one by one over the old ones, a full disk could leave analysis.json and report.md describing
5 seeds beside an analysis.png that still shows 6. Here all of them are written into a temporary
sibling folder first (where a full disk fails, nothing replaced), then renamed over the old ones (a
rename needs no space); should a rename fail, the old files are put back from hard links made
before. Only a crash between the renames (microseconds) could leave them disagreeing.

A temporary folder is named after its writer (``.analysis-new-<host>.<pid>-...``): one left by an
analysis that was killed is removed by the next analysis of the folder, and named in the log; one of
a writer that still runs (or of another host, younger than an hour) is left alone.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Callable

from harness import HarnessError

_PREFIX = ".analysis-new-"
_STALE_ELSEWHERE = 3600.0  # seconds: a folder of another host's analysis is left alone younger than this


class OutputsNotWritten(OSError, HarnessError):
    """Writing one analysis's files failed; none of them was replaced (the message says so).
    errno and filename are the cause's: a caller that words storage errors by errno still can."""

    def __init__(self, cause: OSError, folder: Path, names):
        super().__init__(cause.errno, cause.strerror or str(cause), cause.filename)
        self.folder, self.names = folder, tuple(names)

    def __reduce__(self):  # pickled by a worker: rebuilt from its own arguments, not OSError's
        return type(self), (OSError(self.errno, self.strerror, self.filename), self.folder, self.names)

    def __str__(self) -> str:
        where = f" writing {self.filename}" if self.filename else ""
        return (f"{self.strerror}{where}. None of {', '.join(self.names)} in {self.folder} was replaced: "
                "the earlier ones, if any, are unchanged and describe the same (earlier) results")


def write_together(folder: Path, writers: dict[str, Callable[[Path], None]]) -> None:
    """Call each writer with its file's path in a temporary folder, then swap all the files in.
    A name whose writer wrote nothing is removed from ``folder`` too (an old one would disagree)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        remove_leftovers(folder)
        new = Path(tempfile.mkdtemp(dir=folder, prefix=f"{_PREFIX}{socket.gethostname()}.{os.getpid()}-"))
    except OSError as e:
        raise OutputsNotWritten(e, folder, writers) from None
    try:
        for name, write in writers.items():
            write(new / name)
        _swap_in(new, folder, list(writers))
    except OSError as e:
        raise OutputsNotWritten(e, folder, writers) from None
    finally:
        shutil.rmtree(new, ignore_errors=True)


def _swap_in(new: Path, folder: Path, names: list[str]) -> None:
    (new / ".old").mkdir()
    for name in names:  # a second name for each old file (no data copied): the way back
        if (folder / name).is_file():
            os.link(folder / name, new / ".old" / name)
    done = []
    try:
        for name in names:
            if (new / name).exists():
                os.replace(new / name, folder / name)
            elif (folder / name).exists():
                os.unlink(folder / name)
            done.append(name)
    except OSError:
        for name in done:  # put back what was there before
            if (new / ".old" / name).exists():
                os.replace(new / ".old" / name, folder / name)
            elif (folder / name).exists():
                os.unlink(folder / name)
        raise


def remove_leftovers(folder: Path, say: Callable[[str], None] | None = None) -> list[Path]:
    """Remove the temporary folders of analyses of ``folder`` that were killed; the removed ones."""
    say = say or logging.getLogger("harness").warning
    removed = []
    for path in folder.glob(_PREFIX + "*"):
        m = re.match(re.escape(_PREFIX) + r"(.+)\.(\d+)-", path.name)
        try:
            if m and m.group(1) == socket.gethostname():
                if _alive(int(m.group(2))):
                    continue  # an analysis of this folder running now
            elif time.time() - path.stat().st_mtime < _STALE_ELSEWHERE:
                continue  # another host's, maybe running
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(path)
    if removed:
        say(f"removed {len(removed)} temporary folder(s) left by an analysis that was killed: "
            f"{', '.join(p.name for p in removed)} (the analysis files beside them are whole: each set "
            "is replaced together or not at all)")
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True
