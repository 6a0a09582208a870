"""Group-sequential boundaries: alpha-spending functions and the critical values they imply.

The bottom layer of harness.stats.sequential.looks (pure numpy/scipy). For looks at n_1 < ... < n_K
seeds and a one-sided level a1 spent by a function of the information fraction n_k / n_K:
``_normal_bounds`` gives the boundaries of the normal sequence (known variance) by recursive
numerical integration; ``_t_bounds`` gives the boundaries for t statistics (variance estimated
at each look), calibrated on simulated pivotal paths; ``_robust_bounds`` gives the boundaries for
Hall's skewness-corrected t statistic (``hall_statistic``), calibrated so that no reference shape
of the differences (normal, and gamma-shaped with skewness up to a declared bound in either
direction) crosses more often than the spending allows. All are cached per schedule.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import stats as sps
from scipy.optimize import brentq
from scipy.special import ndtr

SPENDINGS = ("pocock", "obrien-fleming", "hsd")
_GRID = 601  # points of the integration grid on [-8, c_k] (Simpson); 1201 agrees to 1e-6
_PATHS = 2**17  # simulated paths that calibrate the t-scale boundaries
_CALIBRATION_SEED = 20261130
_CHUNK = 2**14  # paths simulated at a time by _robust_bounds (memory: CHUNK x max_seeds floats)


def spend(kind: str, gamma: float, a1: float, t: np.ndarray) -> np.ndarray:
    """Cumulative one-sided alpha spent by information fraction t (Lan & DeMets 1983)."""
    t = np.asarray(t, dtype=float)
    if kind == "pocock":
        return a1 * np.log1p((math.e - 1.0) * t)
    if kind == "obrien-fleming":
        return 2.0 * sps.norm.sf(sps.norm.isf(a1 / 2.0) / np.sqrt(t))
    # Hwang, Shih & DeCani (1990): gamma = 1 spends like Pocock, gamma = -4 like O'Brien-Fleming
    return a1 * (-np.expm1(-gamma * t)) / (-math.expm1(-gamma)) if gamma != 0 else a1 * t


def _simpson_weights(n: int, h: float) -> np.ndarray:
    w = np.ones(n)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return w * h / 3.0


@lru_cache(maxsize=64)
def _normal_bounds(info: tuple, increments: tuple) -> tuple:
    """One-sided upper boundaries z_k with P(first crossing at k | effect 0) = increments[k].

    Recursive numerical integration over the continuation region z < z_k of the sub-density of
    Z_k = S_k / sqrt(I_k), S a sum of independent normal increments with variance I_k - I_{k-1}.
    """
    bounds, z, f, w = [], None, None, None
    for k, (ik, inc) in enumerate(zip(info, increments)):
        if k == 0:
            c = float(sps.norm.isf(inc)) if inc > 0 else math.inf
        else:
            ip = info[k - 1]
            sd = math.sqrt(ik - ip)
            fw = f * w
            cross = lambda c: float(fw @ ndtr((z * math.sqrt(ip) - c * math.sqrt(ik)) / sd))
            c = brentq(lambda c: cross(c) - inc, -8.0, 40.0, xtol=1e-10) if inc > 0 else math.inf
        bounds.append(c)
        upper = min(c, 8.0)
        znew = np.linspace(-8.0, upper, _GRID)
        wnew = _simpson_weights(_GRID, (upper + 8.0) / (_GRID - 1))
        if k == 0:
            fnew = sps.norm.pdf(znew)
        else:
            x = (znew[:, None] * math.sqrt(ik) - z[None, :] * math.sqrt(ip)) / sd
            kern = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
            fnew = kern @ (f * w) * math.sqrt(ik) / sd
        z, f, w = znew, fnew, wnew
    return tuple(bounds)


@lru_cache(maxsize=64)
def _t_bounds(looks: tuple, increments: tuple, fallback: tuple) -> tuple:
    """The same spending on the t scale, where the variance is estimated at every look.

    Carrying the normal boundaries' nominal levels to the t scale keeps each look's level but
    not the joint one (measured: 0.056 instead of 0.050 at 45 looks). The t statistics of normal
    differences are pivotal (their joint law under the tested effect does not involve sigma), so
    the boundaries are calibrated on _PATHS simulated paths with a fixed seed: c_k is the value
    that the paths not yet stopped cross with frequency increments[k]. Where an increment is too
    small to resolve (under 25 paths), the carried normal value is kept.
    """
    rng = np.random.default_rng(_CALIBRATION_SEED)
    n = np.array(looks)
    x = rng.standard_normal((_PATHS, int(n[-1])))
    s1 = np.cumsum(x, axis=1)[:, n - 1]
    s2 = np.cumsum(x * x, axis=1)[:, n - 1]
    del x
    mean = s1 / n
    t = mean * np.sqrt(n) / np.sqrt(np.maximum((s2 - n * mean**2) / (n - 1), 1e-300))
    open_ = np.ones(_PATHS, dtype=bool)
    bounds = []
    for k, inc in enumerate(increments):
        hits = int(round(inc * _PATHS))
        tk = t[open_, k]
        if hits < 25 or hits >= tk.size:
            c = float(fallback[k])
        else:
            j = tk.size - hits  # exactly `hits` open paths lie above the midpoint of these two
            c = float(np.partition(tk, (j - 1, j))[j - 1: j + 1].mean())
        bounds.append(c)
        open_ &= ~(t[:, k] > c)
    return tuple(bounds)


# -- Hall's skewness-corrected t statistic ---------------------------------------------------------


def sample_skewness(x):
    """The adjusted Fisher-Pearson skewness G1 (``scipy.stats.skew(bias=False)``) along the last
    axis; 0 where the values do not vary, or are fewer than 3."""
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    if n < 3:
        g = np.zeros(x.shape[:-1])
    else:
        c = x - x.mean(axis=-1, keepdims=True)
        m2 = np.mean(c * c, axis=-1)
        m3 = np.mean(c * c * c, axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            g = m3 / m2**1.5 * math.sqrt(n * (n - 1)) / (n - 2)
        g = np.where(np.isfinite(g), g, 0.0)
    return float(g) if g.ndim == 0 else g


def _cube(gamma, z):
    """Hall's (1992) monotone cubic z + gamma z^2 / 3 + gamma^2 z^3 / 27 = ((1 + gamma z / 3)^3 - 1) / gamma."""
    return z + gamma * z * z / 3.0 + gamma * gamma * z * z * z / 27.0


def _cube_inverse(gamma, y):
    """The inverse of ``_cube`` in z: 3 (cbrt(1 + gamma y) - 1) / gamma, written without the
    cancellation at gamma -> 0 (a - 1 = (a^3 - 1) / (a^2 + a + 1))."""
    a = np.cbrt(1.0 + gamma * y)
    return 3.0 * y / (a * a + a + 1.0)


def hall_statistic(mean, sd, skew, n, null=0.0):
    """Hall's (1992) transformation of the one-sample t statistic of H0 "mean = null" against "mean
    > null": sqrt(n) (S + G S^2 / 3 + G^2 S^3 / 27 + G / (6 n)) with S = (mean - null) / sd and G
    the sample skewness. It removes the first (n^-1/2) term of the t statistic's skewness, as
    Johnson's (1978) modified t does, and is monotone in S, so its tests invert to intervals. With
    G = 0 it is the t statistic. sd must be > 0."""
    z = (np.asarray(mean, dtype=float) - null) / np.asarray(sd, dtype=float)
    return np.sqrt(n) * (_cube(skew, z) + skew / (6.0 * n))


def hall_interval(mean, sd, skew, n, critical):
    """The means not rejected by either one-sided test of ``hall_statistic`` at ``critical``:
    (lo, hi), with lo > m exactly when the statistic against m exceeds ``critical`` and hi < m
    exactly when that of the mirrored data (skewness -G) against -m does. Right-skewed differences
    (G > 0) stretch the interval upwards: their mean may lie in a tail the seeds have not shown."""
    mean, sd, skew = (np.asarray(v, dtype=float) for v in (mean, sd, skew))
    y = critical / math.sqrt(n)
    lo = mean - sd * _cube_inverse(skew, y - skew / (6.0 * n))
    hi = mean + sd * _cube_inverse(-skew, y + skew / (6.0 * n))
    return lo, hi


def _gamma_shape(skewness: float) -> float:
    return 4.0 / skewness**2  # a gamma distribution with shape k has skewness 2 / sqrt(k)


def _reference_statistics(looks: tuple, skewness: float, seed: int) -> tuple:
    """Hall statistics at every look on _PATHS simulated paths of differences with the null mean,
    normal (``skewness`` 0) or a centred gamma with that skewness: (upper, lower), the statistic of
    the paths (a claim "better" crosses it) and of the mirrored paths (a claim "worse")."""
    rng = np.random.default_rng([_CALIBRATION_SEED, seed])
    n = np.array(looks)
    out = (np.empty((_PATHS, len(n))), np.empty((_PATHS, len(n))))
    for start in range(0, _PATHS, _CHUNK):
        if skewness == 0:
            x = rng.standard_normal((_CHUNK, int(n[-1])))
        else:
            k = _gamma_shape(skewness)
            x = (rng.gamma(k, 1.0, (_CHUNK, int(n[-1]))) - k) / math.sqrt(k)
        s1 = np.cumsum(x, axis=1)[:, n - 1]
        s2 = np.cumsum(x * x, axis=1)[:, n - 1]
        s3 = np.cumsum(x * x * x, axis=1)[:, n - 1]
        del x
        mean = s1 / n
        m2 = np.maximum(s2 / n - mean**2, 1e-300)  # central moments, divided by n
        m3 = s3 / n - 3 * mean * s2 / n + 2 * mean**3
        sd = np.sqrt(m2 * n / (n - 1))
        g = m3 / m2**1.5 * np.sqrt(n * (n - 1)) / (n - 2)
        for sign, o in zip((1.0, -1.0), out):
            o[start: start + _CHUNK] = hall_statistic(sign * mean, sd, sign * g, n)
    return out


@lru_cache(maxsize=64)
def _robust_bounds(looks: tuple, increments: tuple, skewness: float, two_sided: bool, fallback: tuple) -> tuple:
    """Boundaries for ``hall_statistic`` that hold for differences of several shapes at once.

    The size of a test is the largest rejection rate over its null hypotheses (Lehmann & Romano
    2005, section 3.1); here the null includes the shape of the differences, which no test of a
    mean can leave free at small n (Bahadur & Savage 1956). The shapes are a declared family:
    normal, and centred gamma distributions with skewness skewness/2 and skewness, in either
    direction. Hall's statistic is location-scale invariant, so on each shape it is pivotal, and
    c_k is the largest of the values at which each reference's paths not yet stopped cross with
    frequency increments[k]:

    - one-sided (``two_sided`` False: each claim has its own null, a margin's end): every shape and
      its mirror image is a reference, the upper tail of each; so for every shape each one-sided
      claim errs at most a1, the sum of the increments;
    - two-sided (better and worse share the null 0): each shape is a reference, with a path
      stopped by either tail and the frequency 2 increments[k]; so for every shape the rate of
      any claim is at most 2 a1 (all of it may fall on the side opposite the long tail).

    Where an increment is under 25 paths, the carried normal value is kept (as in _t_bounds).
    """
    refs = []
    for i, s in enumerate((0.0, skewness / 2, skewness) if skewness > 0 else (0.0,)):
        upper, lower = _reference_statistics(looks, s, i)
        if two_sided:
            refs.append(np.maximum(upper, lower))
        else:
            refs += [upper] if s == 0 else [upper, lower]  # the normal's lower tail is its upper one
    share = 2.0 if two_sided else 1.0
    open_ = [np.ones(_PATHS, dtype=bool) for _ in refs]
    bounds = []
    for k, inc in enumerate(increments):
        hits = int(round(share * inc * _PATHS))
        c = -math.inf
        for t, o in zip(refs, open_):
            tk = t[o, k]
            if hits < 25 or hits >= tk.size:
                c = max(c, float(fallback[k]))
            else:
                j = tk.size - hits
                c = max(c, float(np.partition(tk, (j - 1, j))[j - 1: j + 1].mean()))
        bounds.append(c)
        for t, o in zip(refs, open_):
            o &= ~(t[:, k] > c)
    return tuple(bounds)
