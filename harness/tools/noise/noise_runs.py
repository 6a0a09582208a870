"""The noise audit's runs: the reference config again, one ULP of one initial weight, other thread
counts, determinism off (CUDA), and other seeds, each trained K times on the same data. The numbers
and the table are harness.tools.noise.noise_audit's."""

from __future__ import annotations

import copy
import math
import time
from typing import Callable

import harness  # noqa: F401 - sets CUBLAS_WORKSPACE_CONFIG before torch is imported

import torch
from omegaconf import OmegaConf

from harness.config.declaration import Declaration
from harness.config.metric_spec import DeclarationError
from harness.tools.diff.diff import first_difference, loss_value
from harness.tools.golden.golden import BadInput
from harness.integrations.command_spec import black_box_refusal, is_command


STEP_WEIGHTS_BYTES = 64 * 2**20  # per run, for the per-step max |Δw| curve (all steps of a small model)
SOURCES = {
    "repeat": "(a) repeat, same config",
    "ulp": "(b) one ULP of one init weight",
    "threads": "(c) other thread count",
    "mode_off": "(d) determinism.mode=off",
    "seeds": "seeds",
}


# -- the runs -----------------------------------------------------------------------------------


def with_changes(cfg, changes: dict):
    """A copy of a resolved arm config with dotted keys changed (the schema checks the values)."""
    out = copy.deepcopy(cfg)
    for key, value in changes.items():
        OmegaConf.update(out, key, value)
    return out


def ulp_hook(index: int) -> tuple[Callable[[torch.nn.Module], None], dict]:
    """An init_hook that moves one initial weight up by one ULP; which one is drawn from ``index``.

    Returns the hook and a dict it fills with what it changed (name, position, old, new value).
    """
    changed: dict = {}

    def hook(model: torch.nn.Module) -> None:
        params = [(n, p) for n, p in model.named_parameters() if p.dtype.is_floating_point]
        total = sum(p.numel() for _, p in params)
        pick = int(torch.randint(total, (), generator=torch.Generator().manual_seed(index)))
        for name, p in params:
            if pick < p.numel():
                flat = p.view(-1)
                old = flat[pick].clone()
                flat[pick] = torch.nextafter(old, torch.tensor(math.inf, dtype=old.dtype, device=old.device))
                changed.update(param=name, position=pick, old=float(old), new=float(flat[pick]))
                return
            pick -= p.numel()

    return hook, changed


def train_one(cfg, seed: int, init_hook=None) -> dict:
    """One run of the configured training function, with a failure turned into a message (every
    run of the audit would fail alike)."""
    from harness.training.components import ComponentError
    from harness.training.steps import NonFiniteLoss
    from harness.training.determinism import DeterminismError, explain_nondeterministic_op
    from harness.experiment.runner import train_one as train

    try:
        return train(cfg, seed, init_hook=init_hook)
    except (NonFiniteLoss, DeterminismError, ComponentError) as e:
        raise BadInput(f"a run of the noise audit failed (seed {seed}): {e}") from None
    except RuntimeError as e:
        advice = explain_nondeterministic_op(e)
        if advice is None:
            raise
        raise BadInput(f"a run of the noise audit failed (seed {seed}): {advice}") from None


def thread_counts(configured: int, k: int, free: int) -> tuple[list[int], list[int]]:
    """(counts, skipped): up to K thread counts other than the configured one, 1, 2, 3, ... (bits
    depend on the count, not the cores), and those of the first K that are skipped because they exceed
    the ``free`` cores: pinned threads beyond the free cores wait at every barrier (the thread trap:
    15-135x slower, NOTES.md), and the count's bits are the same when run later on a bigger machine."""
    wanted = [t for t in range(1, k + 2) if t != configured][:k]
    return [t for t in wanted if t <= free], [t for t in wanted if t > free]


def threads_note(header: dict) -> str:
    """The line that names the thread counts the audit skipped, and why ('' when none was)."""
    skipped = header.get("thread_counts_skipped") or []
    if not skipped:
        return ""
    ran = ", ".join(map(str, header["thread_counts"])) or "none"
    return (f"(c) threads: ran {ran}; skipped {', '.join(map(str, skipped))}: more threads than the "
            f"{header['free_cores']} free core(s) at the start, where pinned threads wait at every barrier (the "
            f"thread trap). Rerun on a quiet machine with more cores for those counts.")


def plan(ref_cfg, seed: int, k: int, device_type: str, free: int) -> list[dict]:
    """Every run of the audit: source, label, config, seed, and how its initial weights change.
    ``free``: the cores free at the audit's start (thread_counts)."""
    threads = int(ref_cfg.determinism.threads)
    runs = [{"source": "repeat", "label": f"repeat {i + 1}", "cfg": ref_cfg, "seed": seed, "ulp": None} for i in range(k)]
    runs += [{"source": "ulp", "label": f"one ULP #{i + 1}", "cfg": ref_cfg, "seed": seed, "ulp": i} for i in range(k)]
    runs += [
        {"source": "threads", "label": f"{t} threads", "cfg": with_changes(ref_cfg, {"determinism.threads": t}), "seed": seed, "ulp": None}
        for t in thread_counts(threads, k, free)[0]
    ]
    if device_type == "cuda":
        off = with_changes(ref_cfg, {"determinism.mode": "off", "determinism.cudnn_benchmark": False})
        runs += [{"source": "mode_off", "label": f"mode off #{i + 1}", "cfg": off, "seed": seed, "ulp": None} for i in range(k)]
    # The reference seed's run is the first repeat; the other seeds follow it.
    runs += [{"source": "seeds", "label": f"seed {seed + i}", "cfg": ref_cfg, "seed": seed + i, "ulp": None} for i in range(1, k)]
    return runs


def steps_to_keep(cfg, seed: int) -> int:
    """How many steps of full weights to keep per run for the max |Δw| curve: all, within 64 MiB.

    The model's size comes from one step of the configured training function (ours or yours).
    """
    from harness.training.steps import StopRun
    from harness.experiment.runner import train_one as train

    size = {}

    def count(model):
        size["n"] = sum(p.numel() for p in model.parameters())

    try:
        train(cfg, seed, init_hook=count, stop_after=1)
    except StopRun:
        pass
    return max(1, STEP_WEIGHTS_BYTES // (4 * max(1, size.get("n", 1))))


def run_all(ref_cfg, seed: int, k: int, device_type: str, keep: int, log=print, *, declaration=None,
            metric=None, free: int = 1) -> tuple[list[dict], dict]:
    """Train every planned run; compare each with the reference (the first repeat) as it finishes.

    Only the reference's weights are held; each run is reduced to its distances from it at once.
    Each run keeps the declared metrics it returned (``declaration``: the arm config's, by
    default); ``metric``, the audited one, must be among the reference run's.
    """
    if declaration is None:
        declaration = Declaration.from_config(ref_cfg, strict=False)
    runs = plan(ref_cfg, seed, k, device_type, free)
    ref, ref_final, ref_steps_w = None, None, None
    for i, run in enumerate(runs, 1):
        hook, changed = ulp_hook(run["ulp"]) if run["ulp"] is not None else (None, {})
        t0 = time.perf_counter()
        cfg = with_changes(run["cfg"], {"repro.save_weights": True, "repro.keep_step_weights": keep})
        out = train_one(cfg, run["seed"], init_hook=hook)
        weights = out.pop("weights")
        final, steps_w = weights["final"], weights["steps"]
        if ref is None:
            ref, ref_final, ref_steps_w = out, final, steps_w
            if metric is not None and metric not in out["metrics"]:
                raise BadInput(f"the training function returned {', '.join(out['metrics']) or 'no metrics'}, not "
                               f"{metric}: audit one of the declared metrics it returns with --metric NAME.")
        steps, ref_steps = out["fingerprints"]["steps"], ref["fingerprints"]["steps"]
        n = min(len(steps_w), len(ref_steps_w))
        run.update(
            metrics={m: out["metrics"][m] for m in declaration.metrics if m in out["metrics"]},
            threads=out["env"]["threads"],
            mode=out["env"]["mode"],
            ulp_change=changed or None,
            init=out["fingerprints"]["init"],
            final=out["fingerprints"]["final"],
            first_loss_step=first_difference(ref_steps["loss"], steps["loss"]),
            first_params_step=first_difference(ref_steps["params"], steps["params"]),
            max_abs_dw_final=max(float((final[name].double() - ref_final[name].double()).abs().max()) for name in final),
            max_abs_dw=(steps_w[:n].double() - ref_steps_w[:n].double()).abs().amax(dim=1).tolist(),
            abs_dloss=[abs(loss_value(a) - loss_value(b)) for a, b in zip(ref_steps["loss"], steps["loss"])],
            seconds=time.perf_counter() - t0,
        )
        del run["cfg"]
        what = f" ({changed['param']}[{changed['position']}] +1 ULP)" if changed else ""
        shown = ", ".join(f"{m} {v:.6g}{declaration.metrics[m].suffix}" for m, v in run["metrics"].items())
        log(f"[{i}/{len(runs)}] {SOURCES[run['source']]}: {run['label']}{what}: {shown or 'no declared metric'} "
            f"({run['seconds']:.1f} s)")
    return runs, ref


def audited_metric(cfg, asked=None) -> tuple:
    """(the composed config's declaration, the metric to audit): ``asked`` (--metric) or the
    declared primary metric; one that is not declared is BadInput, in one paragraph. A command arm
    is refused here, where both noise audits start: they move a run's streams and nudge its weights."""
    if is_command(cfg):
        raise BadInput(black_box_refusal("harness.noise_audit and harness.noise_sources",
                                         "need the run's random streams and initial weights"))
    try:
        declaration = Declaration.from_config(cfg, strict=False)
    except DeclarationError as e:
        raise BadInput(str(e)) from None
    metric = asked or declaration.metric
    if metric not in declaration.metrics:
        declared = ", ".join(declaration.metrics) or "none"
        raise BadInput(
            f"{'--metric' if asked else 'stats.metric'} {metric!r} is not a declared metric (stats.metrics declares: "
            f"{declared}), and a metric's direction, unit and per-example record are never guessed from its name. "
            f"Audit a declared one with --metric NAME, or declare it in the experiment's config, e.g. "
            f"stats.metrics.{metric}=min, or {{direction: max, unit: pts, examples: true}} when it is the mean of "
            f"per-example outcomes the training function records with run.record_examples(correct, metric=\"{metric}\").")
    return declaration, metric
