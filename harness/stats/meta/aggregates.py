"""Aggregates across conditions as rliable defines them, for readers who know them (Agarwal et al.
2021, "Deep reinforcement learning at the edge of the statistical precipice", NeurIPS; the rliable
library): the probability of improvement and the interquartile mean (IQM), each with a stratified
bootstrap interval. Here they run on paired runs: arm ``b`` and baseline ``a`` share the seed at each
position of a condition, and a bootstrap resample draws seeds (both arms' runs of a seed together)
within each condition, so the pairing survives resampling.

Inputs are lists with one 1-D array per condition (its seeds), so conditions may have different
numbers of seeds. The scores must be on one scale (see random_effects.common_scale): the IQM pools raw scores.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._core import ConfidenceInterval, Result


def _conditions(a, b):
    a = [np.asarray(x, dtype=float) for x in a]
    b = [np.asarray(x, dtype=float) for x in b]
    if len(a) != len(b) or not a or any(x.ndim != 1 or x.shape != y.shape or len(x) < 2 for x, y in zip(a, b)):
        raise ValueError("a and b need one 1-D array per condition, paired by position within each condition "
                         "(one value per seed, at least 2 seeds).")
    return a, b


def _probability_of_improvement(a, b) -> float:
    """rliable's P(X > Y): per condition the Mann-Whitney probability that a run of b beats a run of a
    (ties count 1/2), over every (b run, a run) pair, then averaged over conditions."""
    per = [float(np.mean((y[:, None] > x[None, :]) + 0.5 * (y[:, None] == x[None, :]))) for x, y in zip(a, b)]
    return float(np.mean(per))


def _iqm(scores) -> float:
    from scipy import stats as sps

    return float(sps.trim_mean(np.concatenate(scores), 0.25))


@dataclass(frozen=True)
class AggregateResult(Result):
    """One aggregate with its stratified-bootstrap percentile interval."""

    statistic: float
    low: float
    high: float
    confidence_level: float
    n_resamples: int
    definition: str

    def confidence_interval(self) -> ConfidenceInterval:
        return ConfidenceInterval(self.low, self.high)


def _resamples(a, rng, n_resamples):
    """Seed indices per condition per resample (stratified: within each condition)."""
    return [rng.integers(0, len(x), (n_resamples, len(x))) for x in a]


def _interval(values, level):
    return float(np.quantile(values, 0.5 - level / 2)), float(np.quantile(values, 0.5 + level / 2))


def probability_of_improvement(a, b, *, confidence_level: float = 0.95, n_resamples: int = 2000,
                               rng=None) -> AggregateResult:
    """P(b > a) averaged over conditions (rliable), with a stratified bootstrap interval."""
    a, b = _conditions(a, b)
    rng = np.random.default_rng(rng)
    boot = np.zeros(n_resamples)
    for x, y, idx in zip(a, b, _resamples(a, rng, n_resamples)):
        xs, ys = x[idx], y[idx]  # (resamples, seeds): the same seeds for both arms
        boot += np.mean((ys[:, :, None] > xs[:, None, :]) + 0.5 * (ys[:, :, None] == xs[:, None, :]), axis=(1, 2))
    boot /= len(a)
    low, high = _interval(boot, confidence_level)
    return AggregateResult(statistic=_probability_of_improvement(a, b), low=low, high=high,
                           confidence_level=confidence_level, n_resamples=n_resamples,
                           definition="P(a run of b beats a run of a), ties 1/2, averaged over conditions (rliable)")


def iqm_difference(a, b, *, confidence_level: float = 0.95, n_resamples: int = 2000, rng=None) -> dict:
    """IQM of each arm (the mean of the middle 50% of all runs pooled over conditions; rliable) and
    IQM(b) - IQM(a), each with a stratified paired bootstrap percentile interval."""
    from scipy import stats as sps

    a, b = _conditions(a, b)
    rng = np.random.default_rng(rng)
    idx = _resamples(a, rng, n_resamples)
    boot_a = sps.trim_mean(np.concatenate([x[i] for x, i in zip(a, idx)], axis=1), 0.25, axis=1)
    boot_b = sps.trim_mean(np.concatenate([y[i] for y, i in zip(b, idx)], axis=1), 0.25, axis=1)
    out = {}
    for name, stat, boot in (("a", _iqm(a), boot_a), ("b", _iqm(b), boot_b),
                             ("difference", _iqm(b) - _iqm(a), boot_b - boot_a)):
        low, high = _interval(boot, confidence_level)
        out[name] = AggregateResult(statistic=stat, low=low, high=high, confidence_level=confidence_level,
                                    n_resamples=n_resamples,
                                    definition="interquartile mean over all runs of all conditions (rliable); "
                                               "stratified bootstrap of seeds within conditions, pairs kept")
    return out


__all__ = ["AggregateResult", "iqm_difference", "probability_of_improvement"]
