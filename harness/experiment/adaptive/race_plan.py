"""The race's bookkeeping: its design, which result files count, each look's drops, what runs next.

Hydra-free and torch-free; the statistics are harness.stats.sequential.race's (Kim & Nelson's procedure). The
configurations are the declaration's arms (from ``ab.arms``, or a sweep override the race sweeper
turned into arms). Seeds are used in order (``ab.seeds``, then the smallest integers not in it, as
in sequential mode); a seed counts when every configuration still running has a completed result
with a finite metric there; a seed with a failed run counts for none (recorded; past
``ab.race.max_failures`` the race stops). A configuration that diverges (a non-finite loss or
metric) where another finishes is dropped there, named with the seed (``stats.diverged: worst``;
with ``exclude`` it is a failed run). Looks at ``ab.race.min_seeds``, then every
``seeds_per_look`` seeds, and at ``max_seeds``.

The decisions are a pure function of the result files, so a killed race resumed with the same
command reaches the same looks and drops.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Optional

import numpy as np

from harness.experiment.adaptive.sequential_plan import _value, seed_order
from harness.results import diverged as is_diverged  # (plan keeps a list named diverged)

SCHEMA = "harness.race/1"
RACE_NAME = "race.json"
FIGURE_NAME = "race.png"


@dataclass(frozen=True)
class RaceDesign:
    configs: tuple  # names, in the declared order
    values: dict  # name -> the value at the factor
    factor: str
    metric: str
    direction: str  # max | min
    unit: str
    margin: float  # delta: the indifference zone, stats.margin
    alpha: float
    min_seeds: int
    seeds_per_look: int
    max_seeds: int
    max_failures: int
    diverged: str = "worst"  # stats.diverged: worst drops a configuration that diverges where others finish

    @property
    def looks(self) -> list:
        from harness.stats.sequential.race import schedule

        return schedule(self.min_seeds, self.seeds_per_look, self.max_seeds)

    def to_dict(self) -> dict:
        from harness.stats.sequential.race import kn_h2

        out = asdict(self)
        out["configs"] = list(self.configs)
        out.update(looks=self.looks, h2=kn_h2(self.alpha / 2, len(self.configs), self.min_seeds))
        return out


def design_problems(decl, race) -> list:
    """One paragraph per bad setting of the race (the declaration's margin, ab.race.*)."""
    p = []
    m = decl.margin
    if isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m) or m <= 0:
        p.append(f"stats.margin={m!r}: a race drops a configuration when it is worse than the best by more than "
                 f"the margin, so the margin must be a number > 0 declared before the data, in {decl.metric}'s "
                 f"units (auto is estimated from the data and null/0 make every difference matter: neither can "
                 f"be used). Set stats.margin=<the smallest difference in {decl.metric} worth choosing for>.")
    if len(decl.arms) < 2:
        p.append(f"the race needs at least 2 configurations and has {len(decl.arms)} ({', '.join(decl.arms)}): "
                 f"sweep one key (optim.lr=0.01,0.03,0.1) or declare ab.arms.")

    def whole(key, low):
        v = race.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            p.append(f"ab.race.{key}={v!r} must be an integer >= {low}.")
            return False
        return True

    ok = whole("min_seeds", 3) & whole("seeds_per_look", 1) & whole("max_seeds", 3) & whole("max_failures", 0)
    if ok and race["max_seeds"] < race["min_seeds"]:
        p.append(f"ab.race.max_seeds={race['max_seeds']} is below ab.race.min_seeds={race['min_seeds']}, the first "
                 f"look (where the variance of every pair's differences is estimated). Raise max_seeds or lower "
                 f"min_seeds (>= 3; Kim & Nelson use 10 or more).")
    if not 0 < decl.alpha < 0.5:
        p.append(f"stats.alpha={decl.alpha!r} must be a number between 0 and 0.5.")
    return p


def design_of(decl, race) -> RaceDesign:
    """The race's design from the declaration and ab.race; ValueError: one paragraph per problem."""
    race = dict(race)
    problems = design_problems(decl, race)
    if problems:
        raise ValueError(" ".join(problems) + " Nothing was run.")
    spec = decl.primary
    return RaceDesign(tuple(decl.arms), {k: decl.arms[k] for k in decl.arms}, decl.factor, decl.metric,
                      spec.direction, decl.unit, float(decl.margin), float(decl.alpha), race["min_seeds"],
                      race["seeds_per_look"], race["max_seeds"], race["max_failures"], decl.diverged)


@dataclass
class Race:
    """What the result files say now, and the next batch (empty when done)."""

    looks: list  # {"look", "n", "alive", "means", "dropped": [{config, by, behind, width}]}
    alive: list
    seeds: list  # the seeds counted, in order
    values: dict  # config -> list of metric values on its seeds (in the order of ``seeds``)
    failed: list
    outcome: Optional[str] = None  # one_left | within_margin | max_seeds
    diverged: list = field(default_factory=list)  # {seed, config, reason}: dropped where the others finished
    stopped: Optional[str] = None
    batch_seeds: list = field(default_factory=list)
    batch_configs: list = field(default_factory=list)
    trained: int = 0  # result files of the race's configurations: every run trained, counted or not

    @property
    def done(self) -> bool:
        return not self.batch_seeds


def plan(design: RaceDesign, results, *, seeds) -> Race:
    from harness.stats.sequential import race as kn

    cfgs = list(design.configs)
    k = len(cfgs)
    sign = 1.0 if design.direction == "max" else -1.0
    by = {(r.get("seed"), str(r.get("arm"))): r for r in results}
    looks_at = design.looks
    h2 = kn.kn_h2(design.alpha / 2, k, design.min_seeds)
    level = kn.interval_level(design.alpha / 2, k, len(looks_at))
    alive = np.ones((1, k), bool)
    rows: list = []  # the counted seeds' values, (n, k), nan for a config already dropped
    counted, failed, looks, diverged = [], [], [], []
    said = 0  # diverged drops already named at a look
    s2 = None
    outcome = None
    order = seed_order(seeds)
    frontier = None
    for s in order:
        if outcome is not None:
            break
        need = [c for c, a in zip(cfgs, alive[0]) if a]
        runs = {c: by.get((s, c)) for c in need}
        if any(r is None for r in runs.values()):
            frontier = s
            break
        vals, down = {}, {}
        for c, r in runs.items():
            vals[c], why = _value(r, design.metric)
            if why and design.diverged == "worst" and is_diverged(r, design.metric):
                down[c] = why
            elif why:
                failed.append({"seed": s, "arm": c, "reason": why})
        if down and len(down) == len(need):
            continue  # every running configuration diverged here: a tie, the seed counts for none
        if any(v is None for c, v in vals.items() if c not in down):
            continue
        for c, why in down.items():  # worse than every finished run of its seed: out of the race
            alive[0, cfgs.index(c)] = False
            diverged.append({"seed": s, "config": c, "reason": why})
            del vals[c]
        if down and alive.sum() == 1:
            outcome = "one_left"
        rows.append([sign * vals[c] if c in vals else np.nan for c in cfgs])
        counted.append(s)
        n = len(rows)
        if n not in looks_at:
            continue
        x = np.array(rows)[None]
        if s2 is None:
            s2 = kn.pair_variances(x)
        means = x.mean(axis=1)  # nan for configurations already dropped (masked by alive)
        new, beat, w = kn.decide(x, alive, s2, h2, design.margin, level)
        dropped = [{"config": cfgs[i], "by": cfgs[beat[0, i]],
                    "behind": float(means[0, beat[0, i]] - means[0, i]), "width": float(w[0, i, beat[0, i]])}
                   for i in range(k) if alive[0, i] and not new[0, i]]
        top = int(np.argmax(np.where(alive[0], means[0], -np.inf)))  # this look's leader
        est, half = kn.pair_intervals(x, level)
        looks.append({"look": len(looks) + 1, "n": n, "alive": [c for c, a in zip(cfgs, alive[0]) if a],
                      "means": {c: sign * float(means[0, i]) for i, c in enumerate(cfgs) if alive[0, i]},
                      "leader": cfgs[top],  # each survivor minus the leader, with its simultaneous interval
                      "versus_leader": {c: [sign * float(est[0, i, top]), float(half[0, i, top])]
                                        for i, c in enumerate(cfgs) if alive[0, i] and i != top},
                      "dropped": dropped, "diverged": diverged[said:]})  # (diverged: dropped since the last look)
        said = len(diverged)
        alive = new
        live = x[:, :, alive[0]]
        if alive.sum() == 1:
            outcome = "one_left"
        elif kn.all_within(live, np.ones((1, live.shape[2]), bool), design.margin, level)[0]:
            outcome = "within_margin"
        elif n >= design.max_seeds:
            outcome = "max_seeds"
        looks[-1]["outcome"] = outcome
    values = {c: [sign * row[i] for row in rows if not math.isnan(row[i])] for i, c in enumerate(cfgs)}
    out = Race(looks, [c for c, a in zip(cfgs, alive[0]) if a], counted, values, failed, outcome, diverged=diverged,
               trained=sum(1 for _, c in by if c in cfgs))
    if len(failed) > design.max_failures:
        shown = "; ".join(f"seed {f['seed']} config {f['arm']}: {f['reason']}" for f in failed[:5])
        out.stopped = (f"{len(failed)} failed run(s), more than ab.race.max_failures={design.max_failures}: {shown}. "
                       f"Fix the cause (the result files say why) and run the same command again, or raise "
                       f"ab.race.max_failures knowingly.")
        return out
    if outcome is not None:
        return out
    n = len(rows)
    nxt = next(x for x in looks_at if x > n)
    batch = [frontier if frontier is not None else next(order)]
    while len(batch) < nxt - n:
        batch.append(next(order))
    out.batch_seeds, out.batch_configs = batch, list(out.alive)
    return out


def summary(design: RaceDesign, p: Race) -> dict:
    """Each configuration against the leader: mean, difference and its interval, seeds spent."""
    from harness.stats.sequential import race as kn

    cfgs = list(design.configs)
    sign = 1.0 if design.direction == "max" else -1.0
    level = kn.interval_level(design.alpha / 2, len(cfgs), len(design.looks))
    means = {c: float(np.mean(v)) if v else None for c, v in p.values.items()}
    pool = p.alive or cfgs
    leader = max((c for c in pool if means[c] is not None), key=lambda c: sign * means[c], default=None)
    dropped = {d["config"]: (x["look"], d) for x in p.looks for d in x["dropped"]}
    gone = {d["config"]: d["seed"] for d in p.diverged}
    out = {}
    for c in cfgs:
        v = p.values[c]
        row = {"value": design.values[c], "n": len(v), "seeds": p.seeds[:len(v)], "mean": means[c],
               "status": "dropped" if c in dropped else ("leader" if c == leader else "in the set" if p.outcome
                                                        else "running"),  # (once over, a survivor runs no more)
               "difference": None, "interval": None}
        if c in dropped:
            row.update(dropped_at_look=dropped[c][0], dropped_by=dropped[c][1]["by"])
        if c in gone:
            row["status"] = f"dropped (diverged at seed {gone[c]})"
        if leader is not None and c != leader and len(v) >= 2:
            x = np.array([v, p.values[leader][:len(v)]]).T[None]
            est, half = kn.pair_intervals(x, level)
            d, h = float(est[0, 0, 1]), float(half[0, 0, 1])
            row.update(difference=d, interval=[d - h, d + h])
        out[c] = row
    return {"leader": leader, "configs": out, "interval_error": level}


def final_status(p: Race) -> str:
    """race.json's status once the race is over: settled (one left, or a set within the margin),
    max_seeds (the set of survivors at the seed limit: not separated, not shown within the margin),
    stopped (with the reason), unsettled (results missing)."""
    if p.stopped:
        return "stopped"
    return {"one_left": "settled", "within_margin": "settled", "max_seeds": "max_seeds"}.get(p.outcome, "unsettled")


def _verdict(design: RaceDesign, p: Race, s: dict) -> str:
    if p.outcome == "one_left":
        return f"{p.alive[0]} is the best: every other configuration was dropped."
    if p.outcome == "within_margin":
        return (f"{', '.join(p.alive)} are indistinguishable from the best: they are within the margin "
                f"±{design.margin:g} of each other.")
    if p.outcome != "max_seeds":
        return "not settled yet"
    u = f" {design.unit}" if design.unit else ""
    leader = s["leader"]
    shown = []
    for c in p.alive:
        row = s["configs"][c]
        if c == leader or row["difference"] is None:
            continue
        iv = row["interval"]
        shown.append(f"{c} {row['difference']:+.3g}{u} [{iv[0]:+.3g}, {iv[1]:+.3g}]")
    against = f" against the leader {leader}" if shown else ""
    return (f"the race reached its maximum of {design.max_seeds} seeds with {', '.join(p.alive)} still in it: not "
            f"separated ({'; '.join(shown) or 'no interval'}{against}). The set of survivors, not shown within the margin "
            f"±{design.margin:g}{u} of each other: a configuration better than every other by at least the margin "
            f"would be in it (docs/racing.md).")


def record(design: RaceDesign, p: Race, *, status: str, runs: int) -> dict:
    s = summary(design, p)
    verdict = _verdict(design, p, s)
    counted = sum(len(v) for v in p.values.values())
    return {
        "schema": SCHEMA, "status": status, "stopped": p.stopped, "outcome": p.outcome, "verdict": verdict,
        "design": design.to_dict(), "looks": p.looks, "alive": list(p.alive), "winner":
        p.alive[0] if p.outcome == "one_left" else None, "set": list(p.alive) if p.outcome else None,
        "leader": s["leader"], "configs": s["configs"], "interval_error": s["interval_error"],
        # every run trained (a batch runs whole: a configuration dropped within it ran its seeds too);
        # seeds_counted: those the looks counted
        "seeds_spent": p.trained, "seeds_counted": counted,
        "seeds_all_to_max": len(design.configs) * design.max_seeds,
        "failed": list(p.failed), "diverged": list(p.diverged), "runs": runs,
    }


def stored_design_problem(stored: dict, design: RaceDesign, where) -> Optional[str]:
    """Why a folder's stored race cannot be continued with this design (None: it can)."""
    old, new = stored.get("design") or {}, design.to_dict()
    # a race stored before stats.diverged existed continues under the declared rule
    diff = [f"{k} {old.get(k)!r} -> {new[k]!r}" for k in new
            if k != "h2" and old.get(k, new[k] if k == "diverged" else None) != new[k]]
    if not diff:
        return None
    return (f"{where} holds a race declared with another design ({'; '.join(diff)}). The design is declared "
            f"before the data: changing it after some looks voids the race's error guarantee. Run with the "
            f"stored settings to continue it, or choose another folder (hydra.sweep.dir=...).")
