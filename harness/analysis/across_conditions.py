"""One A/B at several conditions (grid points, datasets, model sizes), read together.

Each condition keeps its own paired verdict; this module adds what the conditions say together,
for one arm against the baseline. The claims are decided by tests that hold alpha when each
condition's variance comes from a few seeds (stats/meta/claims.py); the random-effects model's
numbers (stats/meta/random_effects.py: REML, Hartung-Knapp, as metafor gives them) stand beside them:

- heterogeneity: does the effect differ between conditions? Decided by the Alexander-Govern test on
  the per-seed paired differences; Cochran's Q, the random-effects spread tau (REML) with its
  Q-profile interval and I^2 are reported with it;
- for a numeric setting with >= 3 values, the slope of the effect against it (least squares over the
  K effects, t on K-2 df; the REML meta-regression beside it): "the gain shrinks by ... per unit";
- the average effect (t over the K effects) with the random-effects estimate (REML, Hartung-Knapp)
  and the prediction interval for a new condition. Over grid points it is the average effect over
  THESE settings, not over a population of settings: labelled so;
- "better on k of K" (Holm across the K conditions), and rliable's probability of improvement and
  IQM difference (stratified paired bootstrap) for readers who know those.

Conditions whose differences do not vary (sd 0, e.g. identical arms) have no estimate of their own
noise; they are given the smallest variance among the other conditions, and the block says so.
"""

from __future__ import annotations

import math

import numpy as np

from harness import stats
from harness.config.metric_spec import PERCENT_UNITS
from harness.stats.meta import aggregates as meta_peers, claims as meta_claims, random_effects as meta

POOLED_LABEL = ("the average effect over these conditions (t test over the K per-condition effects, each one "
                "observation; the random-effects REML/Hartung-Knapp estimate beside it); the conditions are the "
                "ones run, not a random sample of all conditions")


def _finite(x):
    return None if x is None or not math.isfinite(x) else float(x)


def effects_of(conditions: list[dict]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Per condition: the paired effect (mean of b - a), its squared standard error, notes."""
    y, v, notes = [], [], []
    for c in conditions:
        d = stats.differences(c["a"], c["b"])
        y.append(float(np.mean(np.asarray(c["b"], float) - np.asarray(c["a"], float))))
        v.append(float(d.var(ddof=1)) / len(d))
    y, v = np.array(y), np.array(v)
    flat = v == 0
    if flat.any() and not flat.all():
        v[flat] = v[~flat].min()
        notes.append(f"{int(flat.sum())} condition(s) whose differences do not vary ("
                     + ", ".join(c["label"] for c, f in zip(conditions, flat) if f)
                     + ") were given the smallest variance among the others")
    return y, v, notes


def across(conditions: list[dict], *, direction: str, alpha: float, numeric: bool = False,
           n_resamples: int = 2000, bootstrap_seed: int = 0, unit: str = "") -> dict | None:
    """The block for one arm: ``conditions`` is a list of {label, value, a, b} (a, b: per-seed values
    of the baseline and the arm, paired by position). None when fewer than 2 conditions. ``unit``:
    the metric's; a metric in points or percent lies in [0, 100], so an effect in [-100, +100]."""
    if len(conditions) < 2:
        return None
    y, v, notes = effects_of(conditions)
    level = 1 - alpha
    k = len(conditions)
    block = {"conditions": k, "direction": direction, "effects": [float(e) for e in y], "standard_errors": [math.sqrt(x) for x in v],
             "labels": [c["label"] for c in conditions], "notes": notes}
    if (v == 0).all():
        block["not_computed"] = "no condition's differences vary (every seed moved by the same amount): no noise to weigh by"
        return block
    r = meta.random_effects(y, v, confidence_level=level)
    low, high = r.confidence_interval()
    diffs = [stats.differences(c["a"], c["b"]) for c in conditions]
    p_common = meta_claims.common_effect_pvalue(diffs)
    seeds = min(len(d) for d in diffs)
    decided = meta_claims.common_effect_decided(seeds, k)
    block["heterogeneity"] = {
        "test": "Alexander-Govern test of equal mean paired differences across conditions (each its own seed variance)",
        "pvalue": p_common, "differs": bool(decided and p_common < alpha),
        **({} if decided else {"not_decided": (
            f"not decided with {seeds} seeds a condition and {k} conditions: there the test's false-positive rate "
            f"is above alpha (scripts/bench_stats.py, section 7); it decides from 10 seeds a condition (up to 10 "
            f"conditions), or from 5 with at most 3 conditions")}),
        "q": r.q, "df": k - 1, "q_pvalue": r.q_pvalue,
        "q_note": "Cochran's Q treats each condition's estimated variance as known: with few seeds it rejects a "
                  "constant effect too often (scripts/bench_stats.py), so it is reported, not decided on",
        "tau": r.tau, "tau_ci": list(r.tau_interval), "tau2": r.tau2, "i2": r.i2, "i2_ci": list(r.i2_interval),
    }
    rows = meta_claims.average_rows(y, level)
    avg = {key: (val[0] if isinstance(val, np.ndarray) else val) for key, val in rows.items() if key != "prediction"}
    avg["prediction"] = (rows["prediction"][0][0], rows["prediction"][1][0])
    block["pooled"] = {
        "label": POOLED_LABEL, "estimate": float(avg["mean"]), "ci": [float(avg["low"]), float(avg["high"])],
        "confidence_level": level, "standard_error": float(avg["se"]), "df": int(avg["df"]), "pvalue": float(avg["pvalue"]),
        "random_effects": {"estimate": r.estimate, "ci": [low, high], "standard_error": r.standard_error,
                           "pvalue": r.pvalue, "method": r.method,
                           "prediction_interval": list(r.prediction_interval) if r.prediction_interval else None},
        "prediction_interval": [float(avg["prediction"][0]), float(avg["prediction"][1])],
        "prediction_note": "where a new condition run the same way should fall: mean +- t(K-1) sd sqrt(1 + 1/K) of the "
                           "K effects (covers its true effect at >= the level: scripts/bench_stats.py, section 6)",
    }
    _within_range(block["pooled"], unit)
    values = [c.get("value") for c in conditions]
    if numeric:
        if len({float(x) for x in values}) >= 3:
            xs = [float(x) for x in values]
            ols = {key: (val[0] if isinstance(val, np.ndarray) else val) for key, val in meta_claims.slope_rows(y, xs, level).items()}
            s = meta.effect_slope(y, v, xs, confidence_level=level)
            block["slope"] = {
                "per_unit": float(ols["slope"]), "ci": [float(ols["low"]), float(ols["high"])], "confidence_level": level,
                "pvalue": float(ols["pvalue"]), "df": int(ols["df"]), "intercept": float(ols["intercept"]),
                "method": "least squares of the K effects on the setting, t on K-2 df",
                "meta_regression": {"per_unit": s.slope, "ci": list(s.confidence_interval()), "pvalue": s.pvalue,
                                    "tau_residual": math.sqrt(s.tau2), "q_residual": s.q_residual,
                                    "q_residual_pvalue": s.q_residual_pvalue, "method": s.method},
            }
        else:
            block["slope"] = {"not_computed": f"a slope needs at least 3 distinct values ({len(set(values))} here); "
                                              "the heterogeneity test is the test of a difference between them"}
    tests = [stats.paired_t(c["a"], c["b"], confidence_level=level) for c in conditions]
    b = meta.better_on([t.pvalue for t in tests], [t.estimate for t in tests],
                       higher_is_better=direction == "max", alpha=alpha)
    block["better_on"] = {"better": b.better, "worse": b.worse, "conditions": b.conditions,
                          "pvalues_holm": list(b.adjusted_pvalues), "multiplicity": b.multiplicity}
    a_runs, b_runs = [c["a"] for c in conditions], [c["b"] for c in conditions]
    if direction == "min":  # rliable's aggregates read "higher is better": flip the sign for a metric to lower
        a_runs, b_runs = [-np.asarray(x, float) for x in a_runs], [-np.asarray(x, float) for x in b_runs]
    poi = meta_peers.probability_of_improvement(a_runs, b_runs, confidence_level=level, n_resamples=n_resamples,
                                                rng=bootstrap_seed)
    iqm = meta_peers.iqm_difference(a_runs, b_runs, confidence_level=level, n_resamples=n_resamples,
                                    rng=bootstrap_seed)["difference"]
    sign = -1.0 if direction == "min" else 1.0
    iqm_ci = sorted([sign * iqm.low, sign * iqm.high])
    block["peers"] = {
        "probability_of_improvement": {"estimate": poi.statistic, "ci": [poi.low, poi.high], "definition": poi.definition},
        "iqm_difference": {"estimate": sign * iqm.statistic, "ci": iqm_ci, "definition": iqm.definition,
                           "units": "the metric's own (arm - baseline)"},
        "n_resamples": n_resamples, "bootstrap_seed": bootstrap_seed,
    }
    return block


def _within_range(pooled: dict, unit: str) -> None:
    """A bounded metric's prediction intervals within the range its effect can take: the t arithmetic
    knows no bounds, and with few, spread conditions it reaches far past them ([-373, +401] pts for an
    accuracy). The interval as computed is kept beside, and a note says why it was cut."""
    if unit not in PERCENT_UNITS:  # no range known: the interval stands as computed
        return
    low, high = -100.0, 100.0  # a difference of two values in [0, 100]
    intervals = {"pooled": pooled["prediction_interval"], "random effects": pooled["random_effects"]["prediction_interval"]}
    computed = {name: [float(x) for x in pi] for name, pi in intervals.items() if pi}
    if all(low <= pi[0] and pi[1] <= high for pi in computed.values()):
        return
    for pi in intervals.values():
        if pi:
            pi[0], pi[1] = max(pi[0], low), min(pi[1], high)
    pooled["prediction_range"] = {
        "range": [low, high], "computed": computed,
        "note": (f"an effect on a metric in [0, 100] {unit} lies in [-100, +100] {unit}: the prediction interval is cut "
                 "there; as computed it reached past that range, which says these conditions' effects vary too much "
                 "to predict a new one more narrowly than the whole range"),
    }


def sentence(block: dict, *, arm: str, baseline: str, unit: str = "", kind: str = "conditions") -> str:
    """The claim in words, one line."""
    if not block or "pooled" not in block:
        return ""
    u = f" {unit}" if unit else ""
    p, h = block["pooled"], block["heterogeneity"]
    low, high = p["ci"]
    if low > 0 or high < 0:
        word = "differs from" if block.get("direction") not in ("max", "min") else (
            "is better than" if (p["estimate"] > 0) == (block["direction"] == "max") else "is worse than")
        head = f"{arm} {word} {baseline} on average across {block['conditions']} {kind} by {p['estimate']:+.3g}{u}"
    else:
        head = (f"across {block['conditions']} {kind}, the average effect of {arm} vs {baseline} is {p['estimate']:+.3g}{u}, "
                "not distinguishable from 0")
    head += f" ({100 * p['confidence_level']:.0f}% CI [{low:+.3g}, {high:+.3g}])"
    if h.get("not_decided"):
        spread = (f"whether the effect varies between {kind} is {h['not_decided'].replace(' conditions', ' ' + kind)} "
                  f"(tau {h['tau']:.3g}{u}, p = {h['pvalue']:.3g}, information only)")
    elif h["differs"]:
        spread = f"the effect varies between {kind} (tau {h['tau']:.3g}{u}, p = {h['pvalue']:.3g})"
    else:
        spread = f"no variation between {kind} is shown (tau {h['tau']:.3g}{u}, p = {h['pvalue']:.3g})"
    parts = [head, spread]
    if p["prediction_interval"]:
        lo, hi = p["prediction_interval"]
        expect = f"on a new {kind[:-1] if kind.endswith('s') else kind} expect [{lo:+.3g}, {hi:+.3g}]{u}"
        cut = p.get("prediction_range")
        if cut:
            c_lo, c_hi = cut["computed"]["pooled"]
            expect += (f" (the whole range an effect can take: the interval as computed, [{c_lo:+.3g}, {c_hi:+.3g}]{u}, "
                       "reached past it)")
        parts.append(expect)
    b = block["better_on"]
    parts.append(f"better on {b['better']} of {b['conditions']}, worse on {b['worse']} (Holm across {kind})")
    return "; ".join(parts) + "."


def _n(x) -> str:
    return "n/a" if x is None else f"{x:+.3g}"


def lines(block: dict, *, arm: str, baseline: str, unit: str = "", key: str | None = None, kind: str = "points") -> list[str]:
    """Markdown lines: the heterogeneity test, the slope, the pooled estimate, better-on, the peers."""
    u = f" {unit}" if unit else ""
    out = [f"**{arm} vs {baseline}**: {block.get('sentence', '')}", ""]
    if "heterogeneity" not in block:
        return out + [f"- not computed: {block.get('not_computed', '')}", ""]
    h, p = block["heterogeneity"], block["pooled"]
    out.append(f"- does the effect differ between {kind}? Alexander-Govern p = {h['pvalue']:.3g} "
               f"({h['not_decided'] if h.get('not_decided') else 'yes' if h['differs'] else 'not shown'}); tau = {h['tau']:.3g}{u} [{h['tau_ci'][0]:.3g}, {h['tau_ci'][1]:.3g}] "
               f"(REML, Q-profile interval); I^2 = {100 * h['i2']:.0f}% [{100 * h['i2_ci'][0]:.0f}%, {100 * h['i2_ci'][1]:.0f}%]; "
               f"Cochran's Q = {h['q']:.3g} on {h['df']} df, p = {h['q_pvalue']:.3g} ({h['q_note']})")
    slope = block.get("slope")
    if slope and "per_unit" in slope:
        out.append(f"- slope of the effect against {key}: {_n(slope['per_unit'])}{u} per unit of {key}, "
                   f"{100 * slope['confidence_level']:.0f}% CI [{_n(slope['ci'][0])}, {_n(slope['ci'][1])}], p = {slope['pvalue']:.3g} "
                   f"({slope['method']}); REML meta-regression: {_n(slope['meta_regression']['per_unit'])}{u} per unit, "
                   f"p = {slope['meta_regression']['pvalue']:.3g}")
    elif slope:
        out.append(f"- slope: {slope['not_computed']}")
    pi = p["prediction_interval"]
    out.append(f"- pooled: {_n(p['estimate'])}{u}, {100 * p['confidence_level']:.0f}% CI [{_n(p['ci'][0])}, {_n(p['ci'][1])}], "
               f"p = {p['pvalue']:.3g}; random effects (REML, Hartung-Knapp): {_n(p['random_effects']['estimate'])}{u} "
               f"[{_n(p['random_effects']['ci'][0])}, {_n(p['random_effects']['ci'][1])}]; prediction interval "
               + (f"[{_n(pi[0])}, {_n(pi[1])}]{u}" if pi else "n/a") + f". This is {p['label']}.")
    if p.get("prediction_range"):
        out.append(f"- prediction interval: {p['prediction_range']['note']} (as computed: "
                   + "; ".join(f"{name} [{_n(pi[0])}, {_n(pi[1])}]{u}" for name, pi in p["prediction_range"]["computed"].items())
                   + ")")
    b = block["better_on"]
    out.append(f"- better on {b['better']} of {b['conditions']}, worse on {b['worse']}: {b['multiplicity']}")
    peers = block["peers"]
    poi, iqm = peers["probability_of_improvement"], peers["iqm_difference"]
    out.append(f"- for readers of rliable: probability of improvement {poi['estimate']:.3g} "
               f"[{poi['ci'][0]:.3g}, {poi['ci'][1]:.3g}]; IQM difference {_n(iqm['estimate'])}{u} "
               f"[{_n(iqm['ci'][0])}, {_n(iqm['ci'][1])}] (stratified paired bootstrap, {peers['n_resamples']} resamples)")
    for note in block["notes"]:
        out.append(f"- note: {note}")
    return out + [""]


__all__ = ["POOLED_LABEL", "across", "effects_of", "lines", "sentence"]
