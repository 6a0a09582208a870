"""Did the seed reach the training? An arm whose every seed gave bit-identical metrics ran the same
training each time (a script that ignores ``--seed``, a hard-coded ``torch.manual_seed(42)``): its
seeds measured no seed noise, so an interval over them ("95% CI +0.5 to +0.5") is not a confidence
interval and a verdict on it would be false. No verdict then; the analysis says why and what to fix.

The rule, and why it is safe: at least two seeds of the arm completed, every metric each run
reported (not only the primary one) is bit-identical across all of them, and no fingerprint says
otherwise. One arm is enough: its side of every difference is then a constant, whatever the other
arm does. Anything that moves with the seed proves the seed arrived: a metric beside the primary one
(a quantised accuracy may repeat by chance while the loss beside it varies), or an init or final
fingerprint of weights or saved files (a watched run's weights, train.compare_files' bytes) that
differs between seeds. A watched run whose final weights are equal under two seeds is refused
before this, as a relabelled copy, and that message names this cause too (copies.py). Counts the
harness itself records (n_test, n_train) are left out: they are constant by design.
"""

from __future__ import annotations

from harness.results.tree import _seed_key

CONSTANT_BY_DESIGN = ("n_test", "n_train")


def _reported(result: dict) -> dict:
    return {k: v for k, v in (result.get("metrics") or {}).items() if k not in CONSTANT_BY_DESIGN}


def _is_command(result: dict) -> bool:
    return bool(((result.get("config") or {}).get("train") or {}).get("cmd"))


def _fingerprints_differ(runs) -> bool:
    """Whether an init, or a final that covers weights or files, differs between the runs."""
    runs = list(runs)
    inits = {(r.get("fingerprints") or {}).get("init") for r in runs}
    finals = {(r.get("fingerprints") or {}).get("final") for r in runs if final_is_evidence(r)}
    return len(inits - {None}) > 1 or len(finals - {None}) > 1


def final_is_evidence(r) -> bool:
    """Whether equal finals under two seeds prove a copy: weights do; a black box's digest of
    its printed metrics does not (results before final_covers was recorded covered metrics alone
    unless train.compare_files was set, which their config says)."""
    fingerprints = r.get("fingerprints") or {}
    if not fingerprints.get("black_box"):
        return True
    if "final_covers" in fingerprints:
        return fingerprints["final_covers"] != "metrics"
    return bool(((r.get("config") or {}).get("train") or {}).get("compare_files"))


def how_to_fix(result: dict) -> str:
    """Why the seeds of ``result``'s arm ran the same training, and what makes the seed reach it."""
    if _is_command(result):
        return (f"the seed never reached the script. Pass it with train.seed_arg (the flag the script reads, now "
                f"{((result.get('config') or {}).get('train') or {}).get('seed_arg')!r}; the harness appends "
                f"`FLAG SEED` to train.cmd) and make the script seed from it instead of a fixed value (a "
                f"hard-coded torch.manual_seed(42), random.seed(42))")
    return ("the seed did not reach the training. Build the model inside `with run.init():`, draw the batches "
            "through run.loader (or run.generator), and call no torch.manual_seed with a fixed value in the "
            "training function")


def seed_ignored(usable: dict, arms: list, metric: str) -> str | None:
    """Why no verdict can be given, naming each arm whose every completed seed (at least 2) reported
    bit-identical metrics; None when none did. ``usable``: (seed, arm) -> {"value", "result"}
    (selection._usable_runs)."""
    said = []
    for arm in arms:
        runs = {s: u["result"] for (s, a), u in usable.items() if a == arm}
        if len(runs) < 2:
            continue
        metrics = [_reported(r) for r in runs.values()]
        if any(m != metrics[0] for m in metrics[1:]) or _fingerprints_differ(runs.values()):
            continue
        seeds = ", ".join(str(s) for s in sorted(runs, key=_seed_key))
        first = next(iter(runs.values()))
        value = metrics[0].get(metric)
        fix = how_to_fix(first)
        said.append(f"every one of the {len(runs)} seeds of arm {arm} gave bit-identical metrics ({metric} "
                    f"{value!r} at seeds {seeds}): {fix}")
    if not said:
        return None
    return ("No verdict: " + "; ".join(said) + ". Seeds that all ran the same training measure no seed noise, "
            "so an interval over them is not a confidence interval and no claim can rest on it. The results "
            "are kept; rerun the seeds once the seed reaches the training.")


__all__ = ["final_is_evidence", "how_to_fix", "seed_ignored"]
