"""What an analysis reads from its result dicts: checked, paired and made compact (``gather``).

analyze() is gather() then decide(). Every check that reads the result dicts runs here, before
any statistics, in this order: one experiment, the declaration, one identity, one run per (seed,
arm), one configuration per arm, the metric, usable values, pairing, partners. What it returns, a
Gathered, holds no result dict: per run only the value, the metrics, the factor's value and the
final fingerprint, and beside them the per-example outcomes, the curves and the identity block.
So it can be handed to a second process that has imported the statistics (scipy) meanwhile
(decide.StatisticsApart, analyze_dir's ``apart``), and the results freed once it is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from harness import stats
from harness import results as results_io
from harness.analysis.identity import comparability, run_identity
from harness.analysis.identity import copies as run_copies
from harness.analysis import diverged as diverged
from harness.analysis import curves, example_records, run_setup
from harness.analysis.identity.seed_reach import seed_ignored
from harness.analysis.selection import (
    AnalysisError, _arm_order, _check_duplicates, _check_metric_exists, _check_one_configuration_per_arm,
    _check_options, _check_pairing, _common_n_test, _describe_excluded, _drop_unpaired, _names,
    _one_experiment, _seed_key, _sorted_entries, _usable_runs,
)
from harness.config import declaration as declaration_io
from harness.config.declaration import Declaration
from harness.config.metric_spec import DeclarationError

CHOICES = ("metric", "margin", "alpha", "baseline", "direction", "directions", "bootstrap_resamples",
           "bootstrap_seed")


@dataclass
class Gathered:
    """The checked, compact inputs of one analysis (see the module's docstring)."""

    decl: Declaration
    experiment: object
    factor: object
    arms: list
    baseline: str
    ident: dict  # analysis.json's identity block
    usable: dict  # (seed, arm) -> {"value", "result": {seed, arm, metrics, factor_value, fingerprints.final}}
    verified: list  # the fingerprints that prove the pairing (empty when it is not proven)
    pairing: dict  # analysis.json's pairing block: each fingerprint's state, the basis, proven or not
    compared: dict  # arm -> the seeds compared with the baseline
    not_compared: list
    excluded: list
    n_test: int | None
    examples: tuple  # example_records.examples: (arm -> outcome arrays, or None; the note)
    factor_values: dict  # arm -> the factor's value
    setup: dict
    curves: dict
    data_unverified: int
    unreadable: list
    extra: dict
    diverged: dict = field(default_factory=dict)  # diverged.gathered(): the rule, the runs, the counted pairs
    examples_set_aside: dict | None = None  # results.set_aside_note: per-example records no metric owns


def gather(results: list[dict], declaration: Declaration | None = None, *, unreadable=(),
           extra: dict | None = None, allow_mixed_identity: bool = False, later: list | None = None,
           **choices) -> Gathered:
    """analyze()'s checks and everything it reads from ``results`` (same arguments); AnalysisError
    when they cannot be compared.

    ``later``: a list to which what the statistics never read (the curves, the inputs digest) is
    appended as one function that fills them in, left empty meanwhile: made while a second process
    computes the statistics (analyze_dir's ``apart``), not before it can start (fill_later)."""
    results = list(results)
    if not results:
        raise AnalysisError("There are no results to analyse: the list of result dicts is empty.")
    experiment, factor = _one_experiment(results)
    decl = declared(results, declaration, choices)
    metric, alpha, bootstrap_resamples = decl.metric, decl.alpha, decl.bootstrap_resamples
    _check_options(metric, alpha, bootstrap_resamples)
    arms = _arm_order(results)
    if len(arms) < 2:
        raise AnalysisError(
            f"Only one arm ({arms[0]!r}) has results; an A/B comparison needs at least two arms of "
            f"the same experiment. Point the analysis at the folder that holds all arms."
        )
    baseline = decl.baseline or arms[0]
    if baseline not in arms:
        raise AnalysisError(f"The baseline arm {baseline!r} has no results; the arms are: {_names(arms)}.")
    others = [a for a in arms if a != baseline]
    try:
        ident = comparability.check(results, baseline=baseline, others=others, allow_mixed=allow_mixed_identity)
    except run_identity.IdentityError as e:
        raise AnalysisError(str(e)) from None
    results, copies = _check_duplicates(results)
    ident["copies"] = copies
    ident["inputs_digest"] = None if later is not None else run_copies.inputs_digest(results)  # its place
    _check_one_configuration_per_arm(results, arms)
    _check_metric_exists(results, metric)
    if metric not in decl.metrics:
        raise AnalysisError(decl._undeclared(metric))
    spec = decl.primary

    usable, excluded = _usable_runs(results, spec)
    ignored = seed_ignored(usable, arms, metric)  # seeds that all ran the same training measure no noise
    if ignored:
        raise AnalysisError(ignored)
    div = diverged.gathered(decl.diverged, usable, excluded, baseline, others, spec.higher_is_better)
    verified, pairing = _check_pairing(usable)
    usable, unpaired = _drop_unpaired(usable, baseline, others)
    excluded = excluded + unpaired

    by_arm = {arm: {seed: run for (seed, a), run in usable.items() if a == arm} for arm in arms}
    compared = {}
    too_few = []
    for arm in others:
        seeds = sorted(set(by_arm[baseline]) & set(by_arm[arm]), key=_seed_key)
        compared[arm] = seeds
        if len(seeds) < stats.MIN_PAIRS:
            too_few.append(f"{arm} vs {baseline} has {len(seeds)} (seeds {_names(seeds) or 'none'})")
    not_compared = []
    # under worst, an arm that diverged too often to leave enough finished pairs for a size is still
    # decided on all its pairs, the diverged ones counted (analysis/diverged.py): no size, a verdict
    by_rank = {a for a, p in div["pairs"].items() if len(compared[a]) < stats.MIN_PAIRS <= len(p["seeds"])}
    if too_few and (len(too_few) < len(others) or by_rank):
        # Report on the comparisons that have enough pairs; name the ones that do not.
        for arm in [a for a in others if len(compared[a]) < stats.MIN_PAIRS]:
            seeds = compared.pop(arm)
            reason = f"{len(seeds)} complete pair(s); at least {stats.MIN_PAIRS} are needed"
            if arm in by_rank:
                reason += (f" to estimate a size; decided on all {len(div['pairs'][arm]['seeds'])} pairs "
                           f"with the diverged runs counted as worst")
            not_compared.append({"arm": arm, "baseline": baseline, "n_pairs": len(seeds), "seeds": list(seeds),
                                 "reason": reason})
    elif too_few:
        raise AnalysisError(
            f"Too few complete pairs: {'; '.join(too_few)}. At least {stats.MIN_PAIRS} seeds with a "
            f"usable result in both arms are needed to estimate seed noise."
            + (f" Excluded runs: {_describe_excluded(_sorted_entries(excluded, arms))}." if excluded else "")
            + " Run more seeds, or fix the failed runs and re-run them."
        )

    # the diverged pairs of a comparison that is made, or of an arm decided on them alone, are counted
    # in it, not left out; any other arm with too few pairs keeps its diverged runs in the left-out list
    div["pairs"] = {arm: p for arm, p in div["pairs"].items() if arm in compared or arm in by_rank}
    if div["pairs"]:
        counted = diverged.counted_seeds(div["pairs"], baseline)
        excluded = [e for e in excluded if (e["seed"], str(e["arm"])) not in counted]
    excluded = _sorted_entries([{k: v for k, v in e.items() if k != "diverged"} for e in excluded], arms)
    if later is not None:
        later.append(lambda g, results=results, usable=usable: _fill(g, run_copies.inputs_digest(results),
                                                                     curves.curves(usable, arms)))
    return Gathered(
        decl=decl, experiment=experiment, factor=factor, arms=arms, baseline=baseline, ident=ident,
        usable={key: _compact(run) for key, run in usable.items()}, verified=verified, pairing=pairing, compared=compared,
        not_compared=not_compared, excluded=excluded,
        n_test=_common_n_test(usable) if spec.examples else None,
        examples=example_records.examples(compared, by_arm, baseline, spec),
        factor_values={arm: _factor_value(arm, results) for arm in arms},
        setup=run_setup.setup(usable), curves={} if later is not None else curves.curves(usable, arms),
        # runs whose data files were trusted without their checksums (data.verify=false): the report says so
        data_unverified=sum(((r.get("config") or {}).get("data") or {}).get("verify") is False for r in results),
        unreadable=[{"path": str(path), "reason": str(reason)} for path, reason in unreadable],
        extra=dict(extra or {}), diverged=div, examples_set_aside=results_io.set_aside_note(results),
    )


def _fill(g: Gathered, inputs_digest: str, curves: dict) -> None:
    g.ident["inputs_digest"], g.curves = inputs_digest, curves


def fill_later(analysis: dict, g: Gathered) -> dict:
    """``analysis`` (decide() of ``g`` before gather's ``later`` ran) with what they filled in since,
    each in the place decide() gave it: the same analysis as decide() of the filled ``g``."""
    from harness.analysis.blocks import _plain

    analysis["identity"]["inputs_digest"] = g.ident["inputs_digest"]
    analysis["curves"] = _plain(g.curves)
    return analysis


def _compact(run: dict) -> dict:
    """A usable run as the statistics and the blocks read it: no config, curves or step fingerprints."""
    r = run["result"]
    final = (r.get("fingerprints") or {}).get("final")
    return {"value": run["value"], "result": {"seed": r.get("seed"), "arm": r.get("arm"), "metrics": r.get("metrics"),
                                              "factor_value": r.get("factor_value"), "fingerprints": {"final": final}}}


def _factor_value(arm, results):
    """The arm's own record of its factor's value first, else what the config says the arm sets."""
    for r in results:
        if str(r.get("arm")) == arm and r.get("factor_value") is not None:
            return r["factor_value"]
    for r in results:
        configured = ((r.get("config") or {}).get("ab") or {}).get("arms") or {}
        if arm in configured:
            return configured[arm]
    return None


def _of_results_or_flags(results, choices: Mapping) -> Declaration:
    """The results' own declaration; for results that carry none (written by another tool: their
    config has no stats block), the one --metric and --direction make, which is then what was asked."""
    try:
        return declaration_io.of_results(results)
    except DeclarationError:
        metric, direction = choices.get("metric"), choices.get("direction")
        if not (metric and direction):
            raise
    first = results[0]
    arms = {str(r.get("arm")): r.get("factor_value") for r in results}
    return Declaration.from_config({"experiment_name": first.get("experiment") or "default",
                                    "ab": {"factor": first.get("factor"), "arms": arms},
                                    "stats": {"metric": metric, "metrics": {metric: direction}}}, strict=False)


def declared(results, declaration: Declaration | None, choices: Mapping) -> Declaration:
    """The declaration to analyse with: the given one (else the results' own), with ``choices``
    as an alternative. AnalysisError for a choice that is not one, or a declaration that cannot be read."""
    unknown = sorted(set(choices) - set(CHOICES))
    if unknown:
        raise TypeError(f"analyze() got unexpected keyword argument(s) {', '.join(unknown)}; "
                        f"the analysis choices are {', '.join(CHOICES)}.")
    try:
        decl = declaration if declaration is not None else _of_results_or_flags(results, choices)
        picked = {k: v for k, v in choices.items() if v is not None}
        resampling = {k: picked.pop(k) for k in ("bootstrap_resamples", "bootstrap_seed") if k in picked}
        if "margin" not in picked:
            picked["margin"] = "declared"
        decl = decl.alternative(**picked)
    except DeclarationError as e:
        raise AnalysisError(str(e)) from None
    for key, value in resampling.items():
        if value != getattr(decl, key):
            decl = replace(decl, departures=decl.departures + (f"{key.replace('_', ' ')} {value} (declared: "
                                                              f"{getattr(decl, key)})",), **{key: value})
    return decl
