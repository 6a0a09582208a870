"""Statistical goldens: when the bits differ (another torch, CPU or GPU), did the results change?

``golden save FILE --seeds N`` records, beside the bitwise fingerprints of one run, the declared
metrics (harness.config.declaration: names, directions, units, the primary metric, the margin and
alpha) of N seeds of the same arm. ``golden check`` on a stack where the bits differ runs the same
N seeds and compares the primary metric pair by pair (seed by seed: golden vs now) with the
project's paired verdict (harness.stats.compare: TOST at the declared margin for "equivalent",
the minimum-effect test for "changed", their error rates at most alpha). The outcome and its exit
status, for CI:

    0  identical    every step bit-identical (the statistical record is not needed)
    3  equivalent   bits differ, results equivalent within ±margin (TOST), or exactly equal
    1  changed      results changed beyond ±margin (better or worse); or, without a statistical
                    record, the bits differ
    4  undecided    neither shown: more seeds (--seeds) or a wider declared margin would settle it
    2  bad input

A CI job that accepts "pure golden drift" after an upgrade passes on 0 and 3.
"""

from __future__ import annotations

from harness import HarnessError

EXIT_IDENTICAL, EXIT_CHANGED, EXIT_BAD_INPUT, EXIT_EQUIVALENT, EXIT_UNDECIDED = 0, 1, 2, 3, 4
OUTCOME_EXIT = {"equivalent": EXIT_EQUIVALENT, "changed": EXIT_CHANGED, "undecided": EXIT_UNDECIDED}


class StatsInputError(ValueError, HarnessError):
    """The statistical golden cannot be made or read; the message says why and what to do."""


def seeds_for(first: int, n: int) -> list:
    """The N seeds of a statistical golden: the golden's own seed and the N - 1 after it."""
    return [int(first) + i for i in range(int(n))]


def more_seeds(first: dict, n: int, run) -> list:
    """``first`` (the golden's own run) and ``run(seed)`` for the N - 1 seeds after it."""
    out = [first]
    for seed in seeds_for(first["seed"], n)[1:]:
        result = run(seed)
        if result["status"] != "completed":
            raise StatsInputError(f"seed {seed} failed ({result['error']['type']}: {result['error']['message']}), so "
                                  "the statistical golden has no value for it.")
        out.append(result)
    return out


def check_request(n: int, declaration) -> None:
    """--seeds N against the declaration: a margin to be equivalent within, and enough seeds."""
    if declaration is None:
        raise StatsInputError("--seeds: the config declares no readable metrics (stats.metrics, stats.metric), "
                              "so there is nothing to record; declare them as for python -m harness.")
    if declaration.margin is None:
        raise StatsInputError(
            "--seeds: stats.margin is null, so no run can be shown equivalent to the golden. Declare the smallest "
            "difference that matters, e.g. stats.margin=0.5 (in the primary metric's units), or stats.margin=auto.")
    estimated = isinstance(declaration.margin, str)  # "auto": the margin comes from the seeds' spread
    need = seeds_for_both_outcomes(declaration.alpha, estimated)
    if n < need:
        margin = ("a margin estimated from the data (stats.margin=auto), whose bounds take half of alpha"
                  if estimated else f"the declared margin {declaration.margin:g}")
        other = ("; with a declared margin (e.g. stats.margin=0.5) it needs "
                 f"{seeds_for_both_outcomes(declaration.alpha, False)}" if estimated else "")
        raise StatsInputError(
            f"--seeds {n}: check must be able to say both 'changed' and 'equivalent', and with {margin} at "
            f"alpha {declaration.alpha:g} the exact sign-flip test reaches both only with {need} or more seeds "
            f"(with fewer a planted regression could only ever be 'undecided'); use --seeds {need} or more{other}.")


def seeds_for_both_outcomes(alpha: float, estimated: bool) -> int:
    """The fewest seeds with which check can reach both 'changed' (beyond the margin) and 'equivalent'
    at the levels compare() decides them at (an estimated margin's bounds take half of alpha)."""
    from harness.stats import claim_floors

    floors = claim_floors(alpha, 1, margin_share=0.5 if estimated else 1.0)
    return max(floors["beyond"], floors["equivalent"])


def record(results: list, declaration) -> dict:
    """The statistical part of a golden file: per declared metric, its value in each seed."""
    metrics = {}
    for name, spec in declaration.metrics.items():
        values = [(r.get("metrics") or {}).get(name) for r in results]
        if all(isinstance(v, (int, float)) for v in values):
            metrics[name] = {"direction": spec.direction, "unit": spec.unit, "values": values}
    if declaration.metric not in metrics:
        raise StatsInputError(f"the training function did not return the primary metric {declaration.metric!r} "
                              f"in every seed (it returned {', '.join(results[0].get('metrics') or {}) or 'nothing'}).")
    return {"seeds": [r["seed"] for r in results], "primary": declaration.metric, "metrics": metrics,
            "margin": declaration.margin, "alpha": declaration.alpha,
            "finals": [r["fingerprints"]["final"] for r in results]}


def compare(stat: dict, results: list) -> dict:
    """Golden vs now, paired by seed, on the primary metric (the others: mean differences)."""
    import numpy as np

    from harness.stats import compare as paired

    primary = stat["primary"]
    spec = stat["metrics"][primary]
    now = [(r.get("metrics") or {}).get(primary) for r in results]
    if not all(isinstance(v, (int, float)) for v in now):
        raise StatsInputError(f"a rerun did not return the primary metric {primary!r}.")
    unit = f" {spec['unit']}" if spec["unit"] else ""
    c = paired(np.asarray(spec["values"], float), np.asarray(now, float), margin=stat["margin"], alpha=stat["alpha"],
               arm="now", baseline="golden", unit=unit, higher_is_better=spec["direction"] == "max")
    code = c.verdict.code
    outcome = ("equivalent" if code in ("identical", "equivalent", "smaller_than_margin")
               else "changed" if code in ("better", "worse") else "undecided")
    others = {}
    for name, m in stat["metrics"].items():
        values = [(r.get("metrics") or {}).get(name) for r in results]
        if name != primary and all(isinstance(v, (int, float)) for v in values):
            others[name] = float(np.mean(np.subtract(values, m["values"])))
    return {"outcome": outcome, "code": code, "comparison": c, "unit": unit, "others": others,
            "identical_finals": sum(a == r["fingerprints"]["final"] for a, r in zip(stat["finals"], results))}


def _interval(iv, unit: str) -> str:
    return f"interval {iv.low:+.4g} to {iv.high:+.4g}{unit}, {100 * iv.level:.1f}%"


def message(stat: dict, cmp: dict) -> str:
    """The answer in one paragraph: equivalent / changed / undecided, with the interval that decided."""
    c, unit, n = cmp["comparison"], cmp["unit"], len(stat["seeds"])
    primary, m = stat["primary"], c.margin
    direction = stat["metrics"][primary]["direction"]
    within = f"±{m.low:.4g}{unit}" + (" (margin estimated from the data)" if m.estimated else "")
    seeds = f"{n} seeds ({stat['seeds'][0]}-{stat['seeds'][-1]}), paired with the golden's"
    if cmp["code"] == "identical":
        head = f"bits differ, results equivalent: {primary} is exactly the same in all {seeds}"
    elif cmp["outcome"] == "equivalent":
        head = (f"bits differ, results equivalent within {within} ({_interval(c.intervals['equivalent'], unit)}): "
                f"{primary} now - golden = {c.mean_diff:+.4g}{unit} over {seeds} "
                f"(TOST decision p {c.p_decision['equivalent']:.2g})")
    elif cmp["outcome"] == "changed":
        word = "better" if (c.mean_diff > 0) == (direction == "max") else "worse"
        head = (f"results changed: {primary} {word} by {abs(c.mean_diff):.4g}{unit} "
                f"({_interval(c.intervals['beyond'], unit)}), beyond ±{m.high:.4g}{unit}, over {seeds} "
                f"(minimum-effect decision p {c.p_decision['beyond']:.2g})")
    else:
        head = (f"undecided: {primary} now - golden = {c.mean_diff:+.4g}{unit} ({_interval(c.intervals['zero'], unit)}) "
                f"over {seeds}: neither within ±{m.low:.4g}{unit} nor beyond ±{m.high:.4g}{unit} is shown; "
                + (f"about {c.seeds_needed.to_settle_margin} seeds would settle it (--seeds)"
                   if c.seeds_needed.to_settle_margin else "more seeds (--seeds) or a declared margin would settle it"))
    lines = [head + "."]
    if cmp["others"]:
        lines.append("  other declared metrics, mean now - golden (not decided): " + ", ".join(
            f"{k} {v:+.4g}{(' ' + stat['metrics'][k]['unit']) if stat['metrics'][k]['unit'] else ''}"
            for k, v in cmp["others"].items()) + ".")
    lines.append(f"  final weights bit-identical to the golden's in {cmp['identical_finals']} of {n} seeds; "
                 f"verdict {cmp['code']} at alpha {stat['alpha']} (harness.stats.compare).")
    return "\n".join(lines)
