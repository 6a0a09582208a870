"""Seeds x arms: run the plan's units, write results, check pairing, certify.

An experiment is the base config plus ``ab``: the ONE config path (``ab.factor``) where arms differ,
each arm's value there, and the seeds. The plan (plan.py) holds every arm's config, made and guarded
by arms.py; this module runs each (seed, arm) unless a matching result is already on disk;
writes ``runs/seed=S/arm=A/result.json`` atomically; and checks that arms of one seed share their
initial weights and data order. Resume decisions live in resume.py; statistics in harness/stats/ and
analysis.py, not here.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from omegaconf import DictConfig

from harness.integrations.interrupts import stop_if_seen
from harness.experiment.identity import plain as _plain
from harness.results import config_digest
from harness.results import RESULT_NAME, digests_version, load_steps, save_weights, read_json, read_result, run_dir, write_json, write_result
from harness.experiment.resume import bits_after_rerun, decide, run_lock, set_aside_other_configurations, supersede
from harness.experiment.arms import ExperimentError, PairingError
from harness.experiment.plan import Plan, check_unless_done
from harness.experiment.runner import code_of, run_one
from harness.experiment.rerun import rerun_fresh
from harness.training.threads import is_auto, uses_gpu
from harness.training.fingerprint_coverage import steps_trained, steps_words

# Errors every unit would meet the same way: the first one stops the experiment (its failed result is
# kept), rather than every unit training only to fail: an op without a deterministic implementation,
# and a misuse of the Run (e.g. a per-example record no declared metric can own).
FATAL = ("NondeterministicOp", "DeterminismError", "RunUsageError")

@dataclass
class Executed:
    """What one invocation did: the runs (Outcome) and, unless it ran one unit of a sweep, the analysis."""

    outcome: "Outcome"
    analysis: Optional[dict]  # None for one unit of a sweep (the sweep is analysed as a whole)
    analysis_error: Optional[str] = None


# -- one run ------------------------------------------------------------------------------------


# -- pairing ------------------------------------------------------------------------------------


def check_pairing(results: list[dict]) -> None:
    """Arms of one seed must share init and data order fingerprints (unless the factor changes them)."""
    done = [r for r in results if r.get("status") == "completed"]
    if len(done) < 2:
        return
    expect = done[0]["pairing"]
    ref = done[0]
    for r in done[1:]:
        for key in ("init", "data_order"):
            if expect.get(key) and r["fingerprints"][key] != ref["fingerprints"][key]:
                if key == "data_order" and digests_version(r["fingerprints"]) != digests_version(ref["fingerprints"]):
                    continue  # hashed differently (a result an older harness wrote): the analysis says it is not verified
                raise PairingError(
                    f"seed {r['seed']}: arms {ref['arm']} and {r['arm']} have different {key} fingerprints "
                    f"({ref['fingerprints'][key]} vs {r['fingerprints'][key]}), though ab.factor="
                    f"{r['factor']!r} should not change them. The comparison would not be paired. "
                    "Their result files are kept; look for randomness drawn outside the harness's streams "
                    "(e.g. a model built with its own seed, or data shuffled without the data_order generator)."
                )


# -- certificate --------------------------------------------------------------------------------


def certificate(first: dict, second: dict) -> dict:
    """Compare every per-step fingerprint of a run and its rerun."""
    if (first.get("fingerprints") or {}).get("black_box"):
        return _metrics_certificate(first, second)
    a, b = load_steps(first), load_steps(second)
    n = len(a["loss"])
    diverged = {}
    # per-step parameter digests compare within one digest version (a rerun of a result an older harness wrote)
    same_digests = digests_version(first["fingerprints"]) == digests_version(second["fingerprints"])
    for key in ("loss", "params") if same_digests else ("loss",):
        for i, (x, y) in enumerate(zip(a[key], b[key])):
            if x != y:
                diverged[key] = i + 1
                break
    same_final = first["fingerprints"]["final"] == second["fingerprints"]["final"]
    reproducible = not diverged and same_final and len(a["loss"]) == len(b["loss"])
    trained = steps_trained(first["fingerprints"])
    short = reproducible and trained is not None and n < trained  # a record closed before training ended
    if short:
        reproducible = False  # never "yes" for part of the training
        line = (f"bitwise reproducible: PARTIAL: the record covers only {n} of the {trained} steps the trainer took "
                f"(those {n} equal in seed {first['seed']} arm {first['arm']}'s rerun)")
    elif reproducible:
        line = (f"bitwise reproducible: yes ({steps_words(n, trained)}, seed {first['seed']}, "
                f"arm {first['arm']} rerun)")
    else:
        where = min(diverged.values()) if diverged else n
        what = ", ".join(f"{k} from step {v}" for k, v in diverged.items()) or "final weights"
        line = f"bitwise reproducible: NO: seed {first['seed']} arm {first['arm']} rerun differs at step {where} ({what})"
    return {
        "reproducible": reproducible,
        "steps": n,
        "steps_trained": trained,  # the trainer's own count (None: unknown)
        "partial": short,
        "seed": first["seed"],
        "arm": first["arm"],
        "first_divergent_step": diverged or None,
        "final_equal": same_final,
        "line": line,
    }


def failed_rerun(first: dict, again: dict) -> dict:
    """The certificate when its rerun failed: not reproducible, at the level the run could be compared."""
    level = "reproducible at the level of the metrics" if (first.get("fingerprints") or {}).get("black_box") \
        else "bitwise reproducible"
    return {"reproducible": False, "steps": 0, "seed": first["seed"], "arm": first["arm"],
            "first_divergent_step": None, "final_equal": False,
            "line": f"{level}: NO: the rerun failed ({again['error']['message']})"}


def _metrics_certificate(first: dict, second: dict) -> dict:
    """A command is a black box: no steps to compare, only what it produced. Its metrics bit for bit
    (and train.compare_files byte for byte: both are in the final digest) -- never "bitwise"."""
    files = len(((first.get("config") or {}).get("train") or {}).get("compare_files") or [])
    a, b = first.get("metrics") or {}, second.get("metrics") or {}
    differ = sorted(k for k in set(a) | set(b) if json.dumps(a.get(k)) != json.dumps(b.get(k)))
    same = not differ and first["fingerprints"]["final"] == second["fingerprints"]["final"]
    what = f"{len(a)} metric(s) bit for bit" + (f", {files} file(s) byte for byte" if files else "")
    if same:
        line = f"reproducible at the level of the metrics: yes ({what}; seed {first['seed']}, arm {first['arm']} rerun)"
    else:
        shown = ", ".join(f"{k} {a.get(k)!r} vs {b.get(k)!r}" for k in differ) or "train.compare_files differ"
        line = (f"reproducible at the level of the metrics: NO: seed {first['seed']} arm {first['arm']} rerun "
                f"differs ({shown})")
    return {"reproducible": same, "level": "metrics", "steps": 0, "steps_trained": None, "seed": first["seed"],
            "arm": first["arm"],
            "first_divergent_step": None, "final_equal": first["fingerprints"]["final"] == second["fingerprints"]["final"],
            "metrics_differ": differ, "line": line}


# -- the experiment -----------------------------------------------------------------------------


@dataclass
class Outcome:
    out_dir: Path
    results: list[dict]
    skipped: list[tuple[int, str]]
    failed: list[dict]
    certificate: Optional[dict] = None
    certified_now: bool = False  # the certificate's rerun ran (not kept from disk): new input for the analysis


def describe(plan: Plan) -> None:
    """What every way of running the units does first, after the entry's preflight: experiment.json,
    rewritten only when it changed (read-only media). Units run next: a refusal deletes nothing now."""
    from harness.experiment.refused_files import units_begin

    units_begin()
    from harness.experiment.code_arms import materialize

    materialize()  # ab.factor=code: the arms' snapshots into the results, read-only
    described = plan.described()
    if _read_or_none(plan.out_dir / "experiment.json") != json.loads(json.dumps(described, default=str)):
        write_json(plan.out_dir / "experiment.json", described)


def run_experiment(
    cfg: DictConfig,
    out_dir: str | os.PathLike,
    log: Callable[[str], None] = print,
    tracker=None,
    certify: bool = True,
    certificate_dir: str | os.PathLike | None = None,
    stop_on_fatal: bool = True,
) -> Outcome:
    """Run every (seed, arm) not already done; write results; check pairing; certify.

    Called with a composed config (tests, a condition's config, direct callers), this is an entry
    point: the config becomes the plan here, once, and run_plan runs it.
    Raises ExperimentError on misconfiguration or a pairing violation (after writing what it has),
    and, with stop_on_fatal, on an op without a deterministic implementation in strict mode (after
    recording the run).
    """
    out_dir = Path(out_dir)
    if is_auto(cfg.determinism.threads):  # called directly, not through execute (which resolved it)
        pin_threads(cfg, out_dir, say=log)
    from harness.experiment.code_arms import prepare, session

    with session():  # what is prepared for code arms ends with the run
        prepare(cfg, out_dir)  # ab.factor=code: each arm's revision read now, before any unit
        plan = Plan.from_config(cfg, out_dir, certify=certify, certificate_dir=certificate_dir)
        check_unless_done(cfg, plan, log)
        return run_plan(plan, log=log, tracker=tracker, stop_on_fatal=stop_on_fatal)


def run_plan(plan: Plan, *, log: Callable[[str], None] = print, tracker=None, stop_on_fatal: bool = True) -> Outcome:
    """run_experiment below its entry: the plan's units one by one in this process (the preflight
    made by the caller)."""
    from harness.experiment.progress import RunProgress

    out_dir = plan.out_dir
    describe(plan)
    results, skipped, failed = [], [], []
    with RunProgress(enabled=plan.progress) as bar:
        for seed in plan.seeds:
            per_seed = []
            for arm in plan.arm_names:
                stop_if_seen()  # a Ctrl-C that the last unit's code caught and went on from
                result, was_skipped = _unit(plan.arms[arm], out_dir, seed, arm, log, bar, tracker,
                                            resume=plan.resume, lock_timeout=plan.lock_timeout)
                if was_skipped:
                    skipped.append((seed, arm))
                results.append(result)
                per_seed.append(result)
                if result["status"] != "completed" and not was_skipped:
                    failed.append(result)
                    if stop_on_fatal and result["error"]["type"] in FATAL:
                        # Every run would fail the same way: stop now, the failed result is on disk.
                        # (A sweep job goes on instead: Hydra skips the sweep's analysis if it raises.)
                        raise ExperimentError(result["error"]["message"])
            check_pairing(per_seed)

    if not plan.narrowed:
        set_aside_other_configurations(out_dir, plan.arms, list(plan.seeds), log)
    cert, kept = None, False
    if plan.certify:
        cert, kept = _certify(plan.arms, results, plan.certificate_dir, log)
    return Outcome(out_dir, results, skipped, failed, cert, certified_now=cert is not None and not kept)


def pin_threads(cfg: DictConfig, out_dir: Path, *, in_sweep: bool = False, say: Callable[[str], None] = print,
                warn: Optional[Callable[[str], None]] = None, measure=None):
    """Resolve determinism.threads (harness/training/threads.py) into ``cfg``, keeping the count this
    folder's experiment was made with; warn before the first run when the pinned threads would wait."""
    from harness.training.threads import measure_load, resolve_threads

    return resolve_threads(cfg, say=say, warn=warn, in_sweep=in_sweep,
                           recorded=recorded_threads(out_dir), measure=measure or measure_load)


def recorded_threads(out_dir: Path) -> Optional[int]:
    """The resolved thread count in this folder's experiment.json, if it has one."""
    try:
        threads = json.loads((Path(out_dir) / "experiment.json").read_text())["config"]["determinism"]["threads"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return threads if isinstance(threads, int) and not isinstance(threads, bool) and threads >= 1 else None


def _unit(arm_cfg, out_dir: Path, seed: int, arm: str, log, bar, tracker, *, resume: bool,
          lock_timeout) -> tuple[dict, bool]:
    """One (seed, arm): skip it if a sound, matching result exists, else run it. (result, skipped?)

    A lock on the run's folder makes a second process on the same folder wait for the first one's
    run, then skip it, instead of training it twice.
    """
    path = run_dir(out_dir, seed, arm) / RESULT_NAME
    decision = None
    with run_lock(path.parent, lambda: log(f"seed={seed} arm={arm}: another process is running it; waiting"),
                  timeout=lock_timeout, log=log):
        if resume:
            config = _plain(arm_cfg)  # once: config_hash is the digest of this very dict
            decision = decide(path, config_digest(config), code_of(arm_cfg), seed, arm, config=config)
            if decision.skip:
                log(f"seed={seed} arm={arm}: skipped, {decision.why}")
                return read_result(path), True
            if os.path.lexists(path):  # a symlink loop too: it is set aside, with the reason
                log(f"seed={seed} arm={arm}: rerun, {decision.why}")
        moved = supersede(path)
        if moved:
            log(f"seed={seed} arm={arm}: previous result kept at {moved}")
        result, weights = run_one(arm_cfg, seed, arm, progress=bar.start(seed, arm), folder=path.parent)
        bar.done()
        if weights is not None:
            save_weights(path.parent / "weights.pt", weights)
        write_result(path, result)
    log(_run_line(result))
    bits = bits_after_rerun(decision, result) if decision is not None else None
    if bits:
        log(f"seed={seed} arm={arm}: {bits}")
    if tracker is not None:
        tracker.log_run(result)
    return result, False


def _certify(arms, results, out_dir, log) -> tuple[Optional[dict], bool]:
    """Rerun the first completed (seed, arm) and compare every step: the bitwise certificate.
    (certificate, kept from disk?)"""
    first = next((r for r in results if r.get("status") == "completed"), None)
    if first is None:
        return None, False
    kept = _certificate_still_valid(out_dir / "certificate.json", first)
    if kept is not None:
        log(f"{kept['line']} (certificate.json kept: made for this very result, config and code)")
        return kept, True
    arm_cfg = arms[first["arm"]]
    if uses_gpu(arm_cfg):  # a process that ran the unit keeps its cuDNN plans: rerun where none are (rerun.py)
        again = rerun_fresh(arm_cfg, first["seed"], first["arm"])
    else:
        again, _ = run_one(arm_cfg, first["seed"], first["arm"])
    cert = certificate(first, again) if again["status"] == "completed" else failed_rerun(first, again)
    cert["config_hash"] = first["config_hash"]
    cert["code_version"] = first.get("code_version")  # with final: which result it certifies
    cert["final"] = first["fingerprints"]["final"]
    write_json(out_dir / "certificate.json", cert)
    log(cert["line"])
    return cert, False


def _certificate_still_valid(path: Path, first: dict) -> Optional[dict]:
    """A certificate that said yes for this very result (seed, arm, final fingerprint), config and code
    needs no rerun: the rerun would train the same run again to say the same thing. A "NO" is always
    made again (a flaky divergence is worth a second look)."""
    old = _read_or_none(path)
    if not isinstance(old, dict) or old.get("reproducible") is not True or "steps_trained" not in old:
        # one written before certificates said how many of the trainer's steps they cover is made again
        return None
    same = (old.get("seed"), old.get("arm"), old.get("config_hash"), old.get("code_version"), old.get("final"))
    this = (first["seed"], first["arm"], first["config_hash"], first.get("code_version"), first["fingerprints"]["final"])
    return old if same == this and old.get("code_version") is not None else None


def _read_or_none(path: Path):
    try:
        return read_json(path)
    except (OSError, ValueError):
        return None


def _run_line(r: dict) -> str:
    head = f"seed={r['seed']} arm={r['arm']}"
    if r["status"] != "completed":
        return f"{head}: FAILED ({r['error']['type']}: {r['error']['message']})"
    m, t = r["metrics"], r["timing"]
    ran = f"{t['steps']} steps" if t.get("steps") else "a command"  # a command records no steps
    primary = ((r.get("config") or {}).get("stats") or {}).get("metric")
    names = ([primary] if primary in m else []) + [k for k in m if k != primary and not k.startswith("n_")]
    shown = "  ".join(f"{k} {m[k]:.4g}" for k in names[:3])
    return f"{head}: {shown}  {ran} in {t['train_seconds']:.1f}s  final {r['fingerprints']['final']}"

