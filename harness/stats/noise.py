"""How noisy one run is: seed-to-seed spread, what pairing removed, the test set's own floor."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._core import ConfidenceInterval, Result, _decimals, _is_constant, _pairs, differences, seed_std


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
class NoiseFloor(Result):
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
    decimals = _decimals(a, b)  # the differences' rounding: an arm constant across seeds has std exactly 0
    std_a, std_b = seed_std(a, decimals), seed_std(b, decimals)
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



@dataclass(frozen=True)
class TestSetNoise(Result):
    """The test set's own sampling noise in a paired difference, from per-example correctness.

    Every verdict is about this particular test set; a new test set from the same distribution
    would move the difference too. With D[s, j] = (arm right) - (baseline right) on example j in
    seed s, the mean difference is a mean over a crossed seeds x examples design, and

        Var(mean) = var_seed / S + var_example / N + var_interaction / (S N),

    estimated without bias from the two-way ANOVA mean squares as
    (MS_seed + MS_example - MS_interaction) / (S N) (Cornfield & Tukey 1956), with Satterthwaite's
    (1946) degrees of freedom. MS_seed / (S N) alone is what the paired t test uses: seeds only.
    Only examples on which the arms disagree contribute to MS_example (McNemar's discordant pairs).
    In points: 100 x the fraction of the test set.
    """

    __test__ = False  # its name starts with "Test": keep pytest from collecting it

    n_seeds: int
    n_examples: int
    mean_diff: float  # 100 * mean of D: the accuracy difference, in points
    se_seeds: float  # the paired t test's standard error (seed noise, this test set)
    se_test_set: float  # sqrt(var_example / N): the test set's sampling noise in the difference
    se_total: float  # both: the standard error for the data distribution
    df: float  # Satterthwaite degrees of freedom of se_total
    discordant: float  # examples the arms disagree on, mean per seed
    mcnemar_se: float  # one seed's test-set SE of its difference: sqrt(n01 + n10 - (n10 - n01)^2 / N) / N
    floor_baseline: float  # Jordan's floor sqrt(p(1-p)/N) of the baseline's accuracy, in points
    floor_arm: float
    confidence_level: float

    def confidence_interval(self, confidence_level: float | None = None) -> ConfidenceInterval:
        """Interval for the effect on the data distribution (new seeds and new test examples)."""
        from scipy import stats as sps  # lazily: the analysis CLI starts faster
        level = self.confidence_level if confidence_level is None else confidence_level
        if self.se_total == 0:
            return ConfidenceInterval(self.mean_diff, self.mean_diff)
        half = sps.t.ppf(0.5 + level / 2, self.df) * self.se_total
        return ConfidenceInterval(self.mean_diff - half, self.mean_diff + half)


def test_set_noise(correct_a, correct_b, *, confidence_level: float = 0.95) -> TestSetNoise:
    """TestSetNoise from two seeds x examples bool arrays (baseline, arm), paired by row."""
    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.ndim != 2 or a.shape != b.shape or a.shape[0] < 2 or a.shape[1] < 2:
        raise ValueError(
            f"per-example correctness must be two seeds x examples arrays of one shape with at least 2 "
            f"seeds and 2 examples; got {a.shape} and {b.shape}."
        )
    s, n = a.shape
    d = b.astype(np.int8) - a.astype(np.int8)
    grand = d.mean()
    rows = d.mean(axis=1)
    cols = d.mean(axis=0)
    ms_seed = n * np.sum((rows - grand) ** 2) / (s - 1)
    ms_example = s * np.sum((cols - grand) ** 2) / (n - 1)
    residual = d - rows[:, None] - cols[None, :] + grand
    ms_interaction = np.sum(residual**2) / ((s - 1) * (n - 1))
    var_seeds = ms_seed / (s * n)
    # var_example / N; a negative estimate (MS_example < MS_interaction) is taken as 0
    var_test = max(0.0, ms_example - ms_interaction) / (s * n)
    if ms_example > ms_interaction:
        numerator = (ms_seed + ms_example - ms_interaction) ** 2
        denominator = ms_seed**2 / (s - 1) + ms_example**2 / (n - 1) + ms_interaction**2 / ((s - 1) * (n - 1))
        df = float(numerator / denominator) if denominator > 0 else float(s - 1)
    else:
        df = float(s - 1)
    n01 = np.sum(a & ~b, axis=1)  # baseline right, arm wrong
    n10 = np.sum(~a & b, axis=1)
    mcnemar = np.sqrt(np.maximum(0.0, (n01 + n10) - (n10 - n01) ** 2 / n)) / n
    p_a, p_b = a.mean(), b.mean()
    return TestSetNoise(
        n_seeds=s, n_examples=n, mean_diff=100 * float(grand),
        se_seeds=100 * math.sqrt(var_seeds), se_test_set=100 * math.sqrt(var_test),
        se_total=100 * math.sqrt(var_seeds + var_test), df=max(df, 1.0),
        discordant=float(np.mean(n01 + n10)), mcnemar_se=100 * float(np.mean(mcnemar)),
        floor_baseline=100 * math.sqrt(p_a * (1 - p_a) / n), floor_arm=100 * math.sqrt(p_b * (1 - p_b) / n),
        confidence_level=confidence_level,
    )


test_set_noise.__test__ = False
