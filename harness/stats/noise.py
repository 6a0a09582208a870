"""How noisy one run is: seed-to-seed spread, what pairing removed, the test set's own floor."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._core import _is_constant, _pairs, differences


def test_set_floor(accuracy: float, n_test: int) -> float:
    """Binomial standard error of an accuracy measured on n_test examples, in points.

    sqrt(p(1-p)/n_test): how much accuracy would move if only the test sample were redrawn.
    """
    from scipy import stats as sps  # lazily: the analysis CLI starts faster
    p = float(accuracy) / 100.0
    if not 0.0 <= p <= 1.0 or n_test < 1:
        raise ValueError(f"accuracy must be in [0, 100] points and n_test >= 1; got {accuracy}, {n_test}.")
    return float(100.0 * sps.binom.std(n_test, p) / n_test)


test_set_floor.__test__ = False  # its name starts with "test": keep pytest from collecting it


@dataclass(frozen=True)
class NoiseFloor:
    n: int
    std_a: float  # seed-to-seed std of each arm (ddof=1)
    std_b: float
    std_diff: float  # std of the paired differences
    correlation: float | None  # Pearson r between arms across seeds; None when an arm is constant
    unpaired_std_diff: float  # sqrt(std_a^2 + std_b^2): std of a difference of two unpaired runs
    variance_ratio: float | None  # std_diff^2 / (std_a^2 + std_b^2): what pairing left; None if 0/0
    test_set_floor: float | None  # binomial floor in points, for accuracy with n_test given


def noise_floor(a, b, *, n_test: int | None = None) -> NoiseFloor:
    """How noisy one seed is, and how much of that noise pairing by seed removed."""
    from scipy import stats as sps  # lazily: the analysis CLI starts faster
    a, b = _pairs(a, b)
    d = differences(a, b)
    std_a, std_b = float(a.std(ddof=1)), float(b.std(ddof=1))
    std_diff = 0.0 if _is_constant(d) else float(d.std(ddof=1))
    unpaired_var = std_a**2 + std_b**2
    correlation = None
    if std_a > 0 and std_b > 0:
        correlation = float(sps.pearsonr(a, b).statistic)
    floor = None
    if n_test:
        floor = test_set_floor(float(np.mean(np.concatenate([a, b]))), n_test)
    return NoiseFloor(
        n=len(a), std_a=std_a, std_b=std_b, std_diff=std_diff, correlation=correlation,
        unpaired_std_diff=math.sqrt(unpaired_var),
        variance_ratio=std_diff**2 / unpaired_var if unpaired_var > 0 else None,
        test_set_floor=floor,
    )

