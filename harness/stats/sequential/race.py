"""Racing K configurations on common seeds: Kim & Nelson's fully sequential procedure (KN, 2001).

Kim, S.-H. and Nelson, B. L. (2001), "A fully sequential procedure for indifference-zone selection
in simulation", ACM TOMACS 11(3), 251-273. Every configuration runs on the same seeds (common
random numbers), so the variance that matters is that of the paired differences X_i - X_l, which
KN estimates per pair from the first n0 seeds and then holds fixed:

    eta  = ((2 a / (k - 1)) ** (-2 / (n0 - 1)) - 1) / 2          h2 = 2 eta (n0 - 1)
    S2_il = sample variance of (X_i - X_l) over the first n0 seeds
    W_il(r) = max(0, delta / (2 r) * (h2 S2_il / delta**2 - r))

At a look after r seeds, a surviving i is dropped when mean_i(r) < mean_l(r) - W_il(r) for some
other survivor l (larger is better here; callers negate a metric to minimise). The promise (KN's
Theorem 1): when the best configuration is at least delta better than every other (the
indifference zone), it is dropped with probability at most ``a``. Looking only every few seeds
(batches) checks a subset of KN's stages, so a wrong drop can only become rarer.

KN's width shrinks like S2 / (delta r): with a margin small against the seed noise even a large gap
takes many seeds. So the race also keeps simultaneous intervals for every pair (t, Bonferroni over
all pairs and all planned looks, so they hold at every look at once), and drops i as soon as its
interval against a survivor lies below -delta (a drop that is then correct: i is worse than the
best by more than delta); and it stops when the survivors' intervals all lie inside (-delta,
delta). The race's alpha is split: ``a = alpha / 2`` for KN and alpha / 2 for the intervals, so
"the best was kept (under the indifference zone), every interval drop was worse than the best by
more than delta, and a set's members are within delta" holds with probability >= 1 - alpha
(union bound).

Everything is vectorised over a leading axis of replications: the race itself calls the same
functions with one replication (``simulate`` and ``look`` share ``screen``).
"""

from __future__ import annotations

import numpy as np
from scipy import stats as _st


def kn_h2(alpha_drop: float, k: int, n0: int) -> float:
    """KN's h^2 for k configurations, first stage n0 seeds, drop error alpha_drop."""
    eta = 0.5 * ((2.0 * alpha_drop / (k - 1)) ** (-2.0 / (n0 - 1)) - 1.0)
    return 2.0 * eta * (n0 - 1)


def pair_variances(x: np.ndarray) -> np.ndarray:
    """x (reps, n, k) -> S2 (reps, k, k): the sample variance of every pair's differences."""
    d = x[:, :, :, None] - x[:, :, None, :]
    return d.var(axis=1, ddof=1)


def widths(s2: np.ndarray, h2: float, delta: float, r: int) -> np.ndarray:
    """W_il(r) for every pair: how far i may be behind l after r seeds and still run."""
    return np.maximum(0.0, delta / (2.0 * r) * (h2 * s2 / delta ** 2 - r))


def screen(means: np.ndarray, alive: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One KN screening over survivors (simultaneous: against the survivors before this look).

    means (reps, k), alive (reps, k) bool, w (reps, k, k). Returns (alive after, by) where by[i]
    is the index of a survivor that beat i (the leader among them), -1 when i was not dropped."""
    behind = means[:, None, :] - w - means[:, :, None]  # [i, l]: mean_l - W_il - mean_i > 0 drops i
    behind = np.where(alive[:, None, :] & alive[:, :, None], behind, -np.inf)
    k = means.shape[1]
    behind[:, np.arange(k), np.arange(k)] = -np.inf
    beaten = (behind > 0).any(axis=2) & alive
    by = np.where(beaten, np.argmax(behind, axis=2), -1)
    return alive & ~beaten, by


def decide(x: np.ndarray, alive: np.ndarray, s2: np.ndarray, h2: float, delta: float, level: float):
    """One look after r = x.shape[1] seeds: (alive after, by, width) -- the race's single rule.

    i is dropped behind l when mean_l - mean_i exceeds min(W_il(r), half_il + delta): KN's width, or
    the simultaneous interval showing i worse than l by more than delta (then i is worse than the
    best by more than delta too, whenever the intervals cover)."""
    est, half = pair_intervals(x, level)
    w = np.minimum(widths(s2, h2, delta, x.shape[1]), half + delta)
    new, by = screen(x.mean(axis=1), alive, w)
    return new, by, w


def interval_level(alpha_eq: float, k: int, looks: int) -> float:
    """The per-interval error: alpha_eq over every pair and every planned look (Bonferroni)."""
    return alpha_eq / (k * (k - 1) / 2 * looks)


def pair_intervals(x: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """x (reps, r, k) -> (mean difference i - l, half-width) over the r seeds, each (reps, k, k)."""
    r = x.shape[1]
    d = x[:, :, :, None] - x[:, :, None, :]
    sd = d.std(axis=1, ddof=1) if r > 1 else np.full(d.shape[:1] + d.shape[2:], np.inf)
    return d.mean(axis=1), _st.t.ppf(1 - level / 2, r - 1) * sd / np.sqrt(r)


def all_within(x: np.ndarray, alive: np.ndarray, delta: float, level: float) -> np.ndarray:
    """(reps,) bool: two or more survivors, and every pair's interval inside (-delta, delta)."""
    est, half = pair_intervals(x, level)
    inside = (np.abs(est) + half < delta) | ~(alive[:, :, None] & alive[:, None, :])
    return inside.all(axis=(1, 2)) & (alive.sum(axis=1) >= 2)


def schedule(n0: int, step: int, max_seeds: int) -> list[int]:
    """The looks: n0, n0 + step, ... and always max_seeds."""
    looks = list(range(n0, max_seeds + 1, step))
    return looks if looks and looks[-1] == max_seeds else looks + [max_seeds]


def simulate(mu, cov, *, n0: int, step: int, max_seeds: int, alpha: float, delta: float, reps: int,
             seed: int = 0, chunk: int = 4000, data=None) -> dict:
    """Run the race on normal data with means mu and covariance cov (bigger is better), reps times.

    Returns per-replication arrays: ``kept`` (reps, k) survivors at the end, ``spent`` seeds run in
    all, ``stop`` (0 one left, 1 all within delta, 2 max seeds). ``data`` (reps, max_seeds, k): race
    these values instead of drawing them (oriented: bigger is better)."""
    mu = np.asarray(mu, float)
    k = len(mu)
    looks = schedule(n0, step, max_seeds)
    h2 = kn_h2(alpha / 2, k, n0)
    level = interval_level(alpha / 2, k, len(looks))
    rng = np.random.default_rng(seed)
    kept, spent, stop = [], [], []
    for start in range(0, reps, chunk):
        m = min(chunk, reps - start)
        x = (rng.multivariate_normal(mu, cov, size=(m, max_seeds)) if data is None  # (m, seeds, k)
             else np.asarray(data, float)[start: start + m])
        s2 = pair_variances(x[:, :n0])
        alive = np.ones((m, k), bool)
        running = np.ones(m, bool)
        used = np.zeros((m, k), int)
        why = np.full(m, 2)
        for r in looks:
            used[running] = np.where(alive[running], r, used[running])
            new, _, _ = decide(x[:, :r], alive, s2, h2, delta, level)
            alive = np.where(running[:, None], new, alive)
            one = running & (alive.sum(axis=1) == 1)
            why[one] = 0
            running &= ~one
            eq = running & all_within(x[:, :r], alive, delta, level)
            why[eq] = 1
            running &= ~eq
            if not running.any():
                break
        kept.append(alive)
        spent.append(used.sum(axis=1))
        stop.append(why)
    return {"kept": np.concatenate(kept), "spent": np.concatenate(spent), "stop": np.concatenate(stop),
            "h2": h2, "looks": looks}
