"""One claim over several conditions: a random-effects model of per-condition paired effects.

Each condition (a dataset, a model size, a grid point) gives its own paired effect ``y_i`` (the
mean of b - a over its seeds) and that effect's squared standard error ``v_i``. The conditions'
true effects are taken to scatter around a mean ``mu`` with spread ``tau``:
``y_i ~ N(theta_i, v_i)``, ``theta_i ~ N(mu, tau^2)``. What is estimated, and why this way:

- tau^2 by REML (restricted maximum likelihood; Viechtbauer 2005): less biased than ML, and it
  is metafor's default, so the numbers can be checked against it (tests/test_stats_meta.py
  reproduces metafor's BCG example);
- mu's interval by Hartung-Knapp-Sidik-Jonkman (Hartung & Knapp 2001; Sidik & Jonkman 2002): a t
  interval on K - 1 degrees of freedom whose variance is rescaled by the observed dispersion. The
  plain Wald (z) interval treats tau^2 as known and its coverage falls far below 95% with the
  handful of conditions an ML paper has (IntHout et al. 2014); HK keeps it near nominal when each
  condition's variance is known. It is not known here: it comes from 3-10 seeds, and then HK (and
  Cochran's Q) reject too often (scripts/bench_stats.py, section 6), so the harness decides with
  claims.py and reports these numbers beside, as metafor would give them;
- tau^2's interval by the Q-profile method (Viechtbauer 2007), I^2 and its interval from tau^2's
  (Higgins & Thompson 2002, with metafor's typical within-condition variance);
- the prediction interval for a new condition: mu +- t(K-2) * sqrt(tau^2 + se^2) (Higgins,
  Thompson & Spiegelhalter 2009), with HK's se; it needs K >= 3.

All core functions run on 2-D arrays (rows = simulated meta-analyses) so that the bench can
simulate thousands at once; ``random_effects`` is the one-row API with a result object.
The peers' aggregates (rliable) are in aggregates.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._core import ConfidenceInterval, Result

_BISECTIONS = 200  # float64 bisection reaches the precision of the bracket well before this


def _as_rows(effects, variances) -> tuple[np.ndarray, np.ndarray]:
    y = np.atleast_2d(np.asarray(effects, dtype=float))
    v = np.atleast_2d(np.asarray(variances, dtype=float))
    if y.shape != v.shape:
        raise ValueError(f"effects and variances must have the same shape (one of each per condition); "
                         f"got {y.shape} and {v.shape}.")
    if y.shape[1] < 2:
        raise ValueError(f"a claim across conditions needs at least 2 conditions, got {y.shape[1]}.")
    if not (np.isfinite(y).all() and np.isfinite(v).all()) or (v < 0).any():
        raise ValueError("effects must be finite and variances finite and >= 0 (one squared standard "
                         "error per condition).")
    # A condition whose seeds all moved by the same amount has v = 0: floor it far below the others so
    # that its weight is large but finite (the sign-flip floor of its own verdict still applies there).
    scale = np.maximum(np.max(np.abs(y), axis=1, keepdims=True) ** 2, np.max(v, axis=1, keepdims=True))
    floor = np.where(scale > 0, scale, 1.0) * 1e-12
    return y, np.maximum(v, floor)


def _design(k: int, moderator=None) -> np.ndarray:
    """The K x p design: an intercept, and the moderator's values when there is one."""
    if moderator is None:
        return np.ones((k, 1))
    x = np.asarray(moderator, dtype=float)
    if x.shape != (k,) or not np.isfinite(x).all() or np.ptp(x) == 0:
        raise ValueError(f"the moderator needs one finite value per condition ({k}) and at least two distinct "
                         f"values; got {list(np.atleast_1d(x))}.")
    return np.column_stack([np.ones(k), x])


def _fit(y, v, tau2, X):
    """Weighted least squares per row with weights 1/(v + tau^2): (w, coefficients, residuals, (X'WX)^-1)."""
    w = 1.0 / (v + tau2[:, None])
    xtwx = np.einsum("ek,kp,kq->epq", w, X, X)
    inv = np.linalg.inv(xtwx)
    beta = np.einsum("epq,ek,kq,ek->ep", inv, w, X, y)
    return w, beta, y - beta @ X.T, inv


def _reml_score(y, v, tau2, X):
    """d(restricted log-likelihood)/d(tau^2), times 2: y'PPy - tr(P), with Py = W r."""
    w, _, r, inv = _fit(y, v, tau2, X)
    trace = w.sum(axis=1) - np.einsum("epq,ek,kq,kp->e", inv, w**2, X, X)
    return (w**2 * r**2).sum(axis=1) - trace


def _generalised_q(y, v, tau2, X):
    w, _, r, _ = _fit(y, v, tau2, X)
    return (w * r**2).sum(axis=1)


def _bisect(f, low, high, decreasing=True):
    """The root of f (one per row) between low and high, f decreasing in tau^2."""
    for _ in range(_BISECTIONS):
        mid = 0.5 * (low + high)
        above = f(mid) > 0 if decreasing else f(mid) < 0
        low, high = np.where(above, mid, low), np.where(above, high, mid)
        if np.all(high - low <= 1e-15 * np.maximum(high, 1e-300)):
            break
    return 0.5 * (low + high)


def _upper_bracket(f, y, v):
    """A tau^2 per row where f < 0, by doubling from the spread of the effects."""
    high = np.maximum(y.var(axis=1, ddof=1) * 4 + v.max(axis=1), 1e-300)
    for _ in range(200):
        still = f(high) > 0
        if not still.any():
            break
        high = np.where(still, high * 4, high)
    return high


def reml_tau2(y, v, moderator=None) -> np.ndarray:
    """REML estimate of tau^2 per row (0 when the score is not positive at 0: no excess spread)."""
    y, v = _as_rows(y, v)
    X = _design(y.shape[1], moderator)
    zero = np.zeros(len(y))

    def score(t):
        return _reml_score(y, v, t, X)

    positive = score(zero) > 0
    high = _upper_bracket(score, y, v)
    return np.where(positive, _bisect(score, zero.copy(), high), 0.0)


def q_profile(y, v, confidence_level: float = 0.95, moderator=None):
    """tau^2's interval by the Q-profile (Viechtbauer 2007): the tau^2 at which the generalised Q
    equals the chi-square(K-p) quantiles; a bound is 0 where Q(0) is already below its quantile."""
    from scipy import stats as sps

    y, v = _as_rows(y, v)
    X = _design(y.shape[1], moderator)
    df = y.shape[1] - X.shape[1]
    zero = np.zeros(len(y))
    q0 = _generalised_q(y, v, zero, X)
    bounds = []
    for quantile in (0.5 + confidence_level / 2, 0.5 - confidence_level / 2):  # lower bound, upper bound
        crit = float(sps.chi2.ppf(quantile, df))

        def f(t, crit=crit):
            return _generalised_q(y, v, t, X) - crit

        high = _upper_bracket(f, y, v)
        bounds.append(np.where(q0 > crit, _bisect(f, zero.copy(), high), 0.0))
    return bounds[0], bounds[1]


def _t_test(estimate, se, df):
    """Two-sided t statistic and p per row; exact (0 or inf, p 0 or 1) where se is 0."""
    from scipy import stats as sps

    live = se > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(live, estimate / np.where(live, se, 1.0), np.where(estimate == 0, 0.0, np.copysign(np.inf, estimate)))
    return t, np.where(live, 2 * sps.t.sf(np.abs(t), df), np.where(estimate == 0, 1.0, 0.0))


def regression_rows(y, v, moderator=None, confidence_level: float = 0.95) -> dict:
    """The REML random-effects (meta-)regression of every row at once, Hartung-Knapp standard errors:
    coefficients (intercept[, slope]) with se, interval, t and p on K - p df; tau^2; the residual
    Cochran's Q (fixed-effect weights) and its p, the test that the conditions share one effect
    (one line, with a moderator)."""
    from scipy import stats as sps

    y, v = _as_rows(y, v)
    k = y.shape[1]
    X = _design(k, moderator)
    df = k - X.shape[1]
    if df < 1:
        raise ValueError(f"a random-effects fit with {X.shape[1]} coefficients needs at least {X.shape[1] + 1} "
                         f"conditions, got {k}.")
    tau2 = reml_tau2(y, v, moderator)
    w, beta, r, inv = _fit(y, v, tau2, X)
    dispersion = (w * r**2).sum(axis=1) / df
    se_z = np.sqrt(np.diagonal(inv, axis1=1, axis2=2))
    se = se_z * np.sqrt(dispersion)[:, None]  # Hartung-Knapp: the Wald variance times the observed dispersion
    crit = float(sps.t.ppf(0.5 + confidence_level / 2, df))
    t, pvalue = _t_test(beta, se, df)
    _, _, r_fixed, _ = _fit(y, v, np.zeros(len(y)), X)
    q = (r_fixed**2 / v).sum(axis=1)
    return {"beta": beta, "se": se, "se_z": se_z, "df": df, "low": beta - crit * se, "high": beta + crit * se,
            "t": t, "pvalue": pvalue, "tau2": tau2, "q": q, "q_pvalue": sps.chi2.sf(q, df)}


def pooled_rows(y, v, confidence_level: float = 0.95) -> dict:
    """The random-effects fit of every row at once: mu, HK se and interval, t, p, tau^2, Q, I^2, PI."""
    from scipy import stats as sps

    y, v = _as_rows(y, v)
    k = y.shape[1]
    fit = regression_rows(y, v, None, confidence_level)
    mu, se, tau2 = fit["beta"][:, 0], fit["se"][:, 0], fit["tau2"]
    w_fixed = 1.0 / v
    typical = (k - 1) * w_fixed.sum(axis=1) / (w_fixed.sum(axis=1) ** 2 - (w_fixed**2).sum(axis=1))
    if k >= 3:
        half = float(sps.t.ppf(0.5 + confidence_level / 2, k - 2)) * np.sqrt(tau2 + se**2)
        prediction = (mu - half, mu + half)
    else:
        prediction = (np.full(len(y), np.nan), np.full(len(y), np.nan))
    return {
        "mu": mu, "se": se, "se_z": fit["se_z"][:, 0], "df": k - 1, "low": fit["low"][:, 0], "high": fit["high"][:, 0],
        "t": fit["t"][:, 0], "pvalue": fit["pvalue"][:, 0], "tau2": tau2, "q": fit["q"], "q_pvalue": fit["q_pvalue"],
        "typical_variance": typical, "i2": tau2 / (tau2 + typical), "prediction": prediction,
    }


@dataclass(frozen=True)
class RandomEffectsResult(Result):
    """The pooled effect across K conditions (REML tau^2, Hartung-Knapp interval)."""

    estimate: float  # mu: the average effect over conditions like these
    standard_error: float  # Hartung-Knapp
    standard_error_z: float  # the Wald se sqrt(1 / sum w), what a z test would use
    statistic: float  # t on df = K - 1
    pvalue: float
    df: int
    conditions: int
    tau2: float
    tau2_interval: ConfidenceInterval  # Q-profile
    tau: float
    tau_interval: ConfidenceInterval
    i2: float  # share of the effects' variance that is between conditions, 0..1
    i2_interval: ConfidenceInterval
    q: float  # Cochran's Q (fixed-effect weights), the test of a common effect
    q_pvalue: float
    prediction_interval: ConfidenceInterval | None  # where a new condition's true effect should fall; K >= 3
    confidence_level: float
    method: str = "REML tau^2; Hartung-Knapp-Sidik-Jonkman interval (t, K-1 df); Q-profile interval for tau^2"

    def confidence_interval(self) -> ConfidenceInterval:
        from scipy import stats as sps

        half = float(sps.t.ppf(0.5 + self.confidence_level / 2, self.df)) * self.standard_error
        return ConfidenceInterval(self.estimate - half, self.estimate + half)


def random_effects(effects, variances, *, confidence_level: float = 0.95) -> RandomEffectsResult:
    """Pool per-condition effects (``effects[i]``, squared standard errors ``variances[i]``), which
    must be in one unit: put them on one scale first (``common_scale``)."""
    y, v = _as_rows(np.asarray(effects, dtype=float)[None, :] if np.ndim(effects) == 1 else effects,
                    np.asarray(variances, dtype=float)[None, :] if np.ndim(variances) == 1 else variances)
    if len(y) != 1:
        raise ValueError("random_effects takes one meta-analysis (1-D effects); use pooled_rows for many.")
    r = {key: (value[0] if isinstance(value, np.ndarray) else value) for key, value in pooled_rows(y, v, confidence_level).items()}
    low, high = q_profile(y, v, confidence_level)
    typical = float(r["typical_variance"])
    tau2_ci = ConfidenceInterval(float(low[0]), float(high[0]))
    k = y.shape[1]
    prediction = (ConfidenceInterval(float(r["prediction"][0][0]), float(r["prediction"][1][0])) if k >= 3 else None)
    return RandomEffectsResult(
        estimate=float(r["mu"]), standard_error=float(r["se"]), standard_error_z=float(r["se_z"]),
        statistic=float(r["t"]), pvalue=float(r["pvalue"]), df=k - 1, conditions=k,
        tau2=float(r["tau2"]), tau2_interval=tau2_ci, tau=math.sqrt(float(r["tau2"])),
        tau_interval=ConfidenceInterval(math.sqrt(tau2_ci.low), math.sqrt(tau2_ci.high)),
        i2=float(r["i2"]), i2_interval=ConfidenceInterval(tau2_ci.low / (tau2_ci.low + typical),
                                                          tau2_ci.high / (tau2_ci.high + typical)),
        q=float(r["q"]), q_pvalue=float(r["q_pvalue"]), prediction_interval=prediction,
        confidence_level=confidence_level,
    )


@dataclass(frozen=True)
class SlopeResult(Result):
    """The effect as a line in a numeric moderator (REML mixed-effects meta-regression, HK se)."""

    slope: float  # change in the effect per unit of the moderator
    slope_standard_error: float
    intercept: float  # the effect at moderator 0
    intercept_standard_error: float
    statistic: float  # the slope's t on df = K - 2
    pvalue: float
    df: int
    tau2: float  # the spread left around the line
    q_residual: float  # Cochran's Q around the line, the test that the line alone explains the effects
    q_residual_pvalue: float
    confidence_level: float
    method: str = "REML mixed-effects meta-regression; Hartung-Knapp t on K-2 df"

    def confidence_interval(self) -> ConfidenceInterval:
        from scipy import stats as sps

        half = float(sps.t.ppf(0.5 + self.confidence_level / 2, self.df)) * self.slope_standard_error
        return ConfidenceInterval(self.slope - half, self.slope + half)


def effect_slope(effects, variances, moderator, *, confidence_level: float = 0.95) -> SlopeResult:
    """Does the effect change with a numeric setting? The slope of the per-condition effects on it."""
    y = np.asarray(effects, dtype=float)[None, :]
    v = np.asarray(variances, dtype=float)[None, :]
    r = regression_rows(y, v, moderator, confidence_level)
    return SlopeResult(
        slope=float(r["beta"][0, 1]), slope_standard_error=float(r["se"][0, 1]), intercept=float(r["beta"][0, 0]),
        intercept_standard_error=float(r["se"][0, 0]), statistic=float(r["t"][0, 1]), pvalue=float(r["pvalue"][0, 1]),
        df=int(r["df"]), tau2=float(r["tau2"][0]), q_residual=float(r["q"][0]), q_residual_pvalue=float(r["q_pvalue"][0]),
        confidence_level=confidence_level,
    )


@dataclass(frozen=True)
class BetterOnResult(Result):
    """On how many of K conditions the arm is shown better, each tested on its own."""

    better: int
    worse: int
    conditions: int
    adjusted_pvalues: tuple
    multiplicity: str


def better_on(pvalues, estimates, higher_is_better: bool = True, alpha: float = 0.05) -> BetterOnResult:
    """"Better on k of K": each condition's paired p-value, Holm-adjusted across the K conditions,
    so that the count's claims hold together at family-wise error alpha (Holm 1979)."""
    from ..margins import holm

    adjusted = holm(list(pvalues))
    signs = [(e > 0) == higher_is_better if e != 0 else None for e in estimates]
    better = sum(1 for p, s in zip(adjusted, signs) if p < alpha and s is True)
    worse = sum(1 for p, s in zip(adjusted, signs) if p < alpha and s is False)
    return BetterOnResult(better=better, worse=worse, conditions=len(adjusted), adjusted_pvalues=tuple(adjusted),
                          multiplicity=f"each condition's paired t p-value Holm-adjusted across the {len(adjusted)} "
                                       f"conditions: family-wise error <= {alpha:g} for all the counted claims together")


def common_scale(effects, variances, units, *, sds=None):
    """Effects and variances on one scale: as given when every condition declares the same unit;
    standardised (effect / sd of its paired differences, d_z) when ``sds`` is given; else refused."""
    units = list(units)
    if len(set(units)) <= 1:
        return np.asarray(effects, dtype=float), np.asarray(variances, dtype=float), units[0] if units else ""
    if sds is None:
        raise ValueError(
            f"the conditions' effects are in different units ({', '.join(sorted(set(map(str, units))))}): an average "
            "of them would mean nothing. Declare one unit for the metric in every condition, or pool standardised "
            "effects (each effect divided by the sd of its paired differences).")
    sds = np.asarray(sds, dtype=float)
    if (sds <= 0).any():
        raise ValueError("standardising needs a positive sd of the paired differences in every condition.")
    return np.asarray(effects, dtype=float) / sds, np.asarray(variances, dtype=float) / sds**2, "sd of the paired differences"


__all__ = ["BetterOnResult", "RandomEffectsResult", "SlopeResult", "better_on", "common_scale", "effect_slope",
           "pooled_rows", "q_profile", "random_effects", "regression_rows", "reml_tau2"]
