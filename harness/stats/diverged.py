"""Pairs in which a run diverged (a non-finite loss or metric), counted as worse than every finished
run of its seed: the exact sign-flip test on the pairs' signed ranks (pure numpy).

Leaving a diverged run out (with its partner) keeps only the seeds where both arms finished: when
the arm that diverges more often looks better on the survivors, the verdict is biased in its
favour (survivorship). Counted instead, a pair in which only the arm diverged is a loss for the
arm, of unknown but largest size; one in which only the baseline diverged is a win; both diverged,
a tie. Such differences have no mean, but they have ranks: the magnitudes |d| are ranked (the
diverged pairs share the top rank, ties averaged; ties at 0 drop out), and under H0 "the arms are
exchangeable within a seed" every sign pattern of the signed ranks is equally likely. The exact
sign-flip test of their sum (the Wilcoxon signed-rank statistic) is then valid at any n, with the
divergence counted by the rule declared before the data (``stats.diverged: worst``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._core import Result


@dataclass(frozen=True)
class DivergedPairsTest(Result):
    """The signed-rank sign-flip test of pairs with divergences counted as worst; d = arm - baseline
    oriented so that positive is better."""

    n_pairs: int  # pairs compared: finished pairs and pairs with a divergence
    arm_only: int  # pairs in which only the arm diverged (a loss for the arm)
    baseline_only: int  # pairs in which only the baseline diverged (a win for the arm)
    both: int  # pairs in which both diverged (a tie)
    statistic: float  # the sum of the signed ranks (positive: the arm tends to be better)
    pvalue: float  # two-sided: 2 min(P(S >= s), P(S <= s)), at most 1
    method: str  # "exact", "upper bound" or "normal limit" (sign_flip.sign_flip_method)


def signed_ranks(d) -> np.ndarray:
    """The signed ranks of ``d`` along its last axis (±inf allowed: the largest), average ranks for
    ties, 0 for d = 0 (zeros drop out: the others are ranked among themselves)."""
    from scipy.stats import rankdata

    d = np.asarray(d, dtype=float)
    if np.isnan(d).any():
        raise ValueError("signed_ranks: a difference is NaN; a pair in which both runs diverged is a tie, 0.")
    zeros = np.sum(d == 0, axis=-1, keepdims=True)  # the smallest |d|: every other rank is shifted by them
    return (rankdata(np.abs(d), axis=-1) - zeros) * np.sign(d)


def diverged_pvalues(d) -> np.ndarray | float:
    """The two-sided p of the test above, per row of ``d`` (1-D: one experiment)."""
    p = _two_sided(np.atleast_2d(signed_ranks(d)))
    return float(p[0]) if np.ndim(d) == 1 else p


def _two_sided(r) -> np.ndarray:
    """2 min(P(S >= s), P(S <= s)), at most 1, per row of signed ranks ``r``."""
    from .decision_p import _tail  # exact up to 24 pairs, the grid's upper bound, then the normal limit

    return np.minimum(1.0, 2 * np.minimum(_tail(r), _tail(-r)))


def diverged_pairs_test(d, *, both: int = 0, scale: float | None = None) -> DivergedPairsTest:
    """The test above on one experiment's pair differences ``d`` (positive = the arm better): +inf
    where only the baseline diverged, -inf where only the arm did, 0 where both did (``both``: how
    many of the zeros are such pairs). ``scale``: the largest |value| of the finished runs compared;
    given, the differences are ranked rounded as every other test rounds them, so that two equal
    differences with different float noise (+1 example is 0.27777777777777146 or 0.2777777777777857)
    tie."""
    from ._core import rounded_differences
    from .sign_flip import sign_flip_method

    d = np.asarray(d, dtype=float) if scale is None else rounded_differences(d, scale)
    r = signed_ranks(d)
    return DivergedPairsTest(
        n_pairs=int(d.size), arm_only=int(np.sum(d == -np.inf)), baseline_only=int(np.sum(d == np.inf)),
        both=int(both), statistic=float(r.sum()), pvalue=float(_two_sided(r[None])[0]),
        method=sign_flip_method(int(np.sum(r != 0))),
    )


__all__ = ["DivergedPairsTest", "diverged_pairs_test", "diverged_pvalues", "signed_ranks"]
