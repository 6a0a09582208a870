"""The simulation behind docs/statistics.md's online FDR table: streams of nulls and non-nulls.

Each replicate is a stream of ``n`` one-sided z-tests; each is a true effect (mean ``effect``)
with probability ``pi1``, else a null (mean 0). ``rho`` > 0 makes the z's equicorrelated (one
shared factor per replicate: positive dependence, under which LORD++, SAFFRON and ADDIS are not
guaranteed, and which the table reports beside the independent case). Seeded, vectorised over
replicates: every procedure sees the same streams.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from .online_fdr import online_fdr


@dataclass(frozen=True)
class OnlineFDRSimulation:
    method: str
    level: float
    fdr: float  # mean over replicates of V / max(R, 1)
    fdr_se: float  # its standard error
    power: float  # mean share of the true effects rejected
    mean_rejections: float


def simulate_streams(n: int = 200, reps: int = 1000, pi1: float = 0.2, effect: float = 3.0, rho: float = 0.0,
                     seed: int = 0):
    """(p-values, is_null), each replicates x n."""
    rng = np.random.default_rng(seed)
    null = rng.random((reps, n)) >= pi1
    z = rng.standard_normal((reps, n))
    if rho:
        z = np.sqrt(rho) * rng.standard_normal((reps, 1)) + np.sqrt(1 - rho) * z
    z = z + np.where(null, 0.0, effect)
    return norm.sf(z), null


def simulate_online_fdr(method: str, level: float = 0.1, p=None, null=None, **stream) -> OnlineFDRSimulation:
    """The false discovery rate and power of ``method`` at ``level`` over simulated streams (``p`` and
    ``null`` from simulate_streams, or made here from ``stream``'s keywords)."""
    if p is None:
        p, null = simulate_streams(**stream)
    rejected = online_fdr(method, p, level=level).rejected
    false = (rejected & null).sum(axis=1)
    fdp = false / np.maximum(rejected.sum(axis=1), 1)
    effects = (~null).sum(axis=1)
    power = ((rejected & ~null).sum(axis=1) / np.maximum(effects, 1))[effects > 0]
    return OnlineFDRSimulation(method=method, level=level, fdr=float(fdp.mean()),
                               fdr_se=float(fdp.std(ddof=1) / np.sqrt(len(fdp))), power=float(power.mean()),
                               mean_rejections=float(rejected.sum(axis=1).mean()))
