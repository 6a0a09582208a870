"""Online false discovery rate: the test level alpha_t of each claim in a stream, from the past alone.

A project that makes claim after claim (ablation after ablation) holds its false discovery rate
over time by testing claim t at a level alpha_t that depends only on what came before it: the
earlier p-values and rejections, never the claim's own data. Four procedures, each written from
its paper and following the R/Bioconductor package ``onlineFDR`` (2.19) in its defaults, indexing
and tuning constants, so that its numbers are reproduced (tests/test_online_fdr.py cites them):

    LOND     Javanmard & Montanari (2015, 2018): alpha_t = beta_t (D(t-1) + 1), D the rejections so far
    LORD++   Ramdas, Yang, Wainwright & Jordan (2017): alpha wealth returned at each rejection
    SAFFRON  Ramdas, Zrnic, Wainwright & Jordan (2018): wealth spent only on "candidates" (p > lambda
             costs, p <= lambda is nearly free): more power when many claims are true effects
    ADDIS    Tian & Ramdas (2019): SAFFRON that also discards conservative nulls (p > tau costs nothing)

Every function takes p-values as a 1-D stream, or a 2-D array (replicates x stream) that is run
vectorised (the simulation), and returns an ``OnlineFDRResult``: ``.alpha`` (alpha_t) and
``.rejected``. ``decisions`` replays a stream whose rejections are already on record (a ledger):
the levels then follow the recorded decisions rather than recomputing them. The ledger's next level
is asynchronous.next_alpha (claims that overlap in time). The two variants for arbitrarily
dependent claims, lond_dep and lord_dep, are in dependent.py; ALL_METHODS names all six.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

METHODS = ("lond", "lord++", "saffron", "addis")
DEP_METHODS = ("lond_dep", "lord_dep")  # under arbitrary dependence: dependent.py
ALL_METHODS = METHODS + DEP_METHODS  # what stats.fdr.method offers (harness/config/fdr_spec.py lists them too)
NAMES = {"lond": "LOND", "lord++": "LORD++", "saffron": "SAFFRON", "addis": "ADDIS", "lond_dep": "LOND-dep",
         "lord_dep": "LORD-dep"}


@dataclass(frozen=True)
class OnlineFDRResult:
    method: str
    level: float  # the false discovery rate held over the stream
    alpha: np.ndarray  # alpha_t: the level claim t is tested at
    rejected: np.ndarray  # bool: p_t <= alpha_t (or the recorded decision)


def gamma_lord(n: int) -> np.ndarray:
    """onlineFDR's default gamma for LORD++ (and LOND's beta / alpha): 0.07720838 log(max(j,2)) /
    (j exp(sqrt(log j))), j = 1..n; it sums to 1 over all j (Javanmard & Montanari 2018, sec. 4)."""
    j = np.arange(1, n + 1, dtype=float)
    return 0.07720838 * np.log(np.maximum(j, 2)) / (j * np.exp(np.sqrt(np.log(j))))


def gamma_saffron(n: int) -> np.ndarray:
    """onlineFDR's default gamma for SAFFRON and ADDIS: 0.4374901658 / j^1.6 (sums to 1)."""
    return 0.4374901658 / np.arange(1, n + 1, dtype=float) ** 1.6


def _check(pvalues, level, decisions):
    p = np.asarray(pvalues, dtype=float)
    single = p.ndim == 1
    p = np.atleast_2d(p)
    if p.ndim != 2 or np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("p-values must be a 1-D stream (or replicates x stream) of numbers in [0, 1]")
    if not 0 < level < 1:
        raise ValueError(f"the FDR level must be in (0, 1), not {level}")
    d = None if decisions is None else np.atleast_2d(np.asarray(decisions, dtype=bool))
    if d is not None and d.shape != p.shape:
        raise ValueError("decisions must have one entry per p-value")
    return p, single, d


def _result(method, level, alpha, rejected, single):
    if single:
        alpha, rejected = alpha[0], rejected[0]
    return OnlineFDRResult(method=method, level=level, alpha=alpha, rejected=rejected)


def _decide(p, alpha, d, t, R):
    R[:, t] = p[:, t] <= alpha[:, t] if d is None else d[:, t]


def lond(pvalues, level: float = 0.05, decisions=None) -> OnlineFDRResult:
    """LOND (original): alpha_t = beta_t (D(t-1) + 1), beta_t = level * gamma_lord(t)."""
    p, single, d = _check(pvalues, level, decisions)
    reps, n = p.shape
    beta = level * gamma_lord(n)
    alpha, R = np.zeros((reps, n)), np.zeros((reps, n), dtype=bool)
    for t in range(n):
        alpha[:, t] = beta[t] * (R[:, :t].sum(axis=1) + 1)
        _decide(p, alpha, d, t, R)
    return _result("lond", level, alpha, R, single)


def lord_plus_plus(pvalues, level: float = 0.05, w0: float | None = None, decisions=None) -> OnlineFDRResult:
    """LORD++: alpha_t = w0 gamma_t + (level - w0) gamma_{t - tau_1} + level sum_{j>=2} gamma_{t - tau_j},
    tau_j the j-th rejection's position; w0 = level / 10 (onlineFDR's default)."""
    p, single, d = _check(pvalues, level, decisions)
    reps, n = p.shape
    w0 = level / 10 if w0 is None else w0
    g = gamma_lord(n)
    alpha, R = np.zeros((reps, n)), np.zeros((reps, n), dtype=bool)
    first = np.full(reps, -1)  # the first rejection's position, -1 before it
    for t in range(n):
        # gamma_{t - s} for each earlier position s (0-based: g[t - s - 1])
        lags = g[t - 1 - np.arange(t)] if t else np.zeros(0)
        earned = R[:, :t].astype(float) @ lags  # sum over every rejection, first included
        has = first >= 0
        g_first = np.where(has, g[np.maximum(t - first - 1, 0)], 0.0)
        alpha[:, t] = w0 * g[t] + level * earned - w0 * g_first
        _decide(p, alpha, d, t, R)
        first = np.where((first < 0) & R[:, t], t, first)
    return _result("lord++", level, alpha, R, single)


def _wealth_rule(p, level, w0, g, spend, scale, cap, d, method, single):
    """SAFFRON and ADDIS share one rule; they differ in which p-values ``count`` (ADDIS: only those
    below tau) and in the factor before the sum (1 - lambda, or tau - lambda).

    With ``count`` the selected p-values so far and ``cand`` the candidates (p <= lambda), claim t's
    gamma index for rejection j is (selected after it) - (candidates after it) + 1: each selected
    non-candidate after a rejection spends from that rejection's wealth."""
    reps, n = p.shape
    alpha, R = np.zeros((reps, n)), np.zeros((reps, n), dtype=bool)
    g = np.concatenate([g, [0.0]])
    # spent[:, s] = number of p-values at positions < s that spend wealth (selected and not a candidate)
    spent = np.zeros((reps, n + 1), dtype=np.int64)
    first = np.full(reps, -1)
    rows = np.arange(reps)
    for t in range(n):
        now = spent[:, t]
        start = g[now]  # w0's term: gamma_{1 + spent before t}
        if t:
            # rejection at s: gamma_{1 + (spent between s and t)} = g[now - spent[:, s + 1]]
            idx = now[:, None] - spent[:, 1:t + 1]
            lagged = g[idx] * R[:, :t]
            earned = lagged.sum(axis=1)
            has = first >= 0
            g_first = np.where(has, lagged[rows, np.maximum(first, 0)], 0.0)
        else:
            earned = g_first = np.zeros(reps)
        alpha[:, t] = np.minimum(cap, scale * (w0 * start + level * earned - w0 * g_first))
        _decide(p, alpha, d, t, R)
        spent[:, t + 1] = now + spend[:, t]
        first = np.where((first < 0) & R[:, t], t, first)
    return _result(method, level, alpha, R, single)


def saffron(pvalues, level: float = 0.05, lam: float = 0.5, w0: float | None = None,
            decisions=None) -> OnlineFDRResult:
    """SAFFRON: alpha_t = min(lambda, (1 - lambda)(w0 gamma_{t - C_0+} + (level - w0) gamma_{t - tau_1 - C_1+}
    + level sum_{j>=2} gamma_{t - tau_j - C_j+})), C_j+ the candidates (p <= lambda) after tau_j;
    lambda = 0.5 and w0 = level / 2 (onlineFDR's defaults)."""
    p, single, d = _check(pvalues, level, decisions)
    if not 0 < lam < 1:
        raise ValueError(f"lambda must be in (0, 1), not {lam}")
    w0 = level / 2 if w0 is None else w0
    spend = p > lam
    return _wealth_rule(p, level, w0, gamma_saffron(p.shape[1]), spend, 1 - lam, lam, d, "saffron", single)


def addis(pvalues, level: float = 0.05, lam: float = 0.25, tau: float = 0.5, w0: float | None = None,
          decisions=None) -> OnlineFDRResult:
    """ADDIS: SAFFRON over the selected p-values (p <= tau) only, with factor (tau - lambda):
    alpha_t = min(lambda, (tau - lambda)(w0 gamma_{S_t - C_0+} + ...)); a p-value above tau is
    discarded and spends nothing. lambda = 0.25, tau = 0.5, w0 = level / 2 (onlineFDR's defaults)."""
    p, single, d = _check(pvalues, level, decisions)
    if not 0 < lam < tau <= 1:
        raise ValueError(f"ADDIS needs 0 < lambda < tau <= 1, not lambda={lam}, tau={tau}")
    w0 = level / 2 if w0 is None else w0
    spend = (p > lam) & (p <= tau)
    return _wealth_rule(p, level, w0, gamma_saffron(p.shape[1] + 1), spend, tau - lam, lam, d, "addis", single)


PROCEDURES = {"lond": lond, "lord++": lord_plus_plus, "saffron": saffron, "addis": addis}

def online_fdr(method: str, pvalues, level: float = 0.05, decisions=None) -> OnlineFDRResult:
    """Run ``method`` (one of METHODS) over a stream with its default tuning (simulate.run_rule:
    the dependent variants too)."""
    try:
        procedure = PROCEDURES[method]
    except KeyError:
        raise ValueError(f"unknown online FDR method {method!r}; one of {', '.join(METHODS)}") from None
    return procedure(pvalues, level=level, decisions=decisions)
