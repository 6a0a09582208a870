"""Sequential mode in one process: run seeds in batches until every comparison is settled.

``python -m harness +experiment=loss_ab ab.sequential.enabled=true stats.margin=0.3``

The loop: validate the design (ab.sequential) and every setting before anything is written; then,
over and over, read the result files, replay the looks (harness.sequential_plan, with the
statistics of harness.stats.sequential), and run the next batch -- the next seeds for the baseline
and every arm still running -- with ``harness.experiment.run_experiment`` narrowed to each seed
(``seed=S``, and ``arm=A`` once an arm has stopped), the units a sweep's jobs run. It stops
when every arm is settled (or past the failure budget), writes ``sequential.json`` (every look of
every arm) and ``sequential.png`` (the running interval against the margin), and analyses the
results with the looks in analysis.json. A killed run continued with the same command skips the
finished runs (run_experiment's resume) and reaches the same looks; a folder that holds a run of
another design is refused. The Hydra sweeper (hydra_plugins/harness_sweeper) does the same with
jobs on any launcher.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Callable, Optional

from omegaconf import DictConfig, open_dict

from . import sequential_plan as sp
from .experiment import ExperimentError, Outcome, arm_configs, run_experiment
from .results import load_tree, read_json, write_json


class SequentialConfigError(ExperimentError):
    """ab.sequential (or the folder's stored design) does not allow a run; the message says why."""


def prepare(cfg: DictConfig, declaration, where: Path, *, stored: Optional[Path] = None):
    """Validate before any run: the design, every other setting (preflight), a stored design; then
    write the declaration into ``where``.

    Returns (design, baseline, arms). Raises SequentialConfigError / ExperimentError.
    """
    from .preflight import PreflightError, preflight

    try:
        preflight(cfg, arm_configs(cfg))
    except PreflightError as e:
        raise ExperimentError(str(e)) from None
    try:
        design = sp.design_of(declaration)
    except ValueError as e:
        raise SequentialConfigError(f"{e} Nothing was run.") from None
    baseline, arms = sp.baseline_and_arms(declaration)
    path = stored or where / sp.SEQUENTIAL_NAME
    if path.is_file():
        problem = sp.stored_design_problem(read_json(path), design, declaration.metric, baseline, where)
        if problem:
            raise SequentialConfigError(problem)
    where.mkdir(parents=True, exist_ok=True)
    declaration.write(where)
    return design, baseline, arms


def refresh(cfg: DictConfig, root: Path, say: Callable[[str], None] = print) -> int:
    """Move aside results of another config or code than this one's (resume's rule), failed ones too.

    The plan reads every result file under root, so this is where a changed config or code makes
    a seed run again; a failed run of the same config and code stays (it counts as a failure).
    """
    from .experiment import supersede
    from .results import find_result_files

    ident = expected_identity(arm_configs(cfg))
    moved = 0
    for path in find_result_files(root) if root.exists() else []:
        try:
            r = read_json(path)
        except (OSError, ValueError):
            continue  # the analysis names unreadable files
        want = ident.get(str(r.get("arm")))
        if want and (r.get("config_hash"), r.get("code_version")) != want:
            dest = supersede(path)
            moved += 1
            say(f"seed={r.get('seed')} arm={r.get('arm')}: result of another config or code moved to {dest}; "
                "it runs again when its seed is reached")
    return moved


def expected_identity(arms: dict) -> dict:
    """arm -> (config_hash, code_version): what a result of each arm's config records (resume's rule)."""
    from .identity import config_hash
    from .runner import code_of

    return {a: (config_hash(c), code_of(c)["version"]) for a, c in arms.items()}


# -- one identity per run: checked between batches -------------------------------------------------


def _key(r) -> tuple:
    return (r.get("config_hash"), r.get("code_version"))


def code_now(arms: dict) -> dict:
    """arm -> the code identity of the files as they are on disk now.

    runner.code_of computes it once per process (identity's cache): a run in this process, or in a
    reused pool worker, records the identity its process computed first, so an edit made since
    (of a repro.code_paths file the training function reads, say) never shows in its result.
    Between batches we look again, and leave the cache as the runs use it.
    """
    from . import identity
    from .runner import code_of

    saved = dict(identity._CACHE)
    identity._CACHE.clear()
    try:
        return {a: code_of(c) for a, c in arms.items()}
    finally:
        identity._CACHE.clear()
        identity._CACHE.update(saved)


class IdentityWatch:
    """Holds a sequential run to one identity (config_hash and code_version) from batch to batch.

    refresh() sets aside, at the start, results of another config or code than this one's. After
    that, a change stops the run instead: a decision on results of two identities would mix the
    factor with the change. ``problem(loaded)``, called before every look, checks

    - the result files: each arm's results have one identity, the one they had at the first look
      (the first batch's), and the arms share one code_version when their code was the same at the
      start. A launcher that starts a process per job (submitit, SLURM) reads the code anew for
      every job, so an edit shows here, even part-way through a batch;
    - the code on disk now against the code at the start (code_now): runs in this process, or in a
      reused worker, record the identity their process computed once, so their results would not
      show an edit of a file they read (repro.code_paths) or of a module a later job imports.
    """

    def __init__(self, cfg: DictConfig):
        self.arms = arm_configs(cfg)
        self.start = code_now(self.arms)
        self.shared_code = len({c["version"] for c in self.start.values()}) == 1
        self.expected = expected_identity(self.arms)  # what this process's runs record (refresh's rule)
        self.reference: dict = {}  # arm -> the identity of its results at the first look that had any
        self.looked: set = set()  # the result files at the last look

    def _held_to(self, arm: str, groups: dict) -> tuple:
        if arm in self.reference:
            return self.reference[arm]
        if self.expected[arm] in groups:
            return self.expected[arm]
        return min(groups, key=lambda k: min(_seed_key(r.get("seed")) for r in groups[k]))  # the first seeds'

    def consistent(self, loaded: list) -> list:
        """The results of the run's identity: each arm's at the earlier looks or, before any, the one
        this process records (refresh's). A look on them mixes nothing."""
        run = {a: self.reference.get(a, self.expected[a]) for a in self.arms}
        return [r for r in loaded if run.get(str(r.get("arm"))) == _key(r)]

    def _by_arm(self, loaded: list) -> dict:
        by_arm: dict = {}
        for r in loaded:
            arm = str(r.get("arm"))
            if arm in self.arms:
                by_arm.setdefault(arm, {}).setdefault(_key(r), []).append(r)
        return by_arm

    def problem(self, loaded: list, root: Path) -> Optional[str]:
        """None when the results and the code on disk still have the run's identity; else one paragraph:
        what changed, the result files of each identity, what to do."""
        by_arm = self._by_arm(loaded)
        held = {a: self._held_to(a, g) for a, g in by_arm.items()}
        mixed = any(len(g) > 1 or held[a] not in g for a, g in by_arm.items())
        if self.shared_code and len({k[1] for g in by_arm.values() for k in g}) > 1:
            mixed = True
        try:
            now = code_now(self.arms)
            edited = [_code_change(self.start[a], now[a]) for a in self.arms
                      if now[a]["version"] != self.start[a]["version"]]
        except FileNotFoundError as e:  # a repro.code_paths entry is gone
            edited = [f"the code changed: {e}"]
        if not mixed and not edited:
            self.reference.update(held)
            self.looked = {r.get("_path") for r in loaded}
            return None
        return self._describe(by_arm, held, edited, root, [r for r in loaded if r.get("_path") not in self.looked])

    def _describe(self, by_arm: dict, held: dict, edited: list, root: Path, since: list) -> str:
        from .comparability import config_differences

        what: dict = {}  # what changed -> where it shows (the files on disk, the results)
        for e in edited:
            what.setdefault(e, []).append("on disk since the run started")
        for arm, groups in by_arm.items():
            ref = groups.get(held[arm])
            for key, rs in groups.items():
                if key == held[arm]:
                    continue
                if ref is None:
                    what.setdefault(f"arm {arm}'s results have another identity than at the earlier looks "
                                    f"(config_hash {held[arm][0]}, code_version {held[arm][1]})", [])
                    continue
                old = ref[0]
                if key[0] != held[arm][0]:
                    diff = config_differences([[old], [rs[0]]])
                    what.setdefault("the config changed: " + ("; ".join(
                        f"{k}: {' -> '.join(_short(v) for v in vals)}" for k, vals in list(diff.items())[:8])
                        if diff else f"config_hash {held[arm][0]} -> {key[0]}"), []).append("in the results")
                if key[1] != held[arm][1]:
                    what.setdefault(_code_change(old.get("code"), _recorded_code(rs[0])), []).append("in the results")
        if not what:  # each arm has one identity, but the arms' code differs where it was the same at the start
            firsts = {a: g[held[a]][0] for a, g in by_arm.items()}
            (a0, r0), rest = next(iter(firsts.items())), list(firsts.items())[1:]
            what["the arms' results record different code, where the arms' code was the same at the start: "
                 + "; ".join(f"arm {a} against arm {a0}, {_code_change(r0.get('code'), _recorded_code(r))}"
                             for a, r in rest if _key(r)[1] != _key(r0)[1])] = []
        said = "; ".join(f"{w} ({', '.join(dict.fromkeys(where))})" if where else w for w, where in what.items())
        lines = []
        for arm, groups in by_arm.items():
            for key, rs in sorted(groups.items(), key=lambda kv: kv[0] != held[arm]):
                if arm in self.reference:
                    label = "as at the earlier looks" if key == self.reference[arm] else "another identity"
                else:
                    label = "as at the start" if key == self.expected[arm] else "another identity"
                lines.append(f"arm {arm} seeds {_span([r.get('seed') for r in rs])} ({label}: config_hash {key[0]}, "
                             f"code_version {key[1]}: {_paths(rs, root)})")
        suspect = ""
        recent = [r for r in since if held.get(str(r.get("arm"))) == _key(r)]
        if edited and recent:
            by: dict = {}
            for r in recent:
                by.setdefault(str(r.get("arm")), []).append(r.get("seed"))
            runs = ", ".join(f"arm {a} seeds {_span(v)}" for a, v in by.items())
            suspect = (f" The runs since the last look that record the earlier identity ({runs}) may have been "
                       f"made with the changed files: a process computes its code identity once.")
        return (f"the config or code changed while this sequential run was going on: {said}. "
                f"The run stopped without a decision: a look at results of two identities would mix the "
                f"factor with the change. Result files under {root}, by identity: {'; '.join(lines)}.{suspect} "
                f"To go on with the config and code as they are now, run the same command again: results of "
                f"another identity are moved to superseded/ and their seeds run again. To keep the earlier "
                f"results instead, restore what changed{', move aside those runs' if suspect else ''} and run "
                f"the same command again.")


def _seed_key(seed):
    return (0, seed) if isinstance(seed, int) else (1, str(seed))


def _recorded_code(r) -> dict:
    """A result's code identity block (a bare one from its code_version when it has none)."""
    return r.get("code") or {"version": r.get("code_version"), "harness": None, "files": {}, "packages": {}, "git": {}}


def _code_change(old, new: dict) -> str:
    from .identity import describe_code_change

    return describe_code_change(old, new)


def _short(value) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _span(seeds) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    ints = sorted({s for s in seeds if isinstance(s, int)})
    parts, i = [], 0
    while i < len(ints):
        j = i
        while j + 1 < len(ints) and ints[j + 1] == ints[j] + 1:
            j += 1
        parts.append(str(ints[i]) if i == j else f"{ints[i]}-{ints[j]}")
        i = j + 1
    others = [str(s) for s in seeds if not isinstance(s, int)]
    return ", ".join(parts + others)


def _paths(rs, root: Path, limit: int = 3) -> str:
    def short(path) -> str:
        try:
            return Path(path).relative_to(root).as_posix()
        except ValueError:
            return str(path)

    paths = sorted(short(r["_path"]) for r in rs if r.get("_path"))
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "") if paths else "no file"


def identity_stop(watch: IdentityWatch, message: str, previous, design, loaded, *, seeds, baseline, arms, metric,
                  budget):
    """The plan recorded when the identity changed: the looks as they stood at the last look before
    (``previous``), or, without one, the looks of the results of the run's identity; stopped with
    ``message``, nothing to run next. No look is taken on the results of the batch that changed."""
    p = previous if previous is not None else sp.plan(design, watch.consistent(loaded), seeds=seeds,
                                                       baseline=baseline, arms=arms, metric=metric,
                                                       max_failures=budget)
    p.stopped = message
    p.batch_seeds, p.batch_arms = [], []
    return p


def narrowed(cfg: DictConfig, seed: int, arm: Optional[str] = None) -> DictConfig:
    """A copy of cfg narrowed to one seed (and one arm), as a sweep job is: what run_experiment runs.

    ab.seeds stays as given (it is the order of seeds, and a seed past it is still a valid unit),
    so results record the same config in process and through the sweeper.
    """
    sub = copy.deepcopy(cfg)
    with open_dict(sub):
        sub.seed = int(seed)
        sub.arm = arm
    return sub


def run_sequential(cfg: DictConfig, out_dir: Path, declaration, *, say: Callable[[str], None] = print, tracker=None,
                   certify: bool = True, show_table: bool = True):
    """The in-process loop; returns app.Executed (outcome over every batch, the final analysis)."""
    from .app import Executed

    out_dir = Path(out_dir)
    design, baseline, arms = prepare(cfg, declaration, out_dir)
    metric = declaration.metric
    budget = int(cfg.ab.sequential.max_failures)
    say(f"sequential: looks at {_looks(design)} seeds, alpha {design.alpha:g}, margin "
        f"{design.margin if design.margin is not None else 'none (better/worse than 0)'}, {design.spending} spending")

    refresh(cfg, out_dir, say)
    watch = IdentityWatch(cfg)  # from here on, a changed config or code stops the run
    results, skipped, failed, cert = [], [], [], None
    last = p = None
    while True:
        loaded = load_tree(out_dir).results if (out_dir / "runs").exists() else []
        if last is not None and len(loaded) <= last:  # a batch that left no result would repeat forever
            raise ExperimentError(f"a batch of seeds left no new result file under {out_dir / 'runs'}; "
                                  "the result files of the last batch cannot be read (see the log).")
        last = len(loaded)
        changed = watch.problem(loaded, out_dir)
        if changed:
            p = identity_stop(watch, changed, p, design, loaded, seeds=list(cfg.ab.seeds), baseline=baseline,
                              arms=arms, metric=metric, budget=budget)
            _write(out_dir, design, p, cfg, declaration, loaded, "stopped")
            return Executed(Outcome(out_dir, results, skipped, failed, cert), None,
                            f"sequential run stopped: {changed}")
        p = sp.plan(design, loaded, seeds=list(cfg.ab.seeds), baseline=baseline, arms=arms, metric=metric,
                    max_failures=budget)
        _write(out_dir, design, p, cfg, declaration, loaded, "running")
        _say_looks(p, say)
        if p.stopped or p.done:
            break
        say(f"sequential: next batch, seeds {_names(p.batch_seeds)} for arms {', '.join(p.batch_arms)}")
        every_arm = len(p.batch_arms) == len(arms) + 1
        # seed by seed, every arm of a seed before the next seed (as a sweep's jobs would be)
        units = [(seed, arm) for seed in p.batch_seeds for arm in ([None] if every_arm else p.batch_arms)]
        for seed, arm in units:
            outcome = run_experiment(narrowed(cfg, seed, arm), out_dir, log=say, tracker=tracker,
                                     certify=certify, certificate_dir=out_dir)
            certify = False  # one certificate per invocation, from the first batch that runs
            cert = outcome.certificate or cert
            results += outcome.results
            skipped += outcome.skipped
            failed += outcome.failed

    loaded = load_tree(out_dir).results
    status = "stopped" if p.stopped else "settled"
    block = _write(out_dir, design, p, cfg, declaration, loaded, status)
    write_figure(block, out_dir / sp.FIGURE_NAME)
    outcome = Outcome(out_dir, results, skipped, failed, cert)
    for arm, a in block["arms"].items():
        say(f"sequential decision, {arm} vs {baseline}: {a['sentence']}")

    from .analysis import AnalysisError, analyze_dir
    from .report import render_table

    try:
        analysis = analyze_dir(out_dir, declaration=declaration, extra={"sequential": block})
    except AnalysisError as e:
        return Executed(outcome, None, f"no analysis: {e} The result files are in {out_dir / 'runs'}.")
    if show_table:
        render_table(analysis)
    if tracker is not None:
        tracker.log_analysis(analysis, out_dir)
    say(f"results: {out_dir}  (analysis.json, report.md, analysis.png, sequential.json, sequential.png)")
    if p.stopped:
        return Executed(outcome, analysis, f"sequential run stopped unsettled: {p.stopped}")
    return Executed(outcome, analysis)


def _write(out_dir: Path, design, p, cfg, declaration, loaded, status) -> dict:
    block = sp.record(design, p, metric=declaration.metric, baseline=declaration.baseline, status=status,
                      runs=len(loaded), unit=declaration.unit)
    write_json(out_dir / sp.SEQUENTIAL_NAME, block)
    if loaded:  # run_experiment wrote the last batch's seeds; say which seeds the folder holds
        from .identity import plain

        seeds = sorted({r["seed"] for r in loaded if isinstance(r.get("seed"), int)})
        write_json(out_dir / "experiment.json", {
            "experiment": cfg.experiment_name, "factor": cfg.ab.factor,
            "arms": {str(k): _arm_value(v) for k, v in cfg.ab.arms.items()},
            "seeds": seeds, "sequential": True, "config": plain(cfg),
        })
    return block


def _arm_value(v):
    from omegaconf import OmegaConf

    return OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else getattr(v, "value", v)


def _looks(design) -> str:
    looks = design.looks
    return ", ".join(map(str, looks)) if len(looks) <= 6 else f"{looks[0]}, {looks[1]}, ... {looks[-1]}"


def _names(items) -> str:
    return ", ".join(map(str, items))


def _say_looks(p, say) -> None:
    for arm, h in p.history.items():
        if h:
            x = h[-1]
            say(f"sequential look {x.look}, {arm}: n {x.n}, estimate {x.estimate:+.4g}, interval "
                f"[{x.interval[0]:+.4g}, {x.interval[1]:+.4g}], decision {x.decision}")


# -- the figure ---------------------------------------------------------------------------------


def write_figure(block: dict, path) -> None:
    """PNG: per arm, the repeated confidence interval at each look against 0 and ±margin."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from .results import atomic_write

    arms = block["arms"]
    unit = f" ({block['unit']})" if block.get("unit") else ""
    margin = block["design"].get("margin")
    fig = Figure(figsize=(4.5 * max(1, len(arms)), 3.8), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, max(1, len(arms)), squeeze=False)[0]
    for ax, (arm, a) in zip(axes, arms.items()):
        looks = a["looks"]
        if margin:
            ax.axhspan(-margin, margin, color="0.9", label=f"±margin {margin:g}{block.get('unit') and ' ' + block['unit'] or ''}")
            for m in (-margin, margin):
                ax.axhline(m, color="0.5", linewidth=0.8, linestyle="--")
        ax.axhline(0, color="0.3", linewidth=0.8)
        if looks:
            n = [x["n"] for x in looks]
            est = [x["estimate"] for x in looks]
            lo = [x["interval"][0] for x in looks]
            hi = [x["interval"][1] for x in looks]
            ax.fill_between(n, lo, hi, color="tab:blue", alpha=0.15, step=None)
            ax.errorbar(n, est, yerr=[[e - l for e, l in zip(est, lo)], [h - e for e, h in zip(est, hi)]],
                        fmt="o", color="tab:blue", capsize=3, label=f"estimate, {looks[-1]['level']:.0%} repeated CI")
            ax.set_xticks(n)
        ax.set_xlabel("seeds (pairs) at the look")
        ax.set_ylabel(f"{arm} - {block['baseline']}{unit}")
        ax.set_title(f"{arm} vs {block['baseline']}: {a['decision']}")
        if margin or looks:
            ax.legend(loc="best", fontsize=8)
    atomic_write(path, lambda out: fig.savefig(out, format="png"))
