"""How a sequential A/B of candidate (arm B) against baseline (arm A) reads as keep, discard or undecided.

The mapping, argued in docs/code-arms.md ("A judge for research loops"):
- better (beyond the margin when one is declared), with the claim's p at most the ledger's alpha_t: keep;
- worse: discard; equivalent (within a declared margin: the change does not matter): discard;
- identical results (the candidate changes no number): discard, a change that improves nothing;
- futile, undecided at the maximum, or better with p above alpha_t: undecided (not shown better, not
  shown worse: a loop should not keep it, and may rerun it with more seeds).
"""

from __future__ import annotations

from typing import Optional

KEEP, DISCARD, UNDECIDED = "keep", "discard", "undecided"
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
    verdict, why = _map(decision, identical, p, alpha_t, margin)
    return {"verdict": verdict, "why": why, "decision": decision,
            "effect": look.get("estimate", comparison.get("mean_diff")),
            "interval": look.get("interval"), "interval_level": look.get("level"),
            "seeds": sequential.get("seeds", comparison.get("seeds", [])),
            "n": sequential.get("n", comparison.get("n_pairs")),
            "p": p, "sign_flip_p": look.get("sign_flip_p"), "alpha_t": alpha_t,
            "metric": analysis.get("metric"), "direction": analysis.get("direction"), "margin": margin,
            "sentence": sequential.get("sentence")}


def _p(comparison: dict) -> Optional[float]:
    """The claim's decision p: the larger of the t test's and the exact sign-flip test's two-sided p on the
    seeds the run stopped at (analysis.json's decision p of "differs from 0", the ledger's p_decision)."""
    return ((comparison.get("decision") or {}).get("pvalues") or {}).get("zero")


def _map(decision: str, identical: bool, p, alpha_t: float, margin) -> tuple[str, str]:
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
        return UNDECIDED, "futile: the maximum number of seeds could not settle it; not shown better"
    return UNDECIDED, f"the sequential run ended {decision}: not shown better or worse"
