"""How a sequential A/B of candidate (arm B) against baseline (arm A) reads as keep, discard or undecided.

The mapping, argued in docs/code-arms.md ("A judge for research loops"):
- better (beyond the margin when one is declared), with the claim's p at most the ledger's alpha_t: keep;
- worse: discard; equivalent (within a declared margin: the change does not matter): discard;
- identical results (the candidate changes no number): discard, a change that improves nothing;
- futile (stopped early: showing it better by max_seeds is unlikely): discard, not shown better and
  not worth more seeds;
- undecided at the maximum, or better with p above alpha_t: undecided (not shown better, not shown
  worse: a loop should not keep it, and may rerun it with more seeds).

The judge runs the design with ``FUTILITY_RULE``: a run stops for futility when the predictive chance
that max_seeds shows the candidate better is below ab.sequential.futility. The stop is non-binding
(the boundaries of "better" are those of a design without it), so it never raises the false-keep
rate; it spares the seeds of edits that are not heading for "better", most of a loop's edits. It is
asked from ``FUTILITY_FROM`` seeds on, at futility-only looks that spend no alpha, before the first look
at which the loop's small alpha_t allows a claim: a candidate that changes no number stops there.
"""

from __future__ import annotations

from typing import Optional

KEEP, DISCARD, UNDECIDED = "keep", "discard", "undecided"
FUTILITY_RULE = "better"  # ab.sequential.futility_rule of a judgement, unless its overrides set another
# ab.sequential.futility_from of a judgement: futility-only looks from 4 seeds, every seeds_per_look, up to the
# first claim look (at a loop's small alpha_t, 12-15 seeds); unless the overrides set it, another rule, or no futility
FUTILITY_FROM = 4
EXIT = {KEEP: 0, DISCARD: 1, UNDECIDED: 3}
BAD_INPUT = 2


def judgement(analysis: dict, alpha_t: float, arm: str = "B") -> dict:
    """The verdict and its numbers from a sequential run's analysis.json (arm ``arm`` against the baseline)."""
    sequential = (analysis.get("sequential") or {}).get("arms", {}).get(arm) or {}
    comparison = (analysis.get("comparisons") or {}).get(arm) or {}
    looks = sequential.get("looks") or []
    look = looks[-1] if looks else {}
    decision = sequential.get("decision") or "none"
    p = _p(comparison)
    identical = (comparison.get("verdict") or {}).get("code") == "identical"
    margin = (analysis.get("declaration") or {}).get("margin")  # the declared one (None: better/worse than 0 only)
    design = (analysis.get("sequential") or {}).get("design") or {}
    stop = _stopped_by(decision, look, design)
    early = look.get("nominal_alpha") == 0  # a futility-only look spends no alpha and has no interval
    verdict, why = _map(decision, identical, p, alpha_t, margin, stop)
    return {"verdict": verdict, "why": why, "decision": decision, "stopped_by": stop,
            "effect": look.get("estimate", comparison.get("mean_diff")),
            "interval": None if early else look.get("interval"),
            "interval_level": None if early else look.get("level"),
            "seeds": sequential.get("seeds", comparison.get("seeds", [])),
            "n": sequential.get("n", comparison.get("n_pairs")),
            "p": p, "sign_flip_p": look.get("sign_flip_p"), "alpha_t": alpha_t,
            "metric": analysis.get("metric"), "direction": analysis.get("direction"), "margin": margin,
            "sentence": sequential.get("sentence")}


def _p(comparison: dict) -> Optional[float]:
    """The claim's decision p: the larger of the t test's and the exact sign-flip test's two-sided p on the
    seeds the run stopped at (analysis.json's decision p of "differs from 0", the ledger's p_decision)."""
    return ((comparison.get("decision") or {}).get("pvalues") or {}).get("zero")


def _stopped_by(decision: str, look: dict, design: dict) -> Optional[dict]:
    """Which rule of the design ended the run: a claim's boundary, the futility rule, or the last look."""
    if decision in ("better", "worse", "equivalent"):
        return {"rule": "boundary", "claim": decision, "look": look.get("look"), "n": look.get("n")}
    if decision == "futile":
        return {"rule": "futility", "futility_rule": design.get("futility_rule", "reach"),
                "chance": look.get("chance_to_settle"), "threshold": design.get("futility"),
                "look": look.get("look"), "n": look.get("n")}
    if decision == "undecided":
        return {"rule": "max_seeds", "look": look.get("look"), "n": look.get("n")}
    return None


def _map(decision: str, identical: bool, p, alpha_t: float, margin, stop=None) -> tuple[str, str]:
    if identical:
        return DISCARD, "identical results: the candidate changes no number the metric reads"
    if decision == "better":
        if p is not None and p <= alpha_t:
            return KEEP, f"better than the baseline, p = {p:.4g} <= alpha_t = {alpha_t:.4g}"
        return UNDECIDED, (f"the sequential design says better, but the claim's p = {p} is above the ledger's "
                           f"alpha_t = {alpha_t:.4g}: not kept")
    if decision == "worse":
        return DISCARD, "worse than the baseline"
    if decision == "equivalent" and margin is not None:
        return DISCARD, f"equivalent to the baseline within the declared margin {margin}: no improvement that matters"
    if decision == "futile":
        stop = stop or {}
        chance, threshold = stop.get("chance"), stop.get("threshold")
        said = f" ({chance:.2g} < {threshold:g})" if chance is not None and threshold is not None else ""
        if stop.get("futility_rule") == "better":
            asked = f"the predictive chance that the maximum number of seeds shows it better is below futility{said}"
        else:
            asked = f"no effect inside the interval gives any claim a futility chance by the maximum{said}"
        return DISCARD, (f"futile: stopped for futility after {stop.get('n')} seeds, {asked}; not shown better "
                         "(a non-binding stop: no claim that it is worse)")
    return UNDECIDED, f"the sequential run ended {decision}: not shown better or worse"
