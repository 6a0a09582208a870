"""Runs that diverged (a non-finite loss or metric), counted as the declaration says (``stats.diverged``).

- ``worst`` (the default): a diverged run is worse than every finished run of its seed. Its pairs are
  compared, not left out, by the signed-rank sign-flip test (harness.stats.diverged), which is valid
  with such pairs; the effect sizes stay those of the finished pairs, with the divergence counts
  beside them, and no margin claim is made (a diverged run has no size).
- ``exclude``: the run and its partner are left out; the verdict then leads with a
  survivorship warning, since the arm that diverges more often is judged on its survivors.
- ``fail``: no verdict when any run diverged.

Whenever a run diverged, each verdict sentence starts with the counts per arm.
"""

from __future__ import annotations

import numpy as np

from harness.analysis.selection import AnalysisError, _seed_key


def diverged_runs(excluded) -> list[dict]:
    """The excluded entries that are divergences (selection._usable_runs marks them)."""
    return [e for e in excluded if e.get("diverged")]


def refuse_if_fail(rule: str, runs: list[dict]) -> None:
    if rule == "fail" and runs:
        named = "; ".join(f"seed {e['seed']} arm {e['arm']}: {e['reason']}" for e in runs[:5])
        more = f" and {len(runs) - 5} more" if len(runs) > 5 else ""
        raise AnalysisError(
            f"{len(runs)} run(s) diverged ({named}{more}), and the declaration says stats.diverged=fail: no "
            f"verdict. The results are kept; declare stats.diverged=worst (count a diverged run as worse than "
            f"every finished run of its seed) or exclude (leave it out, with a survivorship warning) to decide.")


def pairs(usable: dict, runs: list[dict], baseline: str, others: list, higher_is_better: bool) -> dict:
    """arm -> {"seeds", "d", "both"} for the comparisons with a divergence: every seed where each arm
    finished or diverged; d oriented so that positive is better for the arm (+inf: only the baseline
    diverged, -inf: only the arm), 0 where both diverged."""
    down = {(e["seed"], str(e["arm"])) for e in runs}
    sign = 1.0 if higher_is_better else -1.0
    out = {}
    for arm in others:
        seeds = {s for (s, a) in list(usable) + list(down) if a in (arm, baseline)}
        rows, both = [], 0
        for seed in sorted(seeds, key=_seed_key):
            a_down, b_down = (seed, baseline) in down, (seed, arm) in down
            a_ok, b_ok = (seed, baseline) in usable, (seed, arm) in usable
            if not ((a_ok or a_down) and (b_ok or b_down)) or not (a_down or b_down):
                continue  # a finished pair is compared as usual; an unfinished partner is a failure
            d = 0.0 if a_down and b_down else (np.inf if a_down else -np.inf)
            both += a_down and b_down
            rows.append((seed, d))
        if rows:
            finished = [(s, sign * (usable[(s, arm)]["value"] - usable[(s, baseline)]["value"]))
                        for s in seeds if (s, arm) in usable and (s, baseline) in usable]
            rows = sorted(rows + finished, key=lambda r: _seed_key(r[0]))
            scale = max((abs(usable[(s, a)]["value"]) for s in seeds for a in (arm, baseline)
                         if (s, arm) in usable and (s, baseline) in usable), default=0.0)
            out[arm] = {"seeds": [s for s, _ in rows], "d": [d for _, d in rows], "both": both,
                        "scale": scale,  # the finished values' magnitude: the differences' rounding
                        "finished": [sign * d for _, d in finished]}  # arm - baseline, for the size
    return out


def counted_seeds(counted: dict, baseline: str) -> set:
    """(seed, arm) of every run the diverged pairs count: they are not 'left out'."""
    keys = set()
    for arm, p in counted.items():
        keys |= {(s, arm) for s in p["seeds"]} | {(s, baseline) for s in p["seeds"]}
    return keys


def counts_line(counts: dict, seeds_per_arm: dict, rule: str) -> str:
    """'diverged: A 0 of 12 seeds, B 2 of 12 (...)': the start of every verdict when any run diverged."""
    said = ", ".join(f"{arm} {n} of {seeds_per_arm.get(arm, 0)} seeds" for arm, n in counts.items())
    how = {"worst": "each counted as worse than every finished run of its seed",
           "exclude": "left out with their partners"}[rule]
    return f"diverged: {said} (stats.diverged={rule}: {how})."


def decide_worst(p: dict, *, arm: str, baseline: str, alpha: float, k: int, unit: str, finished: dict) -> tuple:
    """(block, verdict) of one comparison under ``worst``; ``p``: pairs()'s entry, ``finished``: the
    comparison's own block on the finished pairs (its mean difference and pair count)."""
    from harness.stats.diverged import diverged_pairs_test

    test = diverged_pairs_test(np.array(p["d"]), both=p["both"], scale=p["scale"])
    level = alpha / k
    if test.pvalue < level and test.statistic != 0:
        code = "differs"
        claim = f"{arm} is {'better' if test.statistic > 0 else 'worse'} than {baseline}"
    else:
        code = "undecided"
        claim = f"Undecided whether {arm} differs from {baseline}"
    at = f"α = {alpha:g}" + (f" / {k} comparisons" if k > 1 else "")
    sentence = (f"{claim}: with the diverged runs counted as worst, the signed-rank sign-flip test on "
                f"{test.n_pairs} pairs gives p = {test.pvalue:.3g} ({test.method}; {arm} alone diverged in "
                f"{test.arm_only}, {baseline} alone in {test.baseline_only}, both in {test.both}), decided at {at}. "
                + (f"On the {finished['n_pairs']} pair{'s' if finished['n_pairs'] != 1 else ''} where both "
                   f"finished, {arm} - {baseline} = "
                   f"{finished['mean_diff']:+.3g}{unit}." if finished["mean_diff"] is not None
                   else "No pair finished in both arms: there is no size to show.")
                + " No margin claim: a diverged run has no size.")
    block = {**test.to_dict(), "level": level, "seeds": p["seeds"], "rule": "worst"}
    return block, {"code": code, "sentence": sentence}


def survivorship_warning(counts: dict, arm: str, baseline: str) -> str:
    return (f"SURVIVORSHIP: {arm} diverged in {counts[arm]} seed(s) and {baseline} in {counts[baseline]}; those "
            f"seeds are left out (stats.diverged=exclude), so this verdict rests on the seeds where both finished "
            f"and can favour the arm that diverged more.")


def gathered(rule: str, usable: dict, excluded: list, baseline: str, others: list, higher_is_better: bool) -> dict:
    """What gather() keeps of the divergences (before unpaired runs are dropped): the rule, the
    diverged runs, the pairs ``worst`` counts, and how many seeds each arm ran."""
    runs = diverged_runs(excluded)
    refuse_if_fail(rule, runs)
    seeds = {}
    for (s, a) in usable:
        seeds.setdefault(a, set()).add(s)
    for e in excluded:
        seeds.setdefault(str(e["arm"]), set()).add(e["seed"])
    counted = pairs(usable, runs, baseline, others, higher_is_better) if rule == "worst" and runs else {}
    return {"rule": rule, "runs": runs, "pairs": counted, "seeds_per_arm": {a: len(v) for a, v in seeds.items()}}


def decided_by_rank_only(div: dict, compared) -> list:
    """The arms whose finished pairs were too few for a comparison, decided on their diverged pairs."""
    return [arm for arm in (div.get("pairs") or {}) if arm not in compared]


def apply(out: dict, div: dict, *, arms: list, baseline: str, alpha: float, unit: str) -> None:
    """Write the divergences into analysis.json's content ``out``: each comparison's verdict under
    the declared rule, led by the counts per arm, and the "diverged" block."""
    runs, rule = div.get("runs") or [], div.get("rule", "worst")
    if not runs:
        return
    counts = {a: sum(str(e["arm"]) == a for e in runs) for a in arms}
    lead = counts_line(counts, div.get("seeds_per_arm") or {}, rule)
    rank_only = decided_by_rank_only(div, out["comparisons"])
    k = out["multiple_comparisons"]["comparisons"]  # decide() counted the arms decided by rank alone too
    tests = {}
    for arm, c in out["comparisons"].items():
        p = (div.get("pairs") or {}).get(arm)
        if rule == "worst" and p is not None:
            tests[arm], c["verdict"] = decide_worst(p, arm=arm, baseline=baseline, alpha=alpha, k=k, unit=unit,
                                                    finished=c)
            c["verdict"]["sentence"] = f"{lead} {c['verdict']['sentence']}"
        elif rule == "exclude":
            c["verdict"]["sentence"] = f"{lead} {survivorship_warning(counts, arm, baseline)} {c['verdict']['sentence']}"
        else:
            c["verdict"]["sentence"] = f"{lead} {c['verdict']['sentence']}"
    for entry in out.get("not_compared") or []:
        arm = entry["arm"]
        if arm in rank_only:
            done = div["pairs"][arm]["finished"]
            finished = {"n_pairs": len(done), "mean_diff": float(np.mean(done)) if done else None}
            tests[arm], entry["verdict"] = decide_worst(div["pairs"][arm], arm=arm, baseline=baseline, alpha=alpha,
                                                        k=k, unit=unit, finished=finished)
            entry["verdict"]["sentence"] = f"{lead} {entry['verdict']['sentence']}"
    out["diverged"] = {"rule": rule, "runs": [{key: e[key] for key in ("seed", "arm", "reason")} for e in runs],
                       "counts": counts, "tests": tests}


def counted_runs(analysis: dict | None) -> set:
    """(seed, arm) of the diverged runs an analysis counted as worst: outcomes, not failures (the
    command's exit status leaves them out)."""
    div = (analysis or {}).get("diverged") or {}
    if div.get("rule") != "worst":
        return set()
    seeds = {s for t in (div.get("tests") or {}).values() for s in t.get("seeds", [])}
    return {(e["seed"], str(e["arm"])) for e in div.get("runs") or [] if e["seed"] in seeds}
