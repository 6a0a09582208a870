"""Values that differ, shown so a reader sees where: each distinct value once, cut around the first
place they part rather than at a fixed width (two argv lists that differ only near their end
would otherwise all read the same)."""

from __future__ import annotations

import json
import os

WIDTH = 60  # characters of each value shown
BEFORE = 20  # of them, before the first difference
SHOWN = 4  # distinct values named; the rest counted


def text(value) -> str:
    if value is None:
        return "missing"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(value)
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def apart(values) -> str:
    """'A vs B vs ...' of the distinct values, each shortened around where they first differ."""
    texts = list(dict.fromkeys(text(v) for v in values))
    start = len(os.path.commonprefix(texts)) if len(texts) > 1 else 0
    begin = max(0, min(start - BEFORE, max(len(t) for t in texts) - WIDTH)) if start > BEFORE else 0
    cut = [("..." if begin else "") + t[begin:begin + WIDTH] + ("..." if len(t) > begin + WIDTH else "") for t in texts]
    more = f" and {len(cut) - SHOWN} more" if len(cut) > SHOWN else ""
    return " vs ".join(cut[:SHOWN]) + more
