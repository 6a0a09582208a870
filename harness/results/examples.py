"""Per-example records in result.json: which test examples a run got right, one bit each, per metric
(``run.record_examples``). Packed, found and unpacked here; the analysis reads them for the test
set's own noise. Part of the results contract (harness/results/__init__.py re-exports every name).
"""

from __future__ import annotations

import base64
import binascii


def pack_examples(correct, split: str = "test", metric: str | None = None) -> dict:
    """A compact record of which test examples a run got right (1 bit each), for ``metric``."""
    import numpy as np

    bits = np.asarray(correct, dtype=bool).reshape(-1)
    packed = np.packbits(bits, bitorder="little").tobytes()
    record = {"split": split, "n": int(bits.size), "correct": base64.b64encode(packed).decode("ascii")}
    return {"metric": str(metric), **record} if metric is not None else record


def pack_example_records(by_metric: dict, split: str = "test"):
    """result.json's ``examples`` block for {metric: correctness}: one record, or a list of them."""
    records = [pack_examples(correct, split, metric) for metric, correct in by_metric.items()]
    return records[0] if len(records) == 1 else records


# What a record no declared metric can own needs: one line in the declaration or in the call.
SET_ASIDE_FIX = ("add `examples: true` under the metric they belong to in stats.metrics (stats.metrics.NAME: "
                 "{direction: max, unit: pts, examples: true}), or name it in the call: "
                 "run.record_examples(correct, metric=\"NAME\")")
SET_ASIDE_KEY = "examples_set_aside"


def set_aside_records(items, warn: bool = False) -> list:
    """result.json's ``examples_set_aside``: per-example records whose metric cannot be told, each
    with why and the line that fixes it, kept beside the run and never read by the analysis.
    ``items``: (correctness, why, fix or None for SET_ASIDE_FIX). ``warn``: also a FutureWarning
    (a Run outside a harness run: no analysis will say it)."""
    records = [{**pack_examples(correct), "why": why, "fix": fix or SET_ASIDE_FIX} for correct, why, fix in items]
    if warn:
        import warnings

        for r in records:
            warnings.warn(f"{r['why']}. The run is kept and the record set aside ({SET_ASIDE_KEY}), unused by "
                          f"the analysis; to use it, {r['fix']}.", FutureWarning, stacklevel=3)
    return records


def set_aside_note(results) -> dict | None:
    """What the analysis says once of the records set aside in ``results``: in how many runs, why
    (the first run's) and the fix; None when none was."""
    hit = [r for r in results if isinstance(r.get(SET_ASIDE_KEY), list) and r[SET_ASIDE_KEY]]
    if not hit:
        return None
    first = hit[0][SET_ASIDE_KEY][0]
    return {"runs": len(hit), "of": len(results), "why": str(first.get("why")), "fix": str(first.get("fix"))}


def example_records(result: dict) -> list:
    """Every well-formed per-example record of a result (``metric`` is absent in older files)."""
    ex = result.get("examples")
    records = ex if isinstance(ex, list) else [ex]
    return [r for r in records
            if isinstance(r, dict) and isinstance(r.get("correct"), str) and isinstance(r.get("n"), int)]


def example_record(result: dict, metric: str | None = None, *, unnamed: bool = False):
    """The record that belongs to ``metric``: the one naming it, else (``unnamed``: the caller
    knows an older record without a name is this metric's) the one without a name. ``metric``
    None: the only record, whichever metric it belongs to. None when there is no such record."""
    records = example_records(result)
    if metric is None:
        return records[0] if len(records) == 1 else None
    named = [r for r in records if r.get("metric") == metric]
    if not named and unnamed:
        named = [r for r in records if r.get("metric") is None]
    return named[0] if len(named) == 1 else None


def example_correctness(result: dict, metric: str | None = None, *, unnamed: bool = False):
    """The per-example correctness of a result's record of ``metric`` (see example_record) as a
    bool numpy array, or None when not recorded."""
    record = example_record(result, metric, unnamed=unnamed)
    return None if record is None else unpack_examples(record)


def unpack_examples(record: dict):
    """A record's correctness as a bool numpy array."""
    import numpy as np

    raw = np.frombuffer(binascii.a2b_base64(record["correct"]), dtype=np.uint8)  # base64.b64decode, without its wrapping
    return np.unpackbits(raw, count=record["n"], bitorder="little").view(bool)  # 0s and 1s: a view, no copy
