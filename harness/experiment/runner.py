"""One (seed, arm): switch modes, build the Run, call the training function, write down what happened.

``train_one`` is the seam: it calls ``train.fn(cfg, run, **train.kwargs)`` -- our built-in loop or a
researcher's -- and turns the Run's records into the result's fingerprints, curve and timing.
``run_one`` wraps it in the result contract (results.py): a failure becomes a "failed" result with
its reason, never a raise, so a sweep's other jobs and the files on disk stay intact.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
import warnings
import traceback
from datetime import datetime, timezone
from typing import Callable, Optional

from omegaconf import DictConfig, OmegaConf, flag_override

from harness import HarnessError
from harness.config.declaration import declared_metrics
from harness.training.components import ComponentError, resolve_callable, targets
from harness.integrations.command_spec import code_files, is_command, training_fn
from harness.experiment.identity import code_identity, plain
from harness.results import config_digest
# torch is imported by the first run, not here: a bad value is refused before that (execute.py).
from harness.results import SCHEMA


class MetricsError(TypeError, HarnessError):
    """The training function returned something other than a dict of named numbers."""


def _value(x):
    return getattr(x, "value", x)


def code_of(cfg) -> dict:
    """The code identity of an arm's config (cached per process)."""
    if cfg.get("code") is not None:  # a code arm (ab.factor=code): its snapshot is the project's code
        from harness.experiment import code_arms

        outside = [t for t in targets(cfg) if not code_arms.inside_repository(cfg, _root_of(t))]
        code = code_arms.identity(cfg, code_identity(outside, [p for p in cfg.repro.code_paths
                                                               if not code_arms.inside_repository(cfg, p)]))
    else:
        # a command arm's script and the .py files beside it are its code, like a train.fn's package
        files = code_files(cfg)  # with repro.code_git, the git tree of their repository too (one folder)
        code = code_identity(targets(cfg), [*cfg.repro.code_paths, *files], bool(cfg.repro.code_git),
                             git_folders=[os.path.dirname(os.path.abspath(p)) for p in files[:1]])
    if not is_command(cfg):
        return code
    from harness.integrations.command_env import command_code

    return command_code(cfg, code)  # with the interpreter that runs the script, and its packages


def _root_of(target: str) -> str:
    from harness.experiment.identity import _package_of

    root = _package_of(target)[1]
    return str(root) if root is not None else "/"


def check_metrics(metrics) -> dict:
    if not isinstance(metrics, dict) or not metrics:
        raise MetricsError(
            f"the training function returned {type(metrics).__name__}: it must return a non-empty dict of "
            "final metrics, name -> number (e.g. {'test_accuracy': 97.1, 'test_loss': 0.09})."
        )
    out = {}
    for name, value in metrics.items():
        if hasattr(value, "item") and callable(value.item):
            value = value.item()  # a 0-d tensor or numpy scalar
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise MetricsError(f"the training function's metric {name!r} is {value!r}: metrics must be numbers.")
        out[str(name)] = value if isinstance(value, int) or math.isfinite(value) else float(value)
    return out


def train_one(cfg: DictConfig, seed: int, *, progress: Optional[Callable] = None, init_hook=None,
              stop_after: Optional[int] = None, folder=None, arm: Optional[str] = None) -> dict:
    """Train one run of an arm's resolved config. Returns metrics, fingerprints, curve, timing, env
    (and ``weights`` when repro.save_weights / keep_step_weights ask for them)."""
    from harness.experiment.code_arms import running

    with running(cfg):  # a code arm (ab.factor=code): its revision's snapshot is the code that runs
        return _train_one(cfg, seed, progress=progress, init_hook=init_hook, stop_after=stop_after,
                          folder=folder, arm=arm)


def _train_one(cfg, seed, *, progress, init_hook, stop_after, folder, arm) -> dict:
    from harness.integrations.command_run import runs_without_torch
    from harness.training.determinism import settings_from

    settings = settings_from(cfg)
    if runs_without_torch(cfg):  # a command on the CPU: the script has its own torch, this process needs none
        return _train_command(cfg, seed, settings, progress=progress, folder=folder, arm=arm)
    from harness.training import math_modes
    from harness.training.determinism import configure, resolve_device

    device = resolve_device(_value(cfg.device))
    found = math_modes.read()  # put back after the unit: the next one in this process starts clean
    try:
        configure(settings, device)  # modes and threads, before anything touches a tensor
        return _train_pinned(cfg, seed, settings, device, math_modes.read(), progress=progress, init_hook=init_hook,
                             stop_after=stop_after, folder=folder, arm=arm)
    finally:
        math_modes.restore(found)


def _train_pinned(cfg, seed, settings, device, pinned, *, progress, init_hook, stop_after, folder, arm) -> dict:
    """train_one once the math modes are pinned (``pinned``: as read then, for the environment)."""
    from harness.training import gpu_memory
    from harness.training.determinism import capture_environment
    from harness.training.run import Run

    run = Run(
        seed, device, _value(cfg.precision), check_every=int(cfg.train.log_every), progress=progress,
        init_hook=init_hook, keep_step_weights=int(cfg.repro.keep_step_weights),
        save_weights=bool(cfg.repro.save_weights), stop_after=stop_after,
        metrics=declared_metrics(cfg) if cfg.get("stats") is not None else None,  # declared: whose examples
        run_dir=folder,
        stream_seeds=cfg.get("seeds"),  # streams set apart from the seed (harness.tools.noise.noise_sources)
    )
    fn = resolve_callable(training_fn(cfg), "train.fn")  # a command arm goes through the same door
    memory = gpu_memory.before(device)  # a CUDA run's memory, which workers=auto on a GPU widens by
    with _warnings_kept(settings.mode == "warn") as kept, _frozen(cfg, arm) as frozen:
        metrics = fn(frozen, run, **OmegaConf.to_container(cfg.train.kwargs, resolve=True))
    out = run.finish(check_metrics(metrics))
    if kept:
        out["determinism_warnings"] = kept  # mode=warn ran ops that may change the bits: which ones
    if memory is not None:
        out["timing"]["gpu_memory"] = gpu_memory.after(device, memory)
    if is_command(cfg):  # the script ran in a process of its own: this process's torch state decided nothing
        out["env"] = _command_env(cfg, settings, out.pop("env", None))
    elif isinstance(out.get("env"), dict) and (out["env"].get("world") or {}).get("world_size"):
        pass  # train.nproc ranks: rank 0's own environment, with the world (integrations/ranks/)
    else:
        out["env"] = capture_environment(settings, device, pinned)
    return out


def _train_command(cfg, seed, settings, *, progress, folder, arm) -> dict:
    """train_one for a command arm on the CPU, without torch (integrations/command_run.py): the same
    door, metrics, records and curve; the environment as far as it is known (_command_env)."""
    from harness.integrations.command_run import CommandRun
    from harness.training.determinism import check_settings

    check_settings(settings)
    run = CommandRun(seed, _value(cfg.precision), progress=progress, run_dir=folder)
    fn = resolve_callable(training_fn(cfg), "train.fn")
    with _frozen(cfg, arm) as frozen:
        metrics = fn(frozen, run, **OmegaConf.to_container(cfg.train.kwargs, resolve=True))
    out = run.finish(check_metrics(metrics))
    out["env"] = _command_env(cfg, settings, out.pop("env", None))
    return out


def _command_env(cfg, settings, reported) -> dict:
    """A command unit's env (integrations/command_env.py): what the harness set for the command (its
    threads, its interpreter), and what the script reported of its own process (harness.attach()),
    else unknown."""
    from harness.integrations.command_env import command_environment
    from harness.integrations.command_spec import CommandSpec

    from harness.integrations.ranks import launched_world

    spec = CommandSpec.from_config(cfg)
    env = command_environment(settings.threads, spec.interpreter(), reported)
    if "world" not in env and launched_world(spec.argv) is not None:  # a torchrun command that reported nothing
        env["world"] = launched_world(spec.argv)
    return env


@contextlib.contextmanager
def _frozen(cfg, arm: Optional[str]):
    """The config the training function gets: read-only while it runs (the recorded config is what
    ran: the loop cannot change it), with the arm, as the recorded config says of its seed (a
    command's {arm}). The unit's own config, its read-only flag put back after: a copy (an OmegaConf
    deepcopy, tens of ms) only where the arm must be written in."""
    if arm is not None and cfg.get("arm") != arm:
        cfg = cfg.copy()
        OmegaConf.set_readonly(cfg, False)
        cfg.arm = arm
    with flag_override(cfg, "readonly", True):
        yield cfg


@contextlib.contextmanager
def _warnings_kept(keep: bool):
    """mode=warn: the nondeterministic-op warnings raised inside, as [{message, count}] (shown too)."""
    kept: list[dict] = []
    if not keep:
        yield kept
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield kept
        finally:
            counts: dict[str, int] = {}
            for w in caught:
                text = str(w.message)
                if "deterministic" in text:
                    first = text.strip().splitlines()[0]
                    counts[first] = counts.get(first, 0) + 1
            kept.extend({"message": m, "count": n} for m, n in counts.items())
    for w in caught:  # the caller's filters decide what is shown, as if nothing had caught them
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def new_result(arm_cfg: DictConfig, seed: int, arm: str) -> dict:
    """The result envelope before the run: everything that identifies it."""
    from harness.experiment.arms import factor_value, pairing_expectation

    factor = arm_cfg.ab.factor
    code = code_of(arm_cfg)
    config = plain(arm_cfg)  # once: config_hash and base_hash are digests of this very dict
    result = {
        "schema": SCHEMA,
        "experiment": arm_cfg.experiment_name,
        "seed": seed,
        "arm": arm,
        "factor": factor,
        "factor_value": factor_value(arm_cfg, factor),
        "status": "failed",
        "error": None,
        "metrics": {},
        "fingerprints": {},
        "pairing": pairing_expectation(factor),
        "curve": {},
        "env": {},
        "timing": {},
        "config": config,
        "config_hash": config_digest(config),
        "base_hash": config_digest(config, exclude_factor=factor),
        "code_version": code["version"],
        "code": code,
        "created": None,
    }
    result["config"]["seed"] = seed
    return result


def run_one(arm_cfg: DictConfig, seed: int, arm: str, progress=None, init_hook=None,
            folder=None) -> tuple[dict, Optional[dict]]:
    """Train one (seed, arm) and build its result. Failures become a 'failed' result, not a raise.

    Returns (result, weights or None). KeyboardInterrupt and SystemExit pass through: nothing is
    written for an interrupted run.
    """
    result = new_result(arm_cfg, seed, arm)
    weights = None
    t0 = time.perf_counter()
    try:
        out = train_one(arm_cfg, seed, progress=progress, init_hook=init_hook, folder=folder, arm=arm)
        weights = out.pop("weights", None)
        result.update(out)
        result["status"] = "completed"
    except Exception as e:  # noqa: BLE001 - recorded in the result file, and reported by the caller
        result["error"] = _error_of(e)
    result["timing"]["total_seconds"] = time.perf_counter() - t0
    result["created"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return result, weights


def _error_of(e: Exception) -> dict:
    """A failed run's error block: what went wrong, with advice for an op without a deterministic
    implementation."""
    from harness.training.determinism import DeterminismError, explain_nondeterministic_op

    # the Run's own errors live beside torch (training/steps.py): a process that never loaded it
    # (a command unit on the CPU) cannot have raised them, and need not import torch to say so
    steps = sys.modules.get("harness.training.steps")
    run_errors = (steps.RunUsageError,) if steps is not None else ()
    if steps is not None and isinstance(e, steps.NonFiniteLoss):
        return {"type": "NonFiniteLoss", "message": str(e), "step": e.step}
    if isinstance(e, (DeterminismError, ComponentError, MetricsError, *run_errors)):
        return {"type": type(e).__name__, "message": str(e), "step": None}
    advice = explain_nondeterministic_op(e) if isinstance(e, RuntimeError) else None
    if advice:
        return {"type": "NondeterministicOp", "message": advice, "detail": str(e).strip().splitlines()[0], "step": None}
    return {"type": type(e).__name__, "message": str(e), "detail": traceback.format_exc(limit=8), "step": None}
