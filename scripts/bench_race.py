"""Operating characteristics of the race (harness.stats.sequential.race: Kim & Nelson 2001 on common seeds).

Prints, in one run, for each scenario: the probability of a correct selection (the best alone
left), of the best being in the returned set, of a good one (within the margin of the best) in it, the family-wise rate of wrong drops (a configuration
dropped that was NOT worse than the best by more than the margin), how the race stopped, and the
seeds spent as a ratio to running every configuration to the maximum. Means are in units of the
margin delta; each configuration's value is a seed-common part (sd COMMON, shared: the common
random numbers of paired seeds) plus its own noise (sd 1). Every cell is a vectorised simulation
of REPS races through the same ``simulate``/``screen`` the race sweeper uses, with the sweeper's
defaults (ab.race: first look 10 seeds, a look every 2, at most 40; alpha 0.05). Standard errors
are printed beside each rate.

    python scripts/bench_race.py [--reps 10000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

import numpy as np  # noqa: E402

from harness.stats.sequential.race import simulate  # noqa: E402

N0, STEP, MAX, ALPHA, DELTA, COMMON = 10, 2, 40, 0.05, 1.0, 3.0


def cov(k: int, common: float = COMMON, own: float = 1.0) -> np.ndarray:
    return common ** 2 * np.ones((k, k)) + own ** 2 * np.eye(k)


def cell(name: str, mu, reps: int, common: float = COMMON, seed: int = 0, own: float = 1.0) -> None:
    mu = np.asarray(mu, float)
    k = len(mu)
    r = simulate(mu, cov(k, common, own), n0=N0, step=STEP, max_seeds=MAX, alpha=ALPHA, delta=DELTA, reps=reps, seed=seed)
    kept, best = r["kept"], int(np.argmax(mu))
    protected = mu > mu[best] - DELTA + 1e-9  # not worse than the best by more than the margin
    pcs = (kept[:, best] & (kept.sum(axis=1) == 1)).mean()
    in_set = kept[:, best].mean()
    wrong = (~kept & protected).any(axis=1).mean()
    good = (kept & protected).any(axis=1).mean()  # the returned set holds a config within delta of the best
    se = lambda p: np.sqrt(max(p * (1 - p), 1e-12) / reps)  # noqa: E731
    stops = np.bincount(r["stop"], minlength=3) / reps
    ratio = r["spent"].mean() / (k * MAX)
    print(f"{name:<44} K={k}  P(correct) {pcs:.4f}±{se(pcs):.4f}  P(best kept) {in_set:.4f}±{se(in_set):.4f}  "
          f"FW wrong drops {wrong:.4f}±{se(wrong):.4f}  P(good in set) {good:.4f}  stop one/within/max {stops[0]:.2f}/{stops[1]:.2f}/"
          f"{stops[2]:.2f}  seeds {r['spent'].mean():6.1f} of {k * MAX} = {ratio:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10_000)
    a = ap.parse_args()
    t0 = time.time()
    print(f"race: Kim-Nelson on common seeds; first look {N0}, every {STEP}, max {MAX}; alpha {ALPHA} "
          f"(alpha/2 for drops); margin delta={DELTA}; seed-common sd {COMMON}, own sd 1; {a.reps} races per cell")
    print("promise: P(best kept) >= 1 - alpha/2 = 0.975 when the best leads every other by >= delta (LFC rows)\n")
    spread8 = [0.0, -1.5, -2.0, -2.5, -3.0, -3.5, -4.0, -5.0]
    cell("LFC: best +delta, the rest tied", [1.0] + [0.0] * 7, a.reps)
    cell("LFC, K=3", [1.0, 0.0, 0.0], a.reps)
    cell("one clearly better, the rest spread", spread8, a.reps)
    cell("one clearly better, the rest spread, K=3", spread8[:3], a.reps)
    cell("best +2 delta, the rest tied", [2.0] + [0.0] * 7, a.reps)
    print("\na margin small against the noise (own sd 5 delta), where KN's width alone is slow:")
    cell("own sd 5: LFC, best +delta, the rest tied", [1.0] + [0.0] * 7, a.reps, own=5.0)
    cell("own sd 5: one clearly better, the rest spread", [0.0, -6, -8, -10, -12, -15, -20, -25], a.reps, own=5.0)
    print("\noutside the indifference zone (no promise; wrong drops = a config within delta of the best dropped):")
    cell("two within delta/2 of the best, the rest spread", [0.0, -0.5, -0.5, -2.0, -2.5, -3.0, -4.0, -5.0], a.reps)
    cell("all equal", [0.0] * 8, a.reps)
    cell("all within delta (0, -0.25 ... -1)", list(-np.linspace(0, 1, 8)), a.reps)
    print(f"\n{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
