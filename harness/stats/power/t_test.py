"""The power of the paired t test: the noncentral t tail, integrated by quadrature (scipy's nct can
return NaN in the far tail, NOTES.md), one-sided or two-sided, against 0 or another null."""

from __future__ import annotations

import functools

import numpy as np

from .._core import _scalar


_LAGUERRE_MAX_DF = 300  # above this scipy's generalised Laguerre weights overflow (NaN from ~500 df)


@functools.lru_cache(maxsize=1)
def _hermite_nodes():
    """Gauss-Hermite nodes and weights (48): the same for every df, made once (each call costs ~1 ms)."""
    return np.polynomial.hermite_e.hermegauss(48)


@functools.lru_cache(maxsize=256)
def _chi2_nodes(df: float):
    """Nodes v and weights w with E[g(V)] ~ sum w g(v) for V chi-square with df (sum w = 1).
    Generalised Gauss-Laguerre up to _LAGUERRE_MAX_DF df; above, where its weights overflow to NaN
    (and a NaN power read as "no power"), Wilson-Hilferty's normal form of V / df with
    Gauss-Hermite nodes: at that many df its error is far below the digits a power is shown with.
    """
    from scipy import special
    if df <= _LAGUERRE_MAX_DF:
        x, w = special.roots_genlaguerre(96, df / 2 - 1)
        return 2 * x, w / w.sum()
    z, w = _hermite_nodes()
    cube = np.clip(1 - 2 / (9 * df) + z * np.sqrt(2 / (9 * df)), 0.0, None)
    return df * cube**3, w / w.sum()


_QUANTILES: dict = {}  # (distribution, q) -> {df: quantile}: every count of seeds asks the same few


def cached_ppf(dist: str, q: float, df):
    """scipy.stats.<dist>.ppf(q, df) (dist "t" or "chi2"), elementwise, remembering each df's value.

    seeds_needed asks for the same quantiles (the level's t critical values at n - 1 df, an
    estimated margin's chi-square bounds) for every count it tries in every comparison. A value not
    yet known comes from the special function scipy's ppf itself evaluates (t: stdtrit(df, q); chi2:
    2 gammaincinv(df / 2, q)), without its ~0.1 ms of argument checks: for 0 < q < 1 and df > 0
    scipy returns exactly that (scaled by 1, shifted by 0)."""
    df = np.asarray(df, dtype=float)
    if not (0 < q < 1 and np.isfinite(df).all() and (df > 0).all()):
        from scipy import stats as sps  # lazily: the analysis CLI starts faster
        return getattr(sps, dist).ppf(q, df)
    known = _QUANTILES.setdefault((dist, float(q)), {})
    if df.size <= 256:  # a few counts at a few nodes: looked up one by one, cheaper than np.unique
        try:
            return np.array([known[v] for v in df.reshape(-1).tolist()]).reshape(df.shape)
        except KeyError:
            pass
    from scipy import special
    unique, where = np.unique(df, return_inverse=True)
    missing = np.array([v for v in unique.tolist() if v not in known])
    if missing.size:
        values = special.stdtrit(missing, q) if dist == "t" else 2 * special.gammaincinv(missing / 2, q)
        known.update(zip(missing.tolist(), values.tolist()))
    return np.array([known[v] for v in unique.tolist()])[where].reshape(df.shape)


def _nct_tail(critical, df, noncentrality, upper: bool):
    """scipy.stats.nct.sf(critical, df, nc) (upper) or .cdf(-critical, df, nc), the same floats.

    For finite arguments and df > 0 scipy's nct evaluates exactly the special functions called
    here, element by element (sf: _nct_sf clipped to [0, 1]; cdf: nctdtr), after ~0.1 ms of
    argument checks per call that the search for seeds needed pays thousands of times
    (tests/test_stats_cost.py compares the two on many arguments, to the bit). Other arguments
    (and a scipy without these functions) go through scipy.stats itself."""
    functions = _nct_functions()
    # one test for every argument finite: a NaN or an infinity anywhere makes the sum non-finite
    # (an overflow of finite ones only sends them to scipy.stats, which gives the same floats)
    if functions is None or not (np.isfinite(critical + noncentrality + df).all() and (df > 0).all()):
        from scipy import stats as sps  # lazily: the analysis CLI starts faster
        return sps.nct.sf(critical, df, noncentrality) if upper else sps.nct.cdf(-critical, df, noncentrality)
    if upper:
        return np.clip(functions[0](critical, df, noncentrality), 0, 1)
    return functions[1](df, noncentrality, -critical)


@functools.lru_cache(maxsize=1)
def _nct_functions():
    """(sf, cdf): the special functions behind scipy.stats.nct's sf and cdf; None in a scipy
    without them (then scipy.stats.nct itself is called)."""
    from scipy import special
    try:
        from scipy.special import _ufuncs
        return _ufuncs._nct_sf, special.nctdtr
    except (ImportError, AttributeError):
        return None


def _t_tail(critical, df, noncentrality, upper: bool):
    """P(T > critical) (upper) or P(T < -critical) of a noncentral t, never NaN.

    scipy 1.17's ``nct`` returns NaN in the far tail (e.g. effect/sd above ~3.3 at small n), which
    read as "no power" made seeds_needed run on. Where it does, integrate instead: with
    T = (Z + delta) / S, S = sqrt(V / df) and V chi-square, P(T > c) = E[Phi(delta - c S)], taken
    by quadrature over the chi-square density (``_chi2_nodes``).
    """
    critical, df, noncentrality = (np.asarray(x, dtype=float) for x in (critical, df, noncentrality))
    if not critical.shape == df.shape == noncentrality.shape:
        critical, df, noncentrality = np.broadcast_arrays(critical, df, noncentrality)
    with np.errstate(all="ignore"):
        tail = _nct_tail(critical, df, noncentrality, upper)
    tail = np.array(tail, dtype=float, ndmin=1)
    bad = ~np.isfinite(tail).reshape(-1)
    if bad.any():
        from scipy import special
        flat = tail.reshape(-1)
        c, k, delta = (x.reshape(-1)[bad] for x in (critical, df, noncentrality))
        values = np.empty(len(c))
        for dof in np.unique(k):
            at = k == dof
            v, w = _chi2_nodes(float(dof))
            s = np.sqrt(v / dof)[None, :]  # S = sqrt(V / df) at the nodes
            z = (delta[at, None] - c[at, None] * s) if upper else (-c[at, None] * s - delta[at, None])
            values[at] = special.ndtr(z) @ w  # norm.cdf's own function, without its checks (z is finite)
        flat[bad] = values
        tail = flat
    return np.clip(tail.reshape(np.shape(critical)), 0.0, 1.0)


def paired_t_power(n, effect, sd, alpha: float = 0.05, *, null: float = 0.0, alternative: str = "two-sided"):
    """Power of the paired t test of mean difference = ``null`` at level alpha (noncentral t).

    n pairs whose differences are normal with mean ``effect`` and standard deviation ``sd``.
    Works elementwise on arrays of n; finite everywhere (see _t_tail).
    """
    n = np.asarray(n, dtype=float)
    df = n - 1
    noncentrality = (np.asarray(effect, dtype=float) - null) / sd * np.sqrt(n)
    if alternative == "two-sided":
        critical = cached_ppf("t", 1 - alpha / 2, df)
        power = _t_tail(critical, df, noncentrality, True) + _t_tail(critical, df, noncentrality, False)
    elif alternative == "greater":
        power = _t_tail(cached_ppf("t", 1 - alpha, df), df, noncentrality, True)
    else:
        power = _t_tail(cached_ppf("t", 1 - alpha, df), df, noncentrality, False)
    return _scalar(np.minimum(power, 1.0))
