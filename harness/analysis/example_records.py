"""The per-example outcomes on the test split (``result["examples"]``) of the analysed metric: the
record that belongs to it, whether the metric agrees with it (up to float32 rounding), and the
outcomes as arrays for the test set's noise.

Pure functions of result dicts (the record's format is harness.results.examples').
"""

from __future__ import annotations

import binascii
import math
from collections.abc import Mapping

import numpy as np

from harness import results as results_io


# A metric read back from its per-example record may have passed through float32 (a user's loop
# computing 100 * correct.float().mean()): a count, a division, a scaling and the cast to the
# returned number, each rounding by at most float32's epsilon relative to the value. Agreement
# tolerates that much and no more: at 100 points it is 5e-5, far below one example of any test
# set under a million examples.
FLOAT32_EPS = float(np.finfo(np.float32).eps)
FLOAT32_ROUNDINGS = 4


def float32_tolerance(*values) -> float:
    """How far apart two numbers of this magnitude may be from float32 rounding alone."""
    return FLOAT32_ROUNDINGS * FLOAT32_EPS * max(map(abs, map(float, values)), default=0.0)  # no generator: twice per run


def agrees(value, expected) -> bool:
    """The metric ``value`` is ``expected`` (what its per-example record gives) up to float32 rounding."""
    return abs(float(value) - float(expected)) <= float32_tolerance(value, expected)


def record_of(result, spec):
    """The per-example record (results.example_record) that belongs to the metric ``spec`` declares.

    A record names its metric; an older one without a name belongs to the declared examples
    metric: the one the run's recorded config declared with examples: true (of several, the one
    the run returned), or, when that config declared none (it predates the flag), the analysed
    metric when it is declared so."""
    ex = result.get("examples")
    if (type(ex) is dict and ex.get("metric") == spec.name and isinstance(ex.get("correct"), str)
            and isinstance(ex.get("n"), int)):
        return ex  # the usual case: one well-formed record, named (what the lines below find)
    records = results_io.example_records(result)
    if any(r.get("metric") == spec.name for r in records):  # named: no need to ask who owns an unnamed one
        return results_io.example_record(result, spec.name)
    return results_io.example_record(result, spec.name, unnamed=bool(records) and spec.examples
                                     and _owns_unnamed(result, spec))


def _owns_unnamed(result, spec) -> bool:
    declared = ((result.get("config") or {}).get("stats") or {}).get("metrics")
    flagged = [str(name) for name, entry in (declared.items() if isinstance(declared, Mapping) else ())
               if isinstance(entry, Mapping) and entry.get("examples") is True]
    if len(flagged) > 1:
        flagged = [name for name in flagged if name in (result.get("metrics") or {})]
    return flagged == [spec.name] if flagged else True


def record_value(record, spec) -> tuple:
    """(the metric its per-example record gives: example_scale x the mean outcome, the outcomes)."""
    correct = results_io.unpack_examples(record)
    # the count over the size is np.mean's own float64 sum of 0s and 1s and division, to the bit,
    # without its cost per call (a few us a run: 10,000 of them in a big sweep)
    return spec.example_scale * (np.count_nonzero(correct) / correct.size) if correct.size else math.nan, correct


def record_mean(record, spec) -> float:
    """record_value's metric without unpacking the outcomes: the count of 1 bits among the first
    n of the packed record (unpack_examples' little bit order), the same int over the same size."""
    n = record["n"]
    if n <= 0:  # no outcomes, or a size unpack_examples reads otherwise: the plain computation
        return record_value(record, spec)[0]
    ones = (int.from_bytes(binascii.a2b_base64(record["correct"]), "little") & ((1 << n) - 1)).bit_count()
    return spec.example_scale * (ones / n)


def outcomes(records):
    """The records' outcomes as one runs x examples bool array (np.array of their unpack_examples),
    unpacked at once when every record packs the same n > 0 outcomes in the same number of bytes."""
    if not records:
        return np.array([])
    n = records[0]["n"]
    raws = [binascii.a2b_base64(r["correct"]) for r in records]
    width = (n + 7) // 8
    if n > 0 and all(r["n"] == n for r in records) and all(len(raw) == width for raw in raws):
        packed = np.frombuffer(b"".join(raws), dtype=np.uint8).reshape(len(raws), width)
        return np.unpackbits(packed, axis=1, count=n, bitorder="little").view(bool)
    return np.array([results_io.unpack_examples(r) for r in records])


def _size(record) -> int:
    """The number of outcomes unpack_examples gives for a record."""
    return record["n"] if record["n"] >= 0 else results_io.unpack_examples(record).size


def two_numbers(a, b, least: int = 2) -> tuple:
    """a and b with the fewest decimals (at least ``least``) that show them apart."""
    for digits in range(least, 11):
        x, y = f"{a:.{digits}f}", f"{b:.{digits}f}"
        if x != y:
            return x, y
    return f"{a!r}", f"{b!r}"


def examples(compared, by_arm, baseline, spec):
    """(arm -> (baseline, arm) seeds x examples bool arrays, note) for the test set's noise.

    ``spec``: the analysed metric's declaration (harness.config.metric_spec.MetricSpec); only a metric
    declared as the mean of per-example outcomes (examples: true) has them, and only the records
    that belong to it (record_of) are used. Each must give the metric's value up to float32
    rounding (agrees)."""
    metric = spec.name
    if not spec.examples:
        return None, {"available": False, "reason": (f"{metric} is not declared as the mean of per-example "
                                                     f"outcomes (stats.metrics.{metric}.examples: true)")}
    out = {}
    sizes = set()
    for arm, seeds in compared.items():
        arrays = {}
        for who in (baseline, arm):
            rows = []
            for s in seeds:
                run = by_arm[who][s]
                # selection._usable_runs already read and checked the record of every usable run
                record, given = run["record"] if "record" in run else (record_of(run["result"], spec), None)
                if record is None or record.get("split", "test") != "test":
                    return None, {
                        "available": False,
                        "reason": (f"per-example correctness of {metric} on the test split is not recorded (seed {s} "
                                   f"arm {who}): the intervals cover seed noise only, not this test set's own "
                                   f"sampling noise"),
                    }
                if given is None:
                    given = record_mean(record, spec)
                value = run["value"]
                if not agrees(value, given):
                    shown_given, shown_value = two_numbers(given, value, 4)
                    return None, {
                        "available": False,
                        "reason": (f"the recorded examples of seed {s} arm {who} give {shown_given}, "
                                   f"not its {metric} {shown_value}: not the same test set"),
                    }
                rows.append(record)
                sizes.add(_size(record))
            arrays[who] = rows
        if len(sizes) > 1:
            return None, {"available": False, "reason": f"runs recorded test sets of different sizes ({sorted(sizes)})"}
        out[arm] = (outcomes(arrays[baseline]), outcomes(arrays[arm]))
    return out, {
        "available": True,
        "n_examples": sizes.pop() if sizes else None,
        "about": ("per-example correctness on the test split: the test set's sampling noise in each "
                  "difference (crossed seeds x examples, Cornfield & Tukey 1956; Satterthwaite df) and an "
                  "interval for the effect on the data distribution (Jordan 2024: floor sqrt(p(1-p)/n))"),
    }
