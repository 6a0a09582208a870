"""What the result files hold beside the primary metric, gathered for the analysis.

- the other metrics with a declared direction, each compared arm against the baseline;
- the per-example outcomes on the test split (``result["examples"]``) of the analysed metric, for
  the test set's noise, and whether the metric agrees with them (up to float32 rounding);
- the learning curves per arm (mean and band over seeds: curves.py, importable from here too);
- the setup a reader needs to judge the numbers (determinism mode, device, precision, threads).

Pure functions of result dicts; the statistics come from harness.stats. Kept apart from
analysis.py, which decides which runs count and whether they are paired.
"""

from __future__ import annotations

import binascii
import math
from collections.abc import Mapping

import numpy as np

from harness import results as results_io
from harness import stats
from harness.analysis.curves import _finite_number, all_finite_numbers, curves  # noqa: F401 - public here too

def other_metrics(usable, compared, baseline, metric, declared, alpha) -> dict:
    """Each other metric with a declared direction, each arm against the baseline (paired t).

    Holm's adjustment runs over every (metric, arm) comparison here: they are reported, not
    decided by a margin, so the step-down procedure's extra power costs no disagreement.
    """
    runs = {key: run["result"] for key, run in usable.items()}
    present = sorted(
        name for name in declared
        if name != metric and any(_finite_number((r.get("metrics") or {}).get(name)) for r in runs.values())
    )
    rows = []
    for name in present:
        for arm, seeds in compared.items():
            a = [(runs[(s, baseline)].get("metrics") or {}).get(name) for s in seeds]
            b = [(runs[(s, arm)].get("metrics") or {}).get(name) for s in seeds]
            if not (all_finite_numbers(a) and all_finite_numbers(b)):  # the usual case keeps every pair
                pairs = [(x, y) for x, y in zip(a, b) if _finite_number(x) and _finite_number(y)]
                a, b = [x for x, _ in pairs], [y for _, y in pairs]
            if len(a) < stats.MIN_PAIRS:
                continue
            a, b = np.array(a, dtype=float), np.array(b, dtype=float)
            rows.append((name, arm, stats.paired_t(a, b, confidence_level=1 - alpha)))
    adjusted = stats.holm([t.pvalue for _, _, t in rows]) if rows else []
    by_arm: dict[str, dict] = {}
    for (name, arm, t), p_holm in zip(rows, adjusted):
        low, high = t.confidence_interval()
        higher = declared[name] == "max"
        if p_holm < alpha and t.estimate != 0:
            word = "better" if (t.estimate > 0) == higher else "worse"
        else:
            word = "no clear difference"
        by_arm.setdefault(arm, {})[name] = {
            "direction": declared[name], "n_pairs": int(t.df) + 1, "mean_diff": t.estimate,
            "ci": [low, high], "confidence_level": t.confidence_level, "pvalue": t.pvalue,
            "pvalue_holm": float(p_holm), "reading": word,
        }
    return {"metrics": present, "by_arm": by_arm}


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


UNKNOWN = "unknown"


def setup(usable) -> dict:
    """Distinct values across the analysed runs of what decides their bits and speed."""
    found: dict[str, set] = {"determinism": set(), "device": set(), "precision": set(), "threads": set()}
    seen = set()  # the identity dicts (run_identity.identity) already read: their results share env and precision
    for run in usable.values():
        r = run["result"]
        env = r.get("env") or {}
        ident = r.get("_identity")
        if ident is not None and "mode" in env:  # its config's determinism.mode is not read: env's decides
            if id(ident) in seen:
                continue
            seen.add(id(ident))
        config = r.get("config") or {}
        # a command that did not report them (command_env.py) records its mode and device as null:
        # unknown, never the mode its config asked for, which nothing applied in the script
        mode = (env["mode"] or UNKNOWN) if "mode" in env else (config.get("determinism") or {}).get("mode")
        device = (env["device"] or UNKNOWN) if "device" in env else None
        if env.get("device_name"):
            device = f"{device} ({env['device_name']})"
        for key, value in (("determinism", mode), ("device", device), ("precision", _precision(config, env)),
                           ("threads", env.get("threads"))):
            if value is not None:
                found[key].add(str(value))
    return {key: sorted(values) for key, values in found.items()}


def _precision(config, env):
    """The precision as a reader should take it: "fp32" only when float32 math was float32
    (env.math_modes, harness/training/math_modes.py), else what was allowed inside it."""
    if "precision" in env and env["precision"] is None:  # a command that did not report it (command_env.py)
        return UNKNOWN
    precision, modes = config.get("precision"), env.get("math_modes") or {}
    cuda = str(env.get("device", "")).startswith("cuda")
    inside = [what for what, on in (
        ("TF32 in matmul", cuda and modes.get("cuda_matmul") == "tf32"),
        ("TF32 in cuDNN", cuda and "tf32" in (modes.get("cudnn_conv"), modes.get("cudnn_rnn"))),
        (f"{modes.get('mkldnn_matmul')} allowed in oneDNN matmul", not cuda and modes.get("mkldnn_matmul") in ("tf32", "bf16")),
    ) if on]
    return f"{precision} ({', '.join(inside)})" if precision is not None and inside else precision


def _doses(usable, arms) -> list:
    """Each arm's factor value when it is one finite number in all its runs, else None. Arms that set
    a whole subtree ({lr: 0.05}) have mappings here: compared, never hashed."""
    found = {}
    for (seed, arm), run in usable.items():
        found.setdefault(arm, []).append(run["result"].get("factor_value"))
    values = []
    for arm in arms:
        vs = found.get(arm, [])
        # all_finite_numbers: _finite_number of each, at C speed; count: each == the first (or is it)
        one = (bool(vs) and (all_finite_numbers(vs) or all(_finite_number(v) for v in vs))
               and vs.count(vs[0]) == len(vs))
        values.append(vs[0] if one else None)
    return values


def _seeds_of_every_arm(usable, arms) -> list:
    seeds = set.intersection(*[{s for (s, a) in usable if a == arm} for arm in arms]) if arms else set()
    return sorted(seeds, key=lambda s: (isinstance(s, str), s))


def dose_trend_why(usable, arms) -> str | None:
    """Why there is no dose trend (analysis.json's ``dose_trend_why``), or None when there is one."""
    values = _doses(usable, arms)
    if not all(v is not None for v in values):
        odd = ", ".join(a for a, v in zip(arms, values) if v is None)
        return f"the arms' factor values are not numbers (arm {odd}): there is no dose to regress on"
    if len(arms) < 3:
        return f"{len(arms)} arms: a trend needs 3 or more arms whose factor values are numbers"
    if len(set(values)) < len(values):
        return "two arms have the same factor value: the doses are not distinct"
    if len(_seeds_of_every_arm(usable, arms)) < 2:
        return "fewer than 2 seeds ran every arm"
    return None


def dose_trend(usable, arms, alpha) -> dict | None:
    """The paired trend test when every arm's factor value is a distinct number and there are >= 3:
    per-seed slope of the metric on the factor value, t across the seeds every arm ran,
    and whether the response departs from a line (harness.stats.trend). None otherwise."""
    from harness.stats import trend

    if dose_trend_why(usable, arms) is not None:
        return None
    values = _doses(usable, arms)
    seeds = _seeds_of_every_arm(usable, arms)
    table = np.array([[usable[(s, arm)]["value"] for arm in arms] for s in seeds], dtype=float)
    r = trend.dose_trend(table, values, confidence_level=1 - alpha)
    low, high = r.confidence_interval()
    return {
        "arms": list(arms), "doses": [float(v) for v in values], "seeds": len(seeds),
        "slope_per_unit": r.slope, "ci": [low, high], "confidence_level": r.confidence_level,
        "standard_error": r.standard_error, "statistic": r.statistic, "pvalue": r.pvalue, "df": r.df,
        "trend": bool(r.pvalue < alpha),
        "linearity": {"statistic": r.linearity_statistic, "df": list(r.linearity_df), "pvalue": r.linearity_pvalue,
                      "departs": None if r.linearity_pvalue is None else bool(r.linearity_pvalue < alpha),
                      "curvature": r.curvature},
        "intercept": float(np.mean(table.mean(axis=1) - r.slope * np.mean(values))),
        "method": r.method,
    }
