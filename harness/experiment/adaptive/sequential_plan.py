"""Sequential mode, the bookkeeping: the design from ``ab.sequential``, which seeds count, what next.

Hydra-free and torch-free, shared by the in-process mode and the Hydra
sweeper (hydra_plugins/harness_sweeper). The statistics are harness.stats.sequential's; here we
only decide which result files give which paired differences, in which order:

- seeds are used in order: ``ab.seeds`` as given, then the smallest non-negative integers not in
  it (with the default ab.seeds, seed i is i);
- a seed counts when the baseline and every arm still running have a completed result with a
  finite metric; a seed with a failed run counts for no arm (it is recorded, and the next seed
  takes its place, up to ``ab.sequential.max_failures`` failed runs);
- a run that diverged (a non-finite loss or metric) is counted as ``stats.diverged`` declares
  (harness/experiment/adaptive/sequential_diverged.py): worst (a pair counted by the signed-rank sign-flip
  test), exclude (its seed left out, not a failure), or fail (the run stops);
- an arm stops getting seeds once its decision is settled (better, worse, equivalent, futile, or
  undecided at the maximum); the run stops when every arm is settled.

The decisions are a pure function of the ordered results, so the same result files always give
the same looks: a killed run continued with the same command, the sweeper and the in-process
loop all reach the same decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Optional

SCHEMA = "harness.sequential/1"
SEQUENTIAL_NAME = "sequential.json"
FIGURE_NAME = "sequential.png"

from harness.config.sequential_design import _number  # noqa: E402


def seed_order(seeds) -> Iterator[int]:
    """ab.seeds in order, then the smallest non-negative integers not among them."""
    given = [int(x) for x in seeds]
    yield from given
    used, i = set(given), 0
    while True:
        if i not in used:
            yield i
        i += 1


# -- which results count, and what runs next ----------------------------------------------------


@dataclass
class Plan:
    """What the result files say now, and the next batch (empty when done)."""

    history: dict  # arm -> tuple of Look (every look reached, up to the settling one)
    pair_seeds: dict  # arm -> the seeds whose pairs the looks used, in order
    active: list  # arms still getting seeds
    failed: list  # [{"seed", "arm", "reason"}] failed runs among the seeds used so far
    batch_seeds: list = field(default_factory=list)  # the next batch: these seeds ...
    batch_arms: list = field(default_factory=list)  # ... for these arms (the baseline first)
    stopped: Optional[str] = None  # why the run stops unsettled (the failure budget)
    diverged: list = field(default_factory=list)  # [{"seed", "arm", "reason"}] runs that diverged
    rule: str = "worst"  # stats.diverged
    ran: dict = field(default_factory=dict)  # arm -> seeds it ran among those walked (the counts' "of N")

    @property
    def done(self) -> bool:
        return not self.batch_seeds


def _value(r, metric):
    if r.get("status") != "completed":
        err = r.get("error") or {}
        return None, f"failed: {err.get('type', 'error')}: {err.get('message', 'no message')}"
    from harness.results import metric_value

    v = metric_value(r, metric)  # a NaN written as null comes back as NaN: a divergence, not "None"
    if not _number(v):
        return None, f"metric {metric} is {v!r}"
    return float(v), None


def plan(design, results, *, seeds, baseline: str, arms: list, metric: str, max_failures: int = 0,
         diverged: str = "worst") -> Plan:
    """Walk the seeds in order over the results; replay each arm; choose the next batch.

    ``results``: result dicts (any order; one per (seed, arm)). ``seeds``: ab.seeds as given.
    ``arms``: the arms compared with ``baseline``, in order. ``diverged``: stats.diverged.
    """
    from harness.experiment.adaptive import sequential_diverged as sd
    from harness.results import diverged as is_diverged

    by = {(r.get("seed"), str(r.get("arm"))): r for r in results}
    looks = set(design.schedule)  # the futility-only looks too
    active = list(arms)
    diffs = {a: [] for a in arms}
    finished = {a: [] for a in arms}  # per pair: both runs finished
    both = {a: [] for a in arms}  # per pair: both runs diverged
    mags = {a: [] for a in arms}  # per pair where both finished: its largest |value| (the rounding's scale)
    used = {a: [] for a in arms}
    failed: list = []
    down_runs: list = []
    ran = {a: 0 for a in [baseline, *arms]}
    order = seed_order(seeds)
    frontier = None
    for s in order:
        if not active:
            break
        need = [baseline, *active]
        runs = {a: by.get((s, a)) for a in need}
        if any(r is None for r in runs.values()):
            frontier = s  # the first seed still missing a run: the next batch starts here
            break
        values, down = {}, set()
        for a, r in runs.items():
            ran[a] += 1
            values[a], why = _value(r, metric)
            if why and is_diverged(r, metric):
                down.add(a)
                down_runs.append({"seed": s, "arm": a, "reason": why})
            elif why:
                failed.append({"seed": s, "arm": a, "reason": why})
        if down and diverged == "fail":
            out = Plan({a: sd.replay_pairs(design, diffs[a], finished[a], both=both[a], arm=a, magnitude=mags[a])
                        for a in arms}, used, active, failed,
                       diverged=down_runs, rule=diverged, ran=ran)
            out.stopped = sd.fail_message(down_runs)
            return out
        if any(v is None for a, v in values.items() if a not in down) or (down and diverged == "exclude"):
            continue  # a seed with a failed run (or, under exclude, a diverged one) counts for no arm
        for a in list(active):
            if a in down or baseline in down:
                diffs[a].append(sd.worst_difference(design, a in down, baseline in down))
            else:
                diffs[a].append(values[a] - values[baseline])
            finished[a].append(a not in down and baseline not in down)
            mags[a].append(0.0 if a in down or baseline in down else max(abs(values[a]), abs(values[baseline])))
            both[a].append(a in down and baseline in down)
            used[a].append(s)
            if len(diffs[a]) in looks:
                h = sd.replay_pairs(design, diffs[a], finished[a], both=both[a], arm=a, magnitude=mags[a])
                if h and h[-1].settled:
                    active.remove(a)
    history = {a: sd.replay_pairs(design, diffs[a], finished[a], both=both[a], arm=a, magnitude=mags[a]) for a in arms}
    pair_seeds = {a: used[a][: (history[a][-1].n if history[a] else len(used[a]))] for a in arms}
    out = Plan(history, pair_seeds, active, failed, diverged=down_runs, rule=diverged, ran=ran)
    if diverged == "exclude" and len({e["seed"] for e in down_runs}) > design.max_seeds:
        out.stopped = sd.too_many_left_out(down_runs, design)
        return out
    if len(failed) > max_failures:
        shown = "; ".join(f"seed {f['seed']} arm {f['arm']}: {f['reason']}" for f in failed[:5])
        out.stopped = (f"{len(failed)} failed run(s), more than ab.sequential.max_failures={max_failures}: {shown}"
                       f"{' ...' if len(failed) > 5 else ''}. A run that fails more often in one arm than in "
                       f"the other biases the comparison; fix the cause (the result files say why) and run "
                       f"the same command again, or raise max_failures knowingly.")
        return out
    if not active:
        return out
    n = min(len(diffs[a]) for a in active)
    nxt = next((k for k in design.schedule if k > n), None)
    if nxt is None:  # cannot happen: the last look always settles (undecided at the maximum)
        return out
    batch = [frontier] if frontier is not None else []
    if frontier is None:
        frontier = next(order)
        batch = [frontier]
    while len(batch) < nxt - n:
        batch.append(next(order))
    out.batch_seeds, out.batch_arms = batch, [baseline, *active]
    return out


# -- the record: sequential.json, analysis.json's "sequential" block ----------------------------


_SAY = {
    "better": "{arm} is better than {baseline}{beyond}",
    "worse": "{arm} is worse than {baseline}{beyond}",
    "equivalent": "{arm} and {baseline} are equivalent within ±{m}",
    "futile": "no claim can be settled by {max} seeds (stopped for futility: neither better, worse nor equivalent is within reach)",
    # futility_rule=better: only "better" was asked about (a keep/discard decision); worse is not claimed
    "futile-better": "{arm} is not shown better than {baseline}, and is unlikely to be by {max} seeds (stopped "
                     "for futility: the predictive chance that {max} seeds show it better{beyond} is "
                     "{chance:.2g}, below {futility:g}; non-binding, no claim that it is worse)",
    "undecided": "undecided after {max} seeds, the maximum",
    "continue": "not settled yet",
}


def sentence(look, design, baseline: str, unit: str) -> str:
    from harness.experiment.adaptive import sequential_diverged as sd

    if isinstance(look, sd.CountedLook):
        return sd.sentence(look, design, baseline, unit)
    m = design.margin
    fmt = (lambda x: f"{x:+.2f}") if unit.strip() in ("pts", "%") else (lambda x: f"{x:+.4g}")
    beyond = f" beyond the margin ±{abs(m):g}{unit}" if m else ""
    say = "futile-better" if look.decision == "futile" and design.futility_rule == "better" else look.decision
    head = _SAY[say].format(arm=look.arm, baseline=baseline, beyond=beyond, m=f"{m:g}{unit}" if m else "",
                            max=design.max_seeds, chance=look.chance_to_settle, futility=design.futility)
    lo, hi = look.interval
    note = getattr(look, "note", "")  # why the interval's claim was not made (the exact sign-flip test)
    where = f"after {look.n} seeds, look {look.look} of {len(design.schedule)}"
    if look.n in design.futility_looks:  # no interval: the look spends no alpha
        return (f"{head}: {look.arm} - {baseline} = {fmt(look.estimate)}{unit} (sd {look.sd:.4g}) {where}."
                + (f" Note: {note}." if note else ""))
    return (f"{head}: {look.arm} - {baseline} = {fmt(look.estimate)}{unit} ({look.level:.0%} repeated CI "
            f"{fmt(lo)} to {fmt(hi)}) {where}." + (f" Note: {note}." if note else ""))


def record(design, p: Plan, *, metric: str, baseline: str, status: str, runs: int, unit: str = "") -> dict:
    """The sequential block: the design, every look of every arm, the decisions, why it stopped.

    ``unit``: the metric's declared unit (harness.config.declaration), as the numbers are written."""
    from harness.experiment.adaptive.sequential_diverged import lead

    unit = f" {unit}" if unit else ""
    arms = {}
    for arm, h in p.history.items():
        last = h[-1] if h else None
        arms[arm] = {
            "decision": last.decision if last else "continue",
            "sentence": lead(p, baseline, arm) + (sentence(last, design, baseline, unit) if last
                                                  else "the first look is not reached yet"),
            "n": last.n if last else 0,
            "seeds": list(p.pair_seeds[arm]),
            "looks": [x.to_dict() for x in h],
        }
    return {
        "schema": SCHEMA,
        "status": status,  # running | settled | stopped
        "stopped": p.stopped,
        "metric": metric,
        "unit": unit.strip(),
        "baseline": baseline,
        "design": design.to_dict(),
        "boundaries": [{"n": n, "z": z, "nominal_alpha": a, "critical": c} for n, z, a, c in design.boundaries],
        "arms": arms,
        "active": list(p.active),
        "failed": list(p.failed),
        "diverged": {"rule": p.rule, "runs": list(p.diverged),
                     "counts": {a: sum(str(e["arm"]) == a for e in p.diverged) for a in p.ran}},
        "runs": runs,
    }


def stored_design_problem(stored: dict, design, metric: str, baseline: str, where) -> Optional[str]:
    """Why a folder's stored sequential run cannot be continued with this design (None: it can)."""
    from harness.stats.sequential.design import SequentialDesign

    try:
        old = SequentialDesign.from_dict(stored.get("design") or {})
    except (TypeError, ValueError) as e:
        return f"{where} holds a sequential record whose design cannot be read ({e})."
    diff = [f"{k} {getattr(old, k)!r} -> {getattr(design, k)!r}" for k in SequentialDesign.__dataclass_fields__
            if not k.startswith("_") and getattr(old, k) != getattr(design, k)]
    for k, new in (("metric", metric), ("baseline", baseline)):
        if stored.get(k) != new:
            diff.append(f"{k} {stored.get(k)!r} -> {new!r}")
    if not diff:
        return None
    return (f"{where} holds a sequential run declared with another design ({'; '.join(diff)}). The design is "
            f"declared before the data: changing it after some looks voids the error guarantee of every "
            f"claim. Run with the stored settings to continue it, or choose another output folder "
            f"(hydra.run.dir=..., or hydra.sweep.dir=... for the sweeper).")
