"""bench_judge --repo: a research loop of real code edits in a scratch repository, judged by the real judge.

Each edit (judge_scratch_repo.py) is written into the working tree of the scratch repository and judged
by ``harness.tools.judge.cli.judge`` (python -m harness.judge's entry, in this process: it runs
``python -m harness`` with ab.factor=code, the baseline commit against WORKTREE, sequentially, at the
level the loop's ledger gives). Exit 0 (keep): the edit is committed and its commit is the next
``--baseline``; otherwise the tree is put back. Beside each judgement, greedy's decision on the same
edit ("keep if one candidate run beats one baseline run": one seed of the judgement's) is read
from the judgement's own units. The truth of an edit is its kind's class (null, small positive,
harmful), whose effect was measured beforehand from many paired seeds.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from pathlib import Path

import judge_scratch_repo as scratch


def _judge(repo: Path, argv: list[str], log) -> tuple[dict, int]:
    from harness.tools.judge.cli import BadInput, judge

    cwd = os.getcwd()
    os.chdir(repo)
    try:
        with contextlib.redirect_stderr(log):  # the harness's own output: the log, not the screen
            return judge(argv)
    except BadInput as e:
        return {"verdict": None, "error": str(e)}, 2
    finally:
        os.chdir(cwd)


def _greedy(out: dict, index: int) -> bool:
    """Whether one seed of the judgement (a different one for each edit: one fixed seed would give every
    repeat of an edit the same outcome) has the candidate's metric better than the baseline's."""
    if not out.get("seeds"):
        return False
    runs = Path(out["results"]) / "runs" / f"seed={out['seeds'][index % len(out['seeds'])]}"
    a, b = (json.loads((runs / f"arm={arm}" / "result.json").read_text())["metrics"]["test_loss"] for arm in "AB")
    return b < a  # lower is better; a tie (identical bits) is no win


def real_loop(work: Path, *, edits: int, max_seeds: int, method: str, level: float, rng, mix: dict,
              calibration_seeds: int, budget_s: float, say=print) -> dict:
    """Run the loop in ``work`` (a new folder); its rows and the calibration."""
    work.mkdir(parents=True)
    repo = work / "repo"
    base = scratch.make_repo(repo)
    t0 = time.perf_counter()
    calibration = scratch.calibrate(repo, calibration_seeds, work / "calibration")
    units = 2 * calibration_seeds * sum(len(k) for k in scratch.KINDS.values())
    say(f"calibration: {calibration_seeds} paired seeds per edit kind against the first baseline, "
        f"{units} units in {time.perf_counter() - t0:.0f} s ({(time.perf_counter() - t0) / units:.2f} s per unit, "
        "in process)")
    for kind, c in calibration.items():
        say(f"  {kind:<10} ({scratch.class_of(kind)}): mean B - A of test_loss {c['mean']:+.5f}, sd {c['sd']:.5f}, "
            f"improvement {c['effect_sigma']:+.2f} sd of the paired difference")
    classes = rng.choice(list(mix), size=edits, p=[s for s, _ in mix.values()])
    ledger, results = work / "ledger.sqlite", work / "judge"
    rows: list[dict] = []
    started = time.perf_counter()
    with open(work / "harness.log", "w") as log:
        for i, cls in enumerate(classes):
            spent = time.perf_counter() - started
            if rows and spent + spent / len(rows) > budget_s:
                say(f"budget of {budget_s / 60:.0f} min reached after {len(rows)} of {edits} edits")
                break
            kind = scratch.apply(repo, str(rng.choice(scratch.KINDS[cls])), i)
            cls = scratch.class_of(kind)  # what the edit really is (an lr edit at the cap is null)
            t = time.perf_counter()
            out, code = _judge(repo, ["--baseline", base, "--results", str(results), "--ledger", str(ledger),
                                      "--config-dir", "conf", "--fdr", method, "--level", str(level),
                                      *scratch.FAST, f"ab.sequential.max_seeds={max_seeds}"], log)
            if cls == "small positive":  # its effect is measured after the loop, against this baseline
                (work / "edits").mkdir(exist_ok=True)
                (work / "edits" / f"{i:03d}.py").write_text((repo / scratch.MODEL_PATH).read_text())
            row = {"edit": i, "class": str(cls), "kind": kind, "baseline": base, "exit": code,
                   "verdict": out.get("verdict"),
                   "keep": code == 0, "runs": out.get("n") or 0, "alpha": out.get("alpha_t"),
                   "greedy": code != 2 and _greedy(out, i), "refused": code == 2, "seconds": time.perf_counter() - t,
                   "results": out.get("results"),
                   "baseline_units": (out.get("baseline") or {}).get("units")}
            rows.append(row)
            if code == 0:
                scratch.git(repo, "add", "-A")
                scratch.git(repo, "commit", "-qm", f"edit {i}: {kind} (judge: keep, effect {out['effect']:+.4g})")
                base = scratch.git(repo, "rev-parse", "HEAD")
            else:
                scratch.discard(repo)
            if i == 0:
                say(f"cost of the first judgement: {row['seconds']:.1f} s ({row['runs']} candidate runs); "
                    f"{edits} edits at that cost: about {row['seconds'] * edits / 60:.0f} min")
            say(f"  edit {i:3d} {kind:<10} -> {row['verdict'] or 'bad input'} after {row['runs']} seeds "
                f"(alpha_t {row['alpha'] or 0:.4g}, {row['seconds']:.1f} s; greedy: {'keep' if row['greedy'] else 'no'})"
                + (f"; baseline units reused {len(row['baseline_units']['reused'])}, ran "
                   f"{len(row['baseline_units']['ran'])}" if row["baseline_units"] else ""))
    (work / "rows.json").write_text(json.dumps(rows, indent=1))
    (work / "calibration.json").write_text(json.dumps(calibration, indent=1))
    return {"rows": rows, "calibration": calibration, "seconds": time.perf_counter() - started}


def finished_loop(work: Path) -> dict:
    """A loop ``real_loop`` ran in ``work`` before, as it returned it (its seconds: the judgements')."""
    rows = json.loads((work / "rows.json").read_text())
    calibration = json.loads((work / "calibration.json").read_text()) if (work / "calibration.json").exists() else None
    return {"rows": rows, "calibration": calibration, "seconds": sum(r["seconds"] for r in rows)}


def _edit_and_baseline(work: Path, row: dict) -> tuple[str, str]:
    """A small positive edit's text of tiny/model.py and the baseline it was judged against: saved by the
    loop, or (a kept edit of a loop that saved neither) its commit and that commit's parent."""
    saved = work / "edits" / f"{row['edit']:03d}.py"
    if saved.exists() and row.get("baseline"):
        return saved.read_text(), row["baseline"]
    repo = work / "repo"
    commit = next(line.split()[0] for line in scratch.git(repo, "log", "--format=%H %s").splitlines()
                  if line.split(" ", 1)[1].startswith(f"edit {row['edit']}: "))
    return scratch.git(repo, "show", f"{commit}:{scratch.MODEL_PATH}"), scratch.git(repo, "rev-parse", f"{commit}^")


def measure_positives(work: Path, rows: list[dict], seeds: int, say=print) -> list[float]:
    """The effect of each small positive edit the loop judged, against its own baseline, from ``seeds``
    paired seeds (in sds of the paired difference): kept lr edits compound, so the first baseline's
    calibration does not say what a later edit was worth."""
    import statistics

    effects = []
    for row in (r for r in rows if r["class"] == "small positive"):
        text, baseline = _edit_and_baseline(work, row)
        tree = work / "measure" / f"{row['edit']:03d}"
        if not tree.exists():
            scratch.git(work / "repo", "worktree", "add", "-q", "--detach", str(tree), baseline)
        (tree / scratch.MODEL_PATH).write_text(text)
        d = scratch.paired_differences(tree, seeds, work / "measure" / f"{row['edit']:03d}-units")
        mean, sd = statistics.fmean(d), statistics.stdev(d)
        effects.append(-mean / sd if sd > 0 else 0.0)
        say(f"  edit {row['edit']:3d} {row['kind']:<10} against its baseline {baseline[:12]}: improvement "
            f"{effects[-1]:+.2f} sd of the paired difference ({seeds} paired seeds; judge: {row['verdict']})")
    return effects


def sign_flip_floor(alpha: float) -> int:
    """The fewest seeds at which the exact sign-flip test's two-sided p (at least 2 / 2**n) can reach
    ``alpha``: the judge's keep rule takes the larger of the t test's and that test's p, so no design
    with that rule claims anything with fewer seeds."""
    return max(2, math.ceil(1 - math.log2(alpha)))


def comparator_power(kept: int, n: int) -> tuple[float, str]:
    """The power the fixed-n design is given: the judge's share of small positive edits kept, or, when it
    kept every one (a design of power 1 needs no finite n), the one-sided 95 % lower bound of that share
    (Clopper-Pearson: 0.05 ** (1 / n)), which gives the fixed-n design fewer seeds: the ratio is then an
    upper bound."""
    if kept == n:
        return 0.05 ** (1 / n), f"the 95% lower bound {0.05 ** (1 / n):.3f} of the judge's power ({kept} of {n} kept)"
    return kept / n, f"the judge's power {kept / n:.3f} ({kept} of {n} kept)"


def report(loop: dict, *, level: float, fixed_n, effects=None, say=print) -> None:
    """(a), (b), (c) of the real loop, as bench_judge prints them for the simulated ones."""
    rows = loop["rows"]
    if not rows:
        say("real loop: no edit judged")
        return
    positive = [r for r in rows if r["class"] == "small positive"]
    others = [r for r in rows if r["class"] != "small positive"]
    keeps = [r for r in rows if r["keep"]]
    greedy = [r for r in rows if r["greedy"]]
    fdp = sum(r["class"] != "small positive" for r in keeps) / max(len(keeps), 1)
    gfdp = sum(r["class"] != "small positive" for r in greedy) / max(len(greedy), 1)
    power = sum(r["keep"] for r in positive) / max(len(positive), 1)
    ran = [r for r in rows if not r["refused"]]
    runs = sum(r["runs"] for r in ran) / max(len(ran), 1)
    if effects:  # each small positive edit measured against its own baseline (measure_positives)
        effect = sum(effects) / len(effects)
        against = f"the small positive edits' mean measured effect {effect:.2f} sd"
    else:
        effect = loop["calibration"]["lr up"]["effect_sigma"]
        against = f"the calibrated small effect {effect:.2f} sd"
    design_power, of_power = (comparator_power(sum(r["keep"] for r in positive), len(positive)) if positive
                              else (0.0, "no power"))
    # the fixed-n design's seeds for each judgement; with the keep rule, no fewer than its sign-flip floor
    ns = [(fixed_n(design_power, effect, r["alpha"]), sign_flip_floor(r["alpha"])) for r in ran] \
        if design_power > 0 else []
    fixed = sum(n for n, _ in ns) / len(ns) if ns else float("nan")
    floored = sum(max(n, floor) for n, floor in ns) / len(ns) if ns else float("nan")
    say(f"real loop: {len(rows)} candidate edits (REAL code edits of a tiny model in a scratch git repository, "
        f"judged by python -m harness.judge's entry in {loop['seconds'] / 60:.1f} min, "
        f"{loop['seconds'] / len(rows):.1f} s per judgement); one loop, so the FDR is this loop's false "
        "discovery proportion (no SE across loops)")
    say(f"(a) judge:  false discovery proportion {fdp:.3f} vs declared {level}; false keeps "
        f"{sum(r['keep'] for r in others)} of {len(others)} null or harmful edits; keeps {len(keeps)} "
        f"({', '.join(sorted({r['kind'] for r in keeps})) or 'none'}); power on small positive edits {power:.3f} "
        f"({sum(r['keep'] for r in positive)} of {len(positive)}); refused {sum(r['refused'] for r in rows)}")
    say(f"(b) greedy: false-keep rate {sum(r['greedy'] for r in others) / max(len(others), 1):.3f} of null or "
        f"harmful edits; false discovery proportion {gfdp:.3f}; power "
        f"{sum(r['greedy'] for r in positive) / max(len(positive), 1):.3f} (on the same edits, judged beside the "
        "judge: greedy's own loop would have moved its baseline at each of its keeps)")
    ratio = runs / fixed if fixed == fixed and fixed > 0 else float("nan")
    say(f"(c) candidate runs per decision: judge {runs:.2f} vs fixed-n paired t test at the same alpha_t with "
        f"{of_power}, against {against}: {fixed:.2f} (ratio "
        f"{'n/a: the judge kept no small positive edit' if math.isnan(ratio) else f'{ratio:.2f}'}; target <= 0.8)")
    if floored == floored:
        say(f"    the same fixed-n design with the judge's keep rule (its sign-flip p reaches alpha_t only from "
            f"{min(floor for _, floor in ns)}-{max(floor for _, floor in ns)} seeds "
            f"at this loop's alpha_t): {floored:.2f} (ratio {runs / floored:.2f})")
