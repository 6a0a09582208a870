"""Online FDR under arbitrary dependence between claims, as onlineFDR 2.19 implements it:

    LOND, dep = TRUE   Javanmard & Montanari (2018): beta_t discounted by the harmonic number
                       H_t = 1 + 1/2 + ... + 1/t (Benjamini & Yekutieli's factor, taken online);
    LORD, version dep  Javanmard & Montanari (2018, sec. 4.2): alpha_t = xi_t W(tau_t), the wealth
                       just after the last rejection tau_t, xi_t = 0.139307 / (t log(max(t, 2))^3),
                       wealth W(0) = w0 = level / 10, each test spends alpha_t, each rejection earns
                       b0 = level - w0.

Both give up power for a guarantee that needs no assumption on how the claims' p-values depend
on each other (ablations of one model on the same seeds do depend). Same shapes and result as
online_fdr.py; ``decisions`` replays recorded rejections.
"""

from __future__ import annotations

import numpy as np

from harness.stats.online_fdr import _check, _decide, _result, gamma_lord


def lond_dep(pvalues, level: float = 0.05, decisions=None):
    """LOND (original, beta_t (D + 1)) with beta_t / H_t: onlineFDR's LOND(d, dep = TRUE)."""
    p, single, d = _check(pvalues, level, decisions)
    reps, n = p.shape
    beta = level * gamma_lord(n) / np.cumsum(1.0 / np.arange(1, n + 1))
    alpha, R = np.zeros((reps, n)), np.zeros((reps, n), dtype=bool)
    for t in range(n):
        alpha[:, t] = beta[t] * (R[:, :t].sum(axis=1) + 1)
        _decide(p, alpha, d, t, R)
    return _result("lond-dep", level, alpha, R, single)


def lord_dep(pvalues, level: float = 0.05, w0: float | None = None, decisions=None):
    """LORD under dependence: onlineFDR's LORD(d, version = "dep") with its defaults."""
    p, single, d = _check(pvalues, level, decisions)
    reps, n = p.shape
    w0 = level / 10 if w0 is None else w0
    b0 = level - w0
    j = np.arange(1, n + 1, dtype=float)
    xi = 0.139307 / (j * np.log(np.maximum(j, 2)) ** 3)
    alpha, R = np.zeros((reps, n)), np.zeros((reps, n), dtype=bool)
    wealth = np.full(reps, w0)  # W before test t
    at_last = np.full(reps, w0)  # W just after the last rejection (w0 before any)
    for t in range(n):
        alpha[:, t] = xi[t] * at_last
        _decide(p, alpha, d, t, R)
        wealth = wealth - alpha[:, t] + R[:, t] * b0
        at_last = np.where(R[:, t], wealth, at_last)
    return _result("lord-dep", level, alpha, R, single)


DEPENDENT = {"lond": lond_dep, "lord++": lord_dep}
