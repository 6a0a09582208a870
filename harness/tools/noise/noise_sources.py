"""``python -m harness.noise_sources``: where the seed noise floor comes from, one source at a time.

One seed moves several independent random streams at once (harness/training/rng.py): the initial
weights, the data order, the model stream (dropout, a loss term's noise) and augmentation. This tool
trains the reference arm and the other arm K times per source with only that stream moved
(``seeds.<source>``: the reference seed + 1 .. K - 1; the reference run is the first of each
source) and every other stream held at the reference seed; then K ordinary seeds (every stream
moved). For the arm and for the paired difference B - A it prints each source's spread with its 95%
interval, its share of the full seed spread, and what they say together (harness.stats.sources):
they add up, or each alone reaches the full spread (unstable training), or one dominates.

A source the training never draws from is found with one run per arm (the same final weights and
metrics, bit for bit) and reported as not used, without K runs. For a metric declared with
per-example records, the test set's own sampling noise comes from the reference runs' records (no
extra training): binomial for the arm, the paired per-example differences for B - A.
The numerical sources hold every stream at the reference seed: ulp (K runs, run i moving the
initial weight harness.tools.noise.noise_runs.ulp_hook(i) picks by one ULP), threads (the reference again
at each other thread count the free cores keep busy, noise_audit's rule; the skipped ones named) and
mode_off (K runs with determinism.mode=off; on a GPU only, else "not measured: no GPU"). Both arms of
a run get the same change, so B - A stays paired.

The runs go side by side in the experiment's worker processes, as an experiment's units do
(``workers=auto``: the free cores // determinism.threads, resolved by the same rule; ``workers=1``: one
after another, here), with the same bits as one after another; a run at another thread count runs at
most free cores // its count at once (harness/tools/noise/noise_sources_runs.py). The wall time and how many
ran side by side are printed and kept in the json ("timing"). It writes
noise_sources.{json,txt,png} and, with the harness's logger (wandb, offline by default; logger=none:
nothing), one wandb run "noise sources" made from the json: its table, readings and figure.

    python -m harness.noise_sources +experiment=loss_ab --repeats 5 determinism.threads=1 logger=none
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import harness  # noqa: F401 - sets CUBLAS_WORKSPACE_CONFIG before torch is imported

from harness.config.schema import BUILTIN_LOOP
from harness.results import example_correctness, write_json
from harness.stats.sources import read_sources, spread
from harness.tools.args import add_config_dir, parse_args
from harness.tools.golden.golden import BadInput, compose_config, stack_summary
from harness.tools.noise.noise_sources_table import TABLE_COLUMNS, figure, render, table_rows
from harness.tools.noise.noise_audit import default_out
from harness.tools.noise.noise_runs import audited_metric, thread_counts
from harness.tools.noise.noise_sources_runs import Runner, jobs_of, plan

EXIT_OK, EXIT_BAD_INPUT = 0, 2
STREAMS = ("init", "data_order", "model", "augment")
PROBED = ("model", "augment")  # streams a training may never draw from: one run tells
NUMERICAL = ("ulp", "threads", "mode_off")  # every stream at the reference seed; the bits move instead


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness.noise_sources",
                                description="The seed noise floor, one source of randomness at a time.")
    p.add_argument("--repeats", "-k", type=int, default=5, metavar="K", help="runs per source (default 5; >= 3)")
    p.add_argument("--sources", default=",".join(STREAMS + NUMERICAL),
                   help=f"comma-separated sources to move one at a time (default {','.join(STREAMS + NUMERICAL)}): "
                        f"streams (a name your training gives run.generator works too), ulp (one initial weight "
                        f"+1 ULP), threads (other thread counts), mode_off (determinism.mode=off, GPU only)")
    p.add_argument("--out", default=None, metavar="DIR", help="where to write noise_sources.{json,txt,png} "
                                                             "(default outputs/noise_sources/<overrides>)")
    p.add_argument("--metric", default=None, help="a declared metric (default: the primary one, stats.metric)")
    p.add_argument("--reread", default=None, metavar="JSON", help="print the table again from a written "
                                                                    "noise_sources.json (readings recomputed, no training)")
    p.add_argument("overrides", nargs="*", metavar="OVERRIDE", help="Hydra overrides, as for python -m harness")
    add_config_dir(p)
    return p


def main(argv=None) -> int:
    args = parse_args(parser(), argv)
    try:
        if args.reread:
            print(reread(Path(args.reread)))
            return EXIT_OK
        if args.repeats < 3:
            raise BadInput(f"--repeats {args.repeats}: a spread with an interval needs at least 3 runs per "
                           f"source; use 5 or more.")
        sources = [s.strip() for s in args.sources.split(",") if s.strip()]
        if not sources or len(set(sources)) < len(sources):
            raise BadInput(f"--sources {args.sources!r}: give distinct stream names, e.g. {','.join(STREAMS)}.")
        cfg = compose_config(args.overrides, args.config_dir)
        declaration, metric = audited_metric(cfg, args.metric)
        from harness.training.threads import measure_load

        load = measure_load()  # once: the workers this tool starts must not count as others' load
        workers = _resolve_threads(cfg, load, runs=2 * (1 + args.repeats * (len(sources) + 1)))
        arms = _two_arms(cfg, declaration)
        own_streams(sources, arms)
        out_dir = Path(args.out) if args.out else default_out(args.overrides, "noise_sources")
        seed = int(cfg.seed if cfg.seed is not None else cfg.ab.seeds[0])
        text = measure(arms, seed, sources, args.repeats, declaration.spec(metric), out_dir,
                       margin=declaration.margin, overrides=args.overrides, workers=workers, free=load.free)
        text += track(cfg, out_dir)
    except BadInput as e:
        print(f"harness.noise_sources: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(text)
    return EXIT_OK


def _two_arms(cfg, declaration) -> dict:
    """{baseline: cfg, other: cfg}: the declared baseline and the first other arm, checked as a run
    of the harness checks them (preflight), threads resolved once for both."""
    from harness.config.preflight import PreflightError, preflight
    from harness.experiment.arms import ExperimentError, arm_configs

    try:
        arms = arm_configs(cfg)
        if len(arms) < 2:
            raise BadInput("the experiment declares fewer than 2 arms; the paired difference B - A needs two "
                           "(+experiment=loss_ab, or ab.arms).")
        base = declaration.baseline or next(iter(arms))
        other = cfg.arm if cfg.arm not in (None, base) else next(a for a in arms if a != base)
        chosen = {base: arms[base], other: arms[other]}
        preflight(cfg, chosen)
    except (ExperimentError, PreflightError) as e:
        raise BadInput(str(e)) from None
    return chosen


def _listed() -> str:
    return f"the streams {', '.join(STREAMS)} and the numerical sources {', '.join(NUMERICAL)}"


def own_streams(sources: list, arms: dict) -> list:
    """The sources that are no stream of ours (a name a training of one's own gives run.generator),
    refused where no training could draw from them: the built-in loop draws from ours only."""
    own = [s for s in sources if s not in STREAMS + NUMERICAL + ("all",)]
    builtin = all(str(c.train.fn) == BUILTIN_LOOP and c.train.get("cmd") is None for c in arms.values())
    if own and builtin:
        raise BadInput(_not_used(own[0], "the built-in training loop draws from no stream of that name"))
    return own


def _not_used(name: str, why: str) -> str:
    import difflib

    near = difflib.get_close_matches(name, STREAMS + NUMERICAL, n=1)
    return (f"--sources: {name!r} is not used by this training ({why}); nothing was measured. Give "
            f"{_listed()}, or a name your training gives run.generator" + (f"; did you mean {near[0]}?" if near else "."))


def _resolve_threads(cfg, load, *, runs: int) -> int:
    """The experiment's rule for ``determinism.threads`` and ``workers`` (choose_threads), with this
    tool's runs as the units: the resolved thread count is written into ``cfg`` (every run pins it);
    returns the workers to run side by side. A bad ``workers`` value is refused in one paragraph."""
    from omegaconf import OmegaConf, open_dict

    from harness.training.threads import AUTO, choose_threads, is_auto, uses_gpu, workers_problem

    asked, requested = cfg.get("workers", AUTO), cfg.determinism.threads
    if workers_problem(asked):
        raise BadInput(workers_problem(asked))
    if isinstance(requested, bool) or not (is_auto(requested) or isinstance(requested, int)):
        return 1  # the preflight names the bad value
    choice = choose_threads(requested, load, units=runs, workers=AUTO if is_auto(asked) else int(asked),
                            gpu=uses_gpu(cfg))
    if choice.warning:
        print(f"warning: {choice.warning}", file=sys.stderr)
    readonly = OmegaConf.is_readonly(cfg)
    OmegaConf.set_readonly(cfg, False)
    with open_dict(cfg):
        cfg.determinism.threads = choice.threads
    OmegaConf.set_readonly(cfg, readonly)
    return choice.workers


def measure(arms: dict, seed: int, sources: list, k: int, spec, out_dir: Path, *, margin=None,
            overrides=(), workers: int = 1, free: int = 1) -> str:
    """Train every run (``workers`` side by side; ``free``: the cores free at the start), write
    noise_sources.{json,txt,png}, return the text."""
    from harness.experiment.plan import modules_of
    from harness.training.gpus import visible
    from harness.training.threads import uses_gpu

    (base, a_cfg), (other, b_cfg) = arms.items()
    metric = spec.name
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731 - progress, not the result
    numerical = _numerical(a_cfg, sources, k, free)
    measured = [s for s in [*sources, "all"] if not (s == "mode_off" and numerical["mode_off"])]  # CPU: said, never faked
    runs = {s: plan(s, seed, k, numerical) for s in measured}
    with Runner(workers, free, int(a_cfg.determinism.threads), log=log, gpus=visible() if uses_gpu(a_cfg) else (), warm=modules_of(arms)) as runner:
        # first the reference and one run of each stream a training may never draw from: that run
        # tells whether the stream is used (the same bits as the reference: not used, no K runs)
        own = [s for s in measured if s not in STREAMS + NUMERICAL + ("all",)]
        probes = [s for s in measured if (s in PROBED or s in own) and runs[s]]
        first = jobs_of(arms, "reference", [({}, seed, None, None)]) + [j for s in probes for j in jobs_of(arms, s, runs[s][:1])]
        totals = {"reference": 1, **{s: len(r) for s, r in runs.items()}}
        results = dict(zip(_runs_of(first), _pairs(runner.run(first, _progress(first, metric, arms, totals, log)))))
        ref = results.pop(("reference", 1))
        unused = [s for s in probes if all(_same(r, q) for r, q in zip(results[(s, 1)], ref))]
        for s in (s for s in own if s in unused):  # a name no code draws from: a typo, never a reading
            raise BadInput(_not_used(s, f"one run per arm with seeds.{s} moved changed no weight or metric"))
        done = {s: int(s in probes) for s in measured}  # runs of each source already trained
        rest = [j for s in measured if s not in unused for j in jobs_of(arms, s, runs[s][done[s]:], 1 + done[s])]
        results.update(zip(_runs_of(rest), _pairs(runner.run(rest, _progress(rest, metric, arms, totals, log)))))
        timing = runner.summary()
    values = {}  # source -> (the arm's values, the differences B - A), the reference first
    for source in measured:
        if source in unused:
            continue
        rows = [ref] if source not in NUMERICAL or source == "threads" else []
        rows += [results[(source, i)] for i in range(1, len(runs[source]) + 1)]
        if source == "ulp":
            numerical["ulp"] = {"changes": [a["ulp_change"] for a, _ in rows],
                                "final_a": [a["fingerprints"]["final"] for a, _ in rows]}
        pairs = [(float(a["metrics"][metric]), float(b["metrics"][metric])) for a, b in rows]
        values[source] = ([va for va, _ in pairs], [vb - va for va, vb in pairs])
    block = {**_numbers(values, unused, ref, spec, margin), "numerical": numerical}
    header = {"seed": seed, "arms": [base, other], "k": k, "metric": metric, "unit": spec.unit,
              "env": stack_summary(ref[0]["env"])}
    text = render(header, block)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "noise_sources.txt").write_text(text + "\n")
    write_json(out_dir / "noise_sources.json", {"schema": "harness.noise_sources/1", "overrides": list(overrides),
                                                **header, **block, "table": text, "timing": timing})
    figure(header, block, out_dir / "noise_sources.png")
    return text + f"\n\n{timing['line']}\nwrote {out_dir / 'noise_sources.json'}, noise_sources.txt and noise_sources.png"


def _pairs(results: list) -> list[tuple]:
    """Results of jobs made by jobs_of (A then B, run by run) as (A, B) pairs."""
    return [tuple(results[i:i + 2]) for i in range(0, len(results), 2)]


def _runs_of(jobs: list) -> list[tuple]:
    """(source, run index) of each pair of jobs, in their order."""
    return list(dict.fromkeys((j.source, j.index) for j in jobs))


def _progress(jobs: list, metric: str, arms: dict, totals: dict, log):
    """on_done for Runner.run: a run without the audited metric is refused (every run would lack it);
    a run's line is logged once both its arms are in, whichever finished first."""
    (base, other), got = list(arms), {}

    def done(i: int, r: dict) -> None:
        if metric not in r["metrics"]:
            raise BadInput(f"the training function returned {', '.join(r['metrics'])}, not {metric}.")
        j = jobs[i]
        pair = got.setdefault((j.source, j.index), {})
        pair[j.arm] = r["metrics"][metric]
        if len(pair) == 2:
            log(f"{j.source} {j.index}/{totals[j.source]}: {base} {pair[base]:.6g}  {other} {pair[other]:.6g}")
    return done


def _numerical(cfg, sources: list, k: int, free: int) -> dict:
    """What the numerical sources will run: the other thread counts the ``free`` cores keep busy (the
    noise audit's rule, harness.tools.noise.noise_runs.thread_counts) and whether CUDA mode off can run."""
    from harness.training.determinism import resolve_device

    out = {"mode_off": None, "threads": None, "ulp": None}
    if "threads" in sources:
        own = int(cfg.determinism.threads)
        counts, skipped = thread_counts(own, k - 1, free)
        out["threads"] = {"reference": own, "counts": counts, "skipped": skipped, "free_cores": free}
    if "mode_off" in sources and resolve_device(getattr(cfg.device, "value", cfg.device)).type != "cuda":
        out["mode_off"] = "not measured: no GPU"
    return out


def _same(r: dict, q: dict) -> bool:
    """Two runs with the same final weights and the same metrics, bit for bit."""
    return r["fingerprints"]["final"] == q["fingerprints"]["final"] and r["metrics"] == q["metrics"]


def _spreads(values: dict, unused: list) -> dict:
    """``values``: source -> (the arm's values, the differences B - A). Their spreads, and the two
    readings (harness.stats.sources)."""
    out, spreads = {"sources": {}, "unused": unused, "too_few": {}}, {}
    for source, (a, d) in values.items():
        if len(a) < 2:  # threads with no other count the machine keeps busy: no spread to give
            out["too_few"][source] = {"values_a": [float(x) for x in a], "differences": [float(x) for x in d]}
            continue
        spreads[source] = (spread(a), spread(d))
        out["sources"][source] = {"values_a": [float(x) for x in a], "differences": [float(x) for x in d],
                                  "a": spreads[source][0].to_dict(), "difference": spreads[source][1].to_dict()}
    singles = {s: v for s, v in spreads.items() if s != "all"}
    for i, side in enumerate(("a", "difference")):
        out[f"reading_{side}"] = read_sources({s: v[i] for s, v in singles.items()}, spreads["all"][i]).to_dict()
    return out


def _numbers(values: dict, unused: list, ref: tuple, spec, margin) -> dict:
    """The spreads per source for the arm and for B - A, their readings, the test set's own noise,
    and the seeds 80% power needs paired and unpaired."""
    from harness import stats

    out = _spreads(values, unused)
    full = out["sources"]["all"]
    out["test_set"] = _test_set(ref, spec)
    sd_a, sd_d = full["a"]["std"], full["difference"]["std"]
    effect = float(margin) if isinstance(margin, (int, float)) and margin > 0 else sd_a
    out["power"] = {"effect": effect, "effect_is": "the declared margin" if effect != sd_a else "one seed std of the arm",
                    "paired": stats.seeds_needed(effect, sd_d) if sd_d > 0 else None,
                    "unpaired": stats.seeds_needed(effect, math.sqrt(2) * sd_a) if sd_a > 0 else None}
    return out


def reread(path: Path) -> str:
    """The table of a written noise_sources.json, its spreads and readings recomputed from the values."""
    from harness.results import read_json

    try:
        d = read_json(path)
        values = {s: (v["values_a"], v["differences"]) for s, v in {**d["sources"], **d.get("too_few", {})}.items()}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BadInput(f"--reread {path}: not a readable noise_sources.json ({e}).") from None
    block = {**_spreads(values, d.get("unused") or []), "test_set": d.get("test_set"), "power": d["power"],
             "numerical": d.get("numerical") or {}}
    return render({k: d[k] for k in ("seed", "arms", "k", "metric", "unit")}, block)


def _test_set(ref: tuple, spec) -> dict | None:
    """The test set's own sampling noise, from the reference runs' per-example records."""
    if not spec.examples:
        return None
    ca, cb = (example_correctness(r, spec.name) for r in ref)
    if ca is None or cb is None or ca.size != cb.size or ca.size == 0:
        return None
    n, scale = int(ca.size), spec.example_scale
    p = float(ca.mean())
    diff = cb.astype(float) - ca.astype(float)
    return {"n_examples": n, "a_std": scale * math.sqrt(p * (1 - p) / n),
            "difference_std": scale * float(diff.std()) / math.sqrt(n)}


def track(cfg, out_dir: Path) -> str:
    """The written noise_sources.json as one wandb run "noise sources" per output folder (the logger
    the rest of the harness uses: offline by default; logger=none logs nothing): the table
    "noise_sources", the two readings in the summary, noise_sources.png as "figure". What it
    returns ends the printed text (where the run is, and what wandb could not log)."""
    from harness.results import read_json
    from harness.tracking.tracker import open_tracker
    from harness.tracking.options import TrackingConfigError

    try:
        tracker = open_tracker(cfg, out_dir)
    except TrackingConfigError as e:
        raise BadInput(str(e)) from None
    d = read_json(out_dir / "noise_sources.json")
    base, other = d["arms"]
    summary = {"reading/a": d["reading_a"]["sentence"], "reading/b_minus_a": d["reading_difference"]["sentence"],
               "reading/a_kind": d["reading_a"]["kind"], "reading/b_minus_a_kind": d["reading_difference"]["kind"],
               "power/paired_seeds": d["power"]["paired"], "power/unpaired_seeds": d["power"]["unpaired"]}
    config = {k: d[k] for k in ("seed", "arms", "k", "metric", "unit", "overrides")}
    config["a"], config["b_minus_a"] = base, f"{other} - {base}"
    tracker.log_table_run("noise sources", "noise_sources", out_dir, config, TABLE_COLUMNS, table_rows(d),
                          "noise_sources.png", summary)
    said = tracker.close()
    logged = getattr(tracker, "logged", [])
    where = f"{tracker.options['dir'] / 'wandb'}" if logged else ""
    head = (f"\nwandb: run \"noise sources\" logged {logged[0][1]} under {where}"
            + (f"; upload with: wandb sync {where}/offline-run-*" if logged[0][1] == "offline" else "")) if logged else ""
    return "".join([head, *(f"\n{w}" for w in said)])


if __name__ == "__main__":
    sys.exit(main())
