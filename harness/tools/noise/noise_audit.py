"""How big is nondeterminism noise against seed noise, for MY model?

    python -m harness.noise_audit [--repeats K] [--out DIR] [--metric NAME] [OVERRIDE ...]

The overrides are the same Hydra overrides as for ``python -m harness``; the audit takes the
composed config's first (seed, arm) -- or seed=/arm= -- as the reference run and trains K runs for
each source of noise, with the same data:

  (a) repeat       the reference config again: in deterministic mode every run must be identical
  (b) one ULP      one initial weight moved to the next float32 (torch.nextafter), a different
                   weight in each run: the smallest possible change, the seed of every butterfly
  (c) threads      another CPU thread count in each run (1, 2, 3, ... skipping the configured one
                   and, named, any above the free cores, where pinned threads wait at every barrier):
                   a different summation order in the kernels, as on another machine
  (d) mode off     CUDA only: determinism.mode=off with cudnn_benchmark=false (PyTorch's defaults:
                   atomic adds, nondeterministic cuDNN algorithms); on a CPU the table says
                   "not applicable: no CUDA"
  seeds            K seeds (the reference seed and the next K-1): the noise every A/B test must beat

The metrics, their units and whether one is the mean of per-example outcomes come from the
declaration (stats.metrics, harness/config/declaration.py), never from a name: --metric is any declared
metric, the declared primary one by default; when it is the mean of per-example outcomes, which
moves in steps of one test example, the other declared metrics the runs report get tables too.

For each source: the spread (std, range) of the final metric over its K runs, its ratio to the
seed spread (with a 95% interval from the F distribution, which assumes roughly normal metrics),
how many distinct final weights the K runs reached, and from which step their parameters part from
the reference run's. Writes noise_audit.json, noise_audit.png (per-step divergence curves) and
noise_audit.txt (the table) into --out. Exit status 0, or 2 on bad input.

The question it answers: after a few hundred steps, does a one-ULP change end up as far away as a
new seed ("nondeterminism noise ≈ seed noise")? If so, a run-to-run difference on a GPU without
deterministic mode is just another seed -- and it also means one changed bit cannot be told from
a real effect with a single pair of runs.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import harness  # noqa: F401 - sets CUBLAS_WORKSPACE_CONFIG before torch is imported

import numpy as np

from harness.tools.args import add_config_dir, parse_args
from harness.tools.golden.golden import BadInput, compose_config, select_run, stack_summary
from harness.results import example_record, write_json
from harness.tools.noise.noise_table import format_table, verdict, write_plot
from harness.tools.noise.noise_runs import (
    audited_metric, run_all, steps_to_keep, thread_counts, threads_note, with_changes)

EXIT_OK, EXIT_BAD_INPUT = 0, 2


# -- the numbers --------------------------------------------------------------------------------


def spread(values: list[float]) -> dict:
    from harness.stats import exact_std

    a = np.asarray(values, dtype=float)
    return {
        "n": len(a),
        "mean": float(a.mean()),
        "std": exact_std(a) if len(a) > 1 else None,  # identical runs: exactly 0, not 1e-15
        "range": float(a.max() - a.min()),
        "values": a.tolist(),
    }


def std_ratio(src: dict, seeds: dict, level: float = 0.95) -> dict:
    """std(source) / std(seeds) and its interval from the F distribution of a variance ratio."""
    from scipy import stats as sps

    s, r = src["std"], seeds["std"]
    if s is None or r is None or r == 0:
        return {"ratio": None, "low": None, "high": None}
    ratio = s / r
    if s == 0:
        return {"ratio": 0.0, "low": None, "high": None}  # no spread at all: no interval to speak of
    d1, d2 = src["n"] - 1, seeds["n"] - 1
    tail = (1 - level) / 2
    return {
        "ratio": ratio,
        "low": ratio / math.sqrt(sps.f.ppf(1 - tail, d1, d2)),
        "high": ratio / math.sqrt(sps.f.ppf(tail, d1, d2)),
    }


def summarize(runs: list[dict], ref: dict) -> dict:
    """Per source: spread of every metric, ratio to the seeds' spread, divergence from the reference."""
    by_source: dict[str, list[dict]] = {}
    for run in runs:
        by_source.setdefault(run["source"], []).append(run)
    # The reference run is seed number one of the seed source too.
    seed_runs = [by_source["repeat"][0]] + by_source.get("seeds", [])
    by_source["seeds"] = seed_runs
    # every declared metric all the runs returned
    names = [m for m in runs[0]["metrics"] if all(m in r["metrics"] for r in runs)] if runs else []
    seed_spread = {m: spread([r["metrics"][m] for r in seed_runs]) for m in names}
    out = {}
    for source, rs in by_source.items():
        compared = [r for r in rs if r is not by_source["repeat"][0]]  # the reference vs itself says nothing
        # Step 0 is the initial weights: a seed or a one-ULP nudge already differs there.
        params = [0 if r["init"] != ref["fingerprints"]["init"] else r["first_params_step"] for r in compared]
        entry = {
            "runs": len(rs),
            "distinct_final_weights": len({r["final"] for r in rs}),
            "params_part_at_step": _step_range(params),
            "loss_parts_at_step": _step_range([r["first_loss_step"] for r in compared]),
            "identical_to_reference": sum(r["final"] == ref["fingerprints"]["final"] for r in compared),
            "compared_with_reference": len(compared),
            "max_abs_dw_final_median": float(np.median([r["max_abs_dw_final"] for r in compared])) if compared else None,
            "metrics": {},
            "curves": {
                "mean_abs_dloss": _curve([r["abs_dloss"] for r in compared], np.mean),
                "median_max_abs_dw": _curve([r["max_abs_dw"] for r in compared], np.median),
            },
        }
        for m in names:
            sp = spread([r["metrics"][m] for r in rs])
            entry["metrics"][m] = {**sp, "ratio_to_seeds": std_ratio(sp, seed_spread[m])}
        out[source] = entry
    return out


def _step_range(steps: list) -> dict | None:
    """min, median, max of the steps where runs part from the reference (None: never)."""
    steps = [x for x in steps if x is not None]
    if not steps:
        return None
    return {"min": min(steps), "median": float(np.median(steps)), "max": max(steps)}


def _curve(rows: list[list[float]], reduce) -> list[float]:
    """Per step, ``reduce`` over runs (np.mean, np.median), up to the shortest run."""
    if not rows:
        return []
    n = min(len(r) for r in rows)
    return reduce(np.asarray([r[:n] for r in rows], dtype=float), axis=0).tolist()


BUILTIN_LOOP = "harness.builtin.loop.train"


def _short(target: str) -> str:
    return str(target).rsplit(".", 1)[-1]


def default_out(overrides: list[str], tool: str = "noise_audit") -> Path:
    """outputs/<tool>/<the overrides>: one path component however long the list (compose.short_name)."""
    from harness.config.compose import short_name

    name = ",".join(sorted(overrides)).replace("/", "_") or "default"
    return Path("outputs") / tool / short_name(name)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m harness.noise_audit",
        description="Nondeterminism noise vs seed noise for one model: K runs per source of noise.",
    )
    p.add_argument("--repeats", "-k", type=int, default=5, metavar="K", help="runs per source, and seeds (default: 5; at least 2)")
    p.add_argument("--out", default=None, metavar="DIR", help="where to write noise_audit.{json,png,txt} (default: outputs/noise_audit/<overrides>)")
    p.add_argument("--metric", default=None, help="the metric of the main table: any declared in stats.metrics (default: the declared primary one, stats.metric)")
    p.add_argument("overrides", nargs="*", metavar="OVERRIDE", help="Hydra overrides, as for python -m harness")
    add_config_dir(p)
    return p


def main(argv=None) -> int:
    args = parse_args(parser(), argv)  # --config-dir anywhere (diff.parse_args)
    try:
        if args.repeats < 2:
            raise BadInput(f"--repeats {args.repeats}: a spread needs at least 2 runs per source; use 5 or more.")
        cfg = compose_config(args.overrides, args.config_dir)
        arm_cfg, seed, arm = select_run(cfg, args.overrides)
        declaration, metric = audited_metric(cfg, args.metric)
        out_dir = Path(args.out) if args.out else default_out(args.overrides)
        out = audit(arm_cfg, seed, arm, args.repeats, metric, args.overrides, out_dir, declaration=declaration)
    except BadInput as e:
        print(f"harness.noise_audit: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(out)
    return EXIT_OK


def audit(arm_cfg, seed: int, arm: str, k: int, metric: str, overrides: list[str], out_dir: Path,
          declaration=None) -> str:
    """Run everything, write the files, return the text to print. ``declaration``: what the composed
    config declares (metrics, units, per-example records); by default the arm config's."""
    if declaration is None:
        declaration, metric = audited_metric(arm_cfg, metric)
    from harness.training.determinism import DeterminismError, resolve_device
    from harness.experiment.arms import ExperimentError
    from harness.config.preflight import PreflightError, preflight

    try:
        device = resolve_device(getattr(arm_cfg.device, "value", arm_cfg.device))
        preflight(arm_cfg, {arm: arm_cfg})
        out_dir.mkdir(parents=True, exist_ok=True)
    except (DeterminismError, PreflightError, ExperimentError) as e:
        raise BadInput(str(e)) from None
    except OSError as e:
        raise BadInput(f"cannot create the output folder {out_dir}: {e}.") from None
    # The deterministic sources run in deterministic mode even when the config says off.
    mode = getattr(arm_cfg.determinism.mode, "value", arm_cfg.determinism.mode)
    ref_cfg = arm_cfg if mode != "off" else with_changes(arm_cfg, {"determinism.mode": "strict", "determinism.cudnn_benchmark": False})

    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731 - progress, not the result
    keep = steps_to_keep(ref_cfg, seed)
    from harness.training.threads import measure_load

    free = measure_load().free  # other thread counts only up to the free cores (thread_counts)
    runs, ref = run_all(ref_cfg, seed, k, device.type, keep, log, declaration=declaration, metric=metric, free=free)
    summary = summarize(runs, ref)
    spec = declaration.spec(metric)
    record = example_record(ref, metric) if spec.examples else None
    n_examples = record["n"] if record is not None else None
    # A metric that is the mean of per-example outcomes moves in steps of one example: the other
    # declared metrics the runs report (not such means) show smaller effects, in tables of their own.
    also = [m for m in ref["metrics"] if m != metric and m in declaration.metrics and not declaration.metrics[m].examples
            and m in summary["repeat"]["metrics"]] if spec.examples else []
    steps = len(ref["fingerprints"]["steps"]["loss"])
    threads = int(ref_cfg.determinism.threads)
    counts, skipped = thread_counts(threads, k, free)
    header = {"seed": seed, "arm": arm, "k": k, "threads": threads, "thread_counts": counts,
              "thread_counts_skipped": skipped, "free_cores": free}
    model = _short((ref_cfg.get("model") or {}).get("_target_", ref_cfg.train.fn))
    data = _short((ref_cfg.get("data") or {}).get("_target_", "its data"))
    # a training function of the user's may use neither the configured model nor data: name it
    what = f"{model} on {data}" if str(ref_cfg.train.fn) == BUILTIN_LOOP else f"train.fn {ref_cfg.train.fn}"
    title = (f"noise audit: {what}, seed {seed}, arm {arm}, {steps} steps, {device.type}, "
             f"threads={threads}, mode {getattr(ref_cfg.determinism.mode, 'value', ref_cfg.determinism.mode)}, K={k}")
    tables = [format_table(summary, metric, header, spec, n_examples)]
    tables += [format_table(summary, m, header, declaration.metrics[m]) for m in also]
    legend = (
        "distinct: different final weights among the runs; std/seed: the std over the seeds' std; params part / "
        "loss parts: first step whose parameter digest / loss bits differ from the reference run's (0 = the "
        "initial weights); max|Δw| end: median over runs of max |Δw| of the final weights vs the reference."
    )
    verdicts = verdict(summary, metric, k)
    for m in also:
        verdicts += verdict(summary, m, k)[1:]
    text = "\n\n".join([title] + tables + [legend] + [threads_note(header)] * bool(header["thread_counts_skipped"])
                         + ["\n".join(verdicts)])

    write_plot(summary, out_dir / "noise_audit.png", title, keep, steps)
    (out_dir / "noise_audit.txt").write_text(text + "\n")
    write_json(out_dir / "noise_audit.json", {
        "schema": "harness.noise_audit/1",
        "overrides": overrides,
        "seed": seed,
        "arm": arm,
        "repeats": k,
        "metric": metric,
        "unit": spec.unit,
        "n_examples": n_examples,  # the size of the metric's per-example record, when it has one
        "steps": steps,
        "weights_kept_steps": keep,
        "threads": {k: header[k] for k in ("thread_counts", "thread_counts_skipped", "free_cores")},
        "env": stack_summary(ref["env"]),
        "reference": {"final": ref["fingerprints"]["final"], "metrics": {m: ref["metrics"][m] for m in summary["repeat"]["metrics"]}},
        "summary": summary,
        "runs": [{key: v for key, v in r.items() if key not in ("abs_dloss", "max_abs_dw")} for r in runs],
        "verdict": verdicts,
        "table": text,
    })
    return text + f"\n\nwrote {out_dir / 'noise_audit.json'}, noise_audit.png and noise_audit.txt"


if __name__ == "__main__":
    sys.exit(main())
