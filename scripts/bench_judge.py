"""A simulated research loop judged three ways: python -m harness.judge's rule, greedy, and a fixed-n design.

SIMULATED: no code is edited and nothing is trained. Each candidate edit is a draw of its true effect
(most null, some small positive, some harmful; in units of sigma, the sd of the paired per-seed
difference candidate - baseline) and its paired differences are drawn as Normal(effect, 1). What is
real is the judge's statistics: the ledger's online FDR rule (harness.stats.fdr.asynchronous.next_alpha,
SAFFRON at FDR 0.1 by default, every decision recorded before the next edit), the sequential design the
harness runs at alpha_t with the judge's futility rule and futility-only looks (SequentialDesign,
first_claim_seeds, simulate, harness.tools.judge.verdict.FUTILITY_RULE and FUTILITY_FROM: the harness's
own code), and the judge's keep rule (sequential decision better, and the decision p -- the larger of
the paired t test's and the exact sign-flip test's two-sided p -- at most alpha_t). One approximation:
alpha_t is rounded DOWN to a grid of GRID_PER_DECADE values per decade (each distinct level costs a calibration of
seconds), so the simulated judge is slightly more conservative than the real one.

Printed: (a) the judge's false discovery proportion averaged over LOOPS loops (the FDR, with its SE)
against the declared level; (b) greedy ("keep if one candidate run beats one baseline run": one paired
difference > 0) false-keep rate and FDR; (c) the judge's mean candidate runs per decision (over the judgements that ran) against a
fixed-n paired t test at the same alpha_t with the judge's power on the small positive effects (each
edit's n the fewest seeds with that power at its alpha_t, interpolated between whole numbers: a design
that runs n or n + 1 seeds at random has exactly that power, so rounding up does not flatter the judge).

    python scripts/bench_judge.py [--edits 200] [--loops 40] [--max-seeds 30] [--level 0.1] [--seed 0]
        [--repo NEW_FOLDER [--budget-min 20] [--calibration-seeds 24] [--report-only]]   # and a REAL loop
                                                                     # (judge_real_loop.py)
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:  # this checkout's harness, not another installed one
    sys.path.insert(0, REPO_ROOT)

import numpy as np  # noqa: E402
from scipy import stats as sps  # noqa: E402

from harness.stats.fdr.asynchronous import next_alpha  # noqa: E402
from harness.stats.sequential.design import BETTER, SequentialDesign, first_claim_seeds  # noqa: E402
from harness.stats.sequential.looks import simulate  # noqa: E402
from harness.stats.sign_flip import sign_flip_tail  # noqa: E402
from harness.tools.judge.verdict import FUTILITY_FROM, FUTILITY_RULE  # noqa: E402

MIX = {"null": (0.8, 0.0), "small positive": (0.1, 0.7), "harmful": (0.1, -1.0)}  # share, effect in sigma
GRID_PER_DECADE = 10
_DESIGNS: dict = {}


def grid_down(alpha: float) -> float:
    return 10 ** (math.floor(math.log10(alpha) * GRID_PER_DECADE) / GRID_PER_DECADE)


def design(alpha: float, max_seeds: int, futility_from=FUTILITY_FROM):
    """The judge's sequential design at this level (the harness's defaults, no margin: better or worse than
    0, and the judge's futility rule, asked from ``futility_from`` seeds: None, at the first claim look);
    None when no look up to max_seeds can claim at it (the harness refuses such a run: the judge exits 2,
    and its ledger test is settled with p = 1, not kept)."""
    key = (alpha, max_seeds, futility_from)
    if key not in _DESIGNS:
        kw = dict(max_seeds=max_seeds, alpha=alpha, margin=None, direction="max", equivalence=False,
                  futility_rule=FUTILITY_RULE, futility_from=futility_from)
        try:
            _DESIGNS[key] = SequentialDesign(min_seeds=first_claim_seeds(**kw), **kw)
        except ValueError:
            _DESIGNS[key] = None
    return _DESIGNS[key]


def decision_p(d: np.ndarray) -> float:
    """analysis.json's decision p of 'differs from 0': max(t test's, exact sign-flip test's two-sided p)."""
    t = sps.ttest_1samp(d, 0.0).pvalue if np.std(d) > 0 else (0.0 if d.mean() != 0 else 1.0)
    flip = min(1.0, 2 * min(sign_flip_tail(d), sign_flip_tail(-d)))
    return max(float(t), float(flip))


def fixed_n(power: float, effect: float, alpha: float, cap: int = 400) -> float:
    """The seeds a paired t test (two-sided at alpha) needs for ``power`` against ``effect``: between the
    fewest whole n with that power and n - 1, interpolated in power (running n - 1 or n seeds at random
    with those odds has exactly ``power``)."""
    def power_at(n):
        c = sps.t.ppf(1 - alpha / 2, n - 1)
        return float(sps.nct.sf(c, n - 1, effect * math.sqrt(n)))

    below = power_at(2)
    if below >= power:
        return 2.0
    for n in range(3, cap):
        at = power_at(n)
        if at >= power:
            return n - 1 + (power - below) / (at - below)
        below = at
    return float(cap)


def one_loop(rng, edits: int, max_seeds: int, method: str, level: float, futility_from=FUTILITY_FROM) -> list[dict]:
    kinds = rng.choice(list(MIX), size=edits, p=[s for s, _ in MIX.values()])
    ps, kept, out = [], [], []
    for kind in kinds:
        effect = MIX[kind][1]
        alpha_t = next_alpha(method, ps, kept, level=level, decision_times=[None] * len(ps))
        d = rng.normal(effect, 1.0, max_seeds)
        chosen = design(grid_down(alpha_t), max_seeds, futility_from)
        if chosen is None:  # refused before any run
            n, p, keep = 0, 1.0, False
        else:
            code, used = simulate(chosen, d[None, :])
            n = int(used[0]) or max_seeds
            p = decision_p(d[:n])
            keep = bool(code[0] == BETTER and p <= alpha_t)
        ps.append(p)
        kept.append(keep)
        out.append({"kind": kind, "keep": keep, "runs": n, "alpha": alpha_t, "greedy": bool(d[0] > 0), "p": p,
                    "refused": chosen is None})
    return out


def simulated(args, rng) -> None:
    """The simulated loops, judged three ways; their (a), (b), (c) printed."""
    early = args.futility_from or None
    loops = [one_loop(rng, args.edits, args.max_seeds, args.method, args.level, early) for _ in range(args.loops)]

    def fdp(loop, key):
        keeps = [e for e in loop if e[key]]
        return sum(e["kind"] != "small positive" for e in keeps) / max(len(keeps), 1)

    def mean_se(xs):
        xs = np.asarray(xs, float)
        return xs.mean(), xs.std(ddof=1) / math.sqrt(len(xs)) if len(xs) > 1 else float("nan")

    every = [e for loop in loops for e in loop]
    nulls = [e for e in every if e["kind"] != "small positive"]
    positives = [e for e in every if e["kind"] == "small positive"]
    fdr, fdr_se = mean_se([fdp(loop, "keep") for loop in loops])
    gfdr, gfdr_se = mean_se([fdp(loop, "greedy") for loop in loops])
    power = sum(e["keep"] for e in positives) / max(len(positives), 1)
    judge_runs = float(np.mean([e["runs"] for e in every if not e["refused"]] or [float("nan")]))
    small = MIX["small positive"][1]
    fixed = float(np.mean([fixed_n(power, small, e["alpha"]) for e in every if not e["refused"]])) \
        if power > 0 and judge_runs == judge_runs else float("nan")
    print(f"simulated loop: {args.loops} loops x {args.edits} candidate edits (SIMULATED metric draws; mix "
          + ", ".join(f"{k} {s:.0%} at {e:+g} sigma" for k, (s, e) in MIX.items())
          + f"); judge: {args.method} at FDR {args.level}, sequential up to {args.max_seeds} seeds, "
          f"futility rule {FUTILITY_RULE} " + (f"from {early} seeds" if early else "from the first claim look"))
    print(f"(a) judge:  FDR {fdr:.4f} +- {fdr_se:.4f} (SE) vs declared {args.level}; false keeps "
          f"{sum(e['keep'] for e in nulls)} of {len(nulls)} null or harmful edits; keeps "
          f"{sum(e['keep'] for e in every)}; power on small positive edits {power:.3f}; refused (alpha_t too small "
          f"for a claim within --max-seeds) {sum(e['refused'] for e in every)}; median alpha_t "
          f"{np.median([e['alpha'] for e in every]):.2g}; null p-values above 0.5 (SAFFRON's non-candidates, ADDIS's "
          f"discards) {np.mean([e['p'] > 0.5 for e in nulls]):.3f}")
    print(f"(b) greedy: false-keep rate {sum(e['greedy'] for e in nulls) / len(nulls):.3f} of null or harmful "
          f"edits; FDR {gfdr:.3f} +- {gfdr_se:.3f}; power {sum(e['greedy'] for e in positives) / max(len(positives), 1):.3f}")
    print(f"(c) candidate runs per decision: judge {judge_runs:.2f} vs fixed-n paired t test of the judge's power "
          f"at the same alpha_t {fixed:.2f} (ratio {judge_runs / fixed:.2f}; target <= 0.8)")


def main(argv=None) -> int:
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a.add_argument("--edits", type=int, default=200)
    a.add_argument("--loops", type=int, default=40)
    a.add_argument("--max-seeds", type=int, default=30)
    a.add_argument("--method", default="saffron")
    a.add_argument("--level", type=float, default=0.1)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--futility-from", type=int, default=FUTILITY_FROM, help="the simulated loops' futility-only "
                   f"looks from this many seeds (default {FUTILITY_FROM}, the judge's; 0: none, the first claim look)")
    a.add_argument("--repo", default=None, help="also a REAL loop of code edits in a new scratch repository made in "
                   "this folder (judge_real_loop.py), after the simulated loops")
    a.add_argument("--budget-min", type=float, default=20, help="--repo: stop the real loop's edits after this")
    a.add_argument("--calibration-seeds", type=int, default=24, help="--repo: paired seeds per edit kind, and per "
                   "small positive edit measured after the loop")
    a.add_argument("--report-only", action="store_true", help="--repo: a folder where a real loop ran: measure its "
                   "small positive edits and print its (a), (b), (c) again, judging nothing")
    args = a.parse_args(argv)
    if args.report_only and not args.repo:
        a.error("--report-only needs --repo, the folder where a real loop ran")
    rng = np.random.default_rng(args.seed)
    if not args.report_only:  # the simulated loops do not depend on the real one: not run again
        simulated(args, rng)
    if args.repo:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # its sibling modules, however it was imported
        from judge_real_loop import finished_loop, measure_positives, real_loop, report

        if args.report_only:
            loop = finished_loop(Path(args.repo))
        else:
            loop = real_loop(Path(args.repo), edits=args.edits, max_seeds=args.max_seeds, method=args.method,
                             level=args.level, rng=rng, mix=MIX, calibration_seeds=args.calibration_seeds,
                             budget_s=60 * args.budget_min)
        print("the small positive edits judged, each measured against its own baseline:")
        effects = measure_positives(Path(args.repo), loop["rows"], args.calibration_seeds)
        report(loop, level=args.level, fixed_n=fixed_n, effects=effects)
    return 0


if __name__ == "__main__":
    sys.exit(main())
