"""Sequential mode, runs that diverged (a non-finite loss or metric), counted as ``stats.diverged`` says.

The looks of harness.stats.sequential read a repeated confidence interval for the mean difference:
a diverged run has no value, so a pair with one has no difference, and no interval can hold it.
Under ``worst`` (the default) such a pair is still counted, as the fixed-seed analysis counts it
(harness.analysis.diverged): a loss for the arm that diverged alone, a win where the baseline did, a
tie where both did. From the first look whose pairs include one, an arm is decided by the signed-rank
sign-flip test of those pairs (harness.stats.diverged), which is exact at any n whatever the sizes:

- the look claims "better" or "worse" (than the baseline, no margin: a diverged run has no size)
  when the test's two-sided p is at most the α this look spends: the increment of the design's own
  spending function at this look, with α/arms in all (Bonferroni over the arms, as the design). Over
  the looks these levels sum to α/arms, so by the union bound no claim is false more often, whatever
  the joint law of the looks' statistics; no equivalence, no futility; "undecided" at the last look.
- the looks before the first divergence are the design's own, unchanged. Given the pairs'
  magnitudes, which say where the divergences are, the signs are fair coins under the null, so each
  such look's chance of a false claim is at most its increment times the chance a divergence came by
  then; when divergence does not depend on the finished pairs' values, the two parts sum to at most
  α/arms (tests/test_sequential_diverged.py measures it on null simulations).

``exclude`` leaves a seed with a divergence out (the next seed takes its place, not a failure against
``ab.sequential.max_failures``) and leads each decision with the survivorship warning; ``fail`` stops
the run at the first divergence, with no decision. A run that failed otherwise stays a failure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.stats.sequential.bounds import spend
from harness.stats.sequential.looks import Look, replay


@dataclass(frozen=True)
class CountedLook(Look):
    """A look whose pairs include a divergence, decided by the signed-rank sign-flip test: ``estimate``
    and ``sd`` are those of the finished pairs, ``interval`` has no ends (None in JSON),
    ``nominal_alpha`` is the two-sided level this look spends and ``sign_flip_p`` the test's p."""

    rule: str = "worst"
    finished: int = 0  # pairs where both finished
    arm_only: int = 0  # pairs where only the arm diverged (a loss for it)
    baseline_only: int = 0  # pairs where only the baseline diverged (a win for the arm)
    both: int = 0  # pairs where both diverged (a tie)
    method: str = "exact"  # how the sign-flip p was counted (harness.stats.sign_flip)


def spent(design, k: int) -> float:
    """The α look ``k`` (0-based) spends: the increment of the design's spending function there, with
    α/arms in all (two-sided: the signed-rank test has no margin to make a claim one-sided)."""
    t = np.array([0, *design.looks], dtype=float) / design.max_seeds
    cum = spend(design.spending, design.gamma, design.alpha / design.arms, t)
    cum[0] = 0.0
    return float(cum[k + 1] - cum[k])


def counted_look(design, k: int, d, finished, both, arm, scale=None) -> CountedLook:
    """Look ``k`` on pairs ``d`` (arm - baseline in the metric's units; -inf/+inf for "max" where only
    the arm/the baseline diverged, the signs swapped for "min"; 0 where both did). ``scale``: the
    largest |value| of the pairs where both finished, by which the differences are rounded before ranking."""
    from harness.stats.diverged import diverged_pairs_test

    d, finished, both = np.asarray(d, float), np.asarray(finished, bool), np.asarray(both, bool)
    g = d if design.direction == "max" else -d  # positive: the arm better
    test = diverged_pairs_test(g, both=int(both.sum()), scale=scale)
    level = spent(design, k)
    last = k == len(design.looks) - 1
    if test.pvalue <= level and test.statistic != 0:
        decision = "better" if test.statistic > 0 else "worse"
    else:
        decision = "undecided" if last else "continue"
    done = d[finished]
    sd = float(np.std(done, ddof=1)) if done.size > 1 else 0.0
    note = (f"the pairs include divergences, counted as worst (stats.diverged=worst): the signed-rank sign-flip "
            f"test gives p = {test.pvalue:.3g} ({test.method}) against the {level:.3g} this look spends; no margin "
            f"or equivalence claim, a diverged run has no size")
    return CountedLook(look=design.schedule.index(int(d.size)) + 1, n=int(d.size),
                       estimate=float(done.mean()) if done.size else float("nan"),
                       sd=sd, interval=(float("-inf"), float("inf")), level=1.0 - design.alpha / design.arms,
                       critical=float("nan"), nominal_alpha=level, margin=design.margin, chance_to_settle=1.0,
                       skewness=0.0, decision=decision, arm=arm, sign_flip_p=test.pvalue, note=note,
                       finished=int(finished.sum()), arm_only=test.arm_only, baseline_only=test.baseline_only,
                       both=test.both, method=test.method)


def replay_pairs(design, d, finished, *, both=None, arm=None, magnitude=None) -> tuple:
    """Every look the pairs reach, up to the settling one: the design's own looks while every pair so
    far finished, then counted looks. ``finished[i]``: both runs of pair i finished; ``both[i]``: both
    diverged (d[i] is then 0); ``magnitude[i]``: the largest |value| of pair i where both finished (0
    otherwise), which says how the differences are rounded."""
    d, finished = np.asarray(d, float), np.asarray(finished, bool)
    both = np.zeros(d.size, bool) if both is None else np.asarray(both, bool)
    first = int(np.argmin(finished)) if not finished.all() else d.size
    history = list(replay(design, d[:first], arm=arm))  # before any divergence: the design's own looks
    if (history and history[-1].settled) or first == d.size:
        return tuple(history)
    for k, n in enumerate(design.looks):
        if n <= first:
            continue
        if n > d.size:
            break
        scale = None if magnitude is None else max(magnitude[:n], default=0.0)
        history.append(counted_look(design, k, d[:n], finished[:n], both[:n], arm, scale))
        if history[-1].settled:
            break
    return tuple(history)


def worst_difference(design, arm_down: bool, base_down: bool) -> float:
    """A pair with a divergence, in the metric's units: worse than any finished one for the side that
    diverged alone, 0 (a tie) where both did."""
    if arm_down and base_down:
        return 0.0
    worse = float("-inf") if design.direction == "max" else float("inf")
    return worse if arm_down else -worse


def fail_message(runs: list) -> str:
    named = "; ".join(f"seed {e['seed']} arm {e['arm']}: {e['reason']}" for e in runs[:5])
    more = f" and {len(runs) - 5} more" if len(runs) > 5 else ""
    return (f"{len(runs)} run(s) diverged ({named}{more}), and the declaration says stats.diverged=fail: the "
            f"sequential run stops here, with no verdict. The results are kept; declare stats.diverged=worst "
            f"(count a diverged run as worse than every finished run of its seed) or exclude (leave its seed "
            f"out, with a survivorship warning) and run the same command again to go on.")


def too_many_left_out(runs: list, design) -> str:
    return (f"{len(runs)} seeds were left out because a run diverged (stats.diverged=exclude), more than the "
            f"design's ab.sequential.max_seeds={design.max_seeds}: an arm that diverges this often would take "
            f"seeds without end. Declare stats.diverged=worst to count its divergences, or fix the training.")


def lead(p, baseline: str, arm: str) -> str:
    """What a decision's sentence starts with when a run diverged: the counts per arm (and, under
    exclude, the survivorship warning); '' when none did."""
    from harness.analysis.diverged import counts_line, survivorship_warning

    if not p.diverged or p.rule == "fail":
        return ""
    counts = {a: sum(str(e["arm"]) == a for e in p.diverged) for a in p.ran}
    said = counts_line(counts, p.ran, p.rule)
    if p.rule == "exclude":
        said += " " + survivorship_warning(counts, arm, baseline)
    return said + " "


def sentence(look: CountedLook, design, baseline: str, unit: str) -> str:
    fmt = (lambda x: f"{x:+.2f}") if unit.strip() in ("pts", "%") else (lambda x: f"{x:+.4g}")
    claim = {"better": f"{look.arm} is better than {baseline}", "worse": f"{look.arm} is worse than {baseline}",
             "undecided": f"undecided after {design.max_seeds} seeds, the maximum",
             "continue": "not settled yet"}[look.decision]
    on = (f" On the {look.finished} pairs where both finished, {look.arm} - {baseline} = {fmt(look.estimate)}{unit}."
          if look.finished else "")
    return (f"{claim}: with the diverged runs counted as worst, the signed-rank sign-flip test on {look.n} pairs "
            f"gives p = {look.sign_flip_p:.3g} ({look.method}; {look.arm} alone diverged in {look.arm_only}, "
            f"{baseline} alone in {look.baseline_only}, both in {look.both}) against the level {look.nominal_alpha:.3g} that "
            f"look {look.look} of {len(design.schedule)} spends.{on} No margin claim: a diverged run has no size.")
