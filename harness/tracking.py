"""Experiment tracking: every run and every verdict in wandb, offline by default.

This is the one module that imports wandb, and only inside functions: with ``logger=none`` the
tracker is a NullTracker and wandb is never imported. Files on disk are the source of truth; wandb
is a view of them. Nothing here may stop an experiment or lose a result: every public method
catches wandb's failures and turns them into warnings that ``close()`` returns.

What is logged (one wandb run per (seed, arm), one per analysis, all in the same ``group``):

    run "seed=S arm=A"   job_type = the arm; config = the resolved config + seed, arm, factor_value
                         and the captured environment (env); history: train/loss at every optimizer
                         step (_step = the step, decoded exactly from the float32 bits in the result
                         file), and metrics/<name> at the last step; summary: status, metrics,
                         fingerprints, timing (and error for a failed run, finished with exit code 1)
    run "analysis"       job_type = analysis; config = the analysis's settings and per-arm stats; a
                         wandb.Table "comparisons" (one row per comparison) and analysis.png as the
                         image "figure"; the verdict(s) and key numbers in the summary; an artifact
                         "analysis-<experiment>" (type "analysis") holding analysis.json, report.md,
                         analysis.png, certificate.json, experiment.json and every result file

Runs are logged after they finish (experiment.py calls ``log_run`` after writing the result), so
wandb never runs while a model trains.

Which settings win: a value set in the config (``logger.wandb.*``, e.g. on the command line) >
a ``WANDB_*`` environment variable > our default. ``logger.wandb.mode`` and ``.project`` are null
by default, so WANDB_MODE and WANDB_PROJECT decide when set, else offline and "harness". The
quiet, light-weight settings below (no console capture, no system metrics, no pip freeze per run)
are our defaults too: each yields to its WANDB_* variable. The wandb folder is ``<out_dir>/wandb``
(unless WANDB_DIR is set), and WANDB_CACHE_DIR / WANDB_DATA_DIR point inside it while the tracker
is open (unless set), so nothing lands under $HOME.

Failures: if a run cannot be started online (no network, bad credentials, a timeout after
``logger.wandb.init_timeout`` seconds), the tracker warns once and logs this and every later run
offline, ready for ``wandb sync``; it never waits for the timeout twice. If even offline fails, it
stops trying, and ``close()`` names every run not logged.
"""

from __future__ import annotations

import logging
import os
import re
import struct
from pathlib import Path

log = logging.getLogger("harness.tracking")

MODES = ("offline", "online", "disabled")
_ARTIFACT_FILES = ("analysis.json", "report.md", "analysis.png", "certificate.json", "experiment.json",
                   "sequential.json", "sequential.png")
# wandb's old names for its modes (still accepted in WANDB_MODE)
_MODE_ALIASES = {"dryrun": "offline", "run": "online"}

# Our defaults for wandb.Settings. The runs are logged after training, so wandb's system-metrics
# sampler would measure nothing useful, its console capture would fight the progress bar, its
# banner would print three lines per run, and its pip freeze costs ~0.15 s per run (the
# environment is in the config already). Each yields to its WANDB_* variable when that is set.
_QUIET_SETTINGS = {
    "console": "off",
    "silent": True,
    "x_disable_stats": True,
    "x_save_requirements": False,
    "save_code": False,
}


# -- configuration ------------------------------------------------------------------------------


def _select(cfg, dotted: str, default=None):
    node = cfg
    for part in dotted.split("."):
        try:
            node = node[part] if part in node else None
        except TypeError:
            node = None
        if node is None:
            return default
    return node


def _plain_value(v):
    """An enum from the config schema as its value; anything else unchanged."""
    return getattr(v, "value", v)


def _env_var(setting: str) -> str:
    """The environment variable wandb reads for a Settings field: x_foo -> WANDB__FOO."""
    if setting.startswith("x_"):
        return "WANDB__" + setting[2:].upper()
    return "WANDB_" + setting.upper()


def resolve_options(cfg, out_dir: Path, environ=os.environ) -> dict:
    """Where and how to log: config value > WANDB_* variable > our default (see the module doc)."""
    mode = _plain_value(_select(cfg, "logger.wandb.mode"))
    if mode is None:
        mode = environ.get("WANDB_MODE")
    if mode is None and environ.get("WANDB_DISABLED", "").lower() in ("1", "true", "yes"):
        mode = "disabled"
    mode = str(mode or "offline").lower()
    mode = _MODE_ALIASES.get(mode, mode)
    project = _select(cfg, "logger.wandb.project") or environ.get("WANDB_PROJECT") or "harness"
    tags = _select(cfg, "logger.wandb.tags")
    root = Path(environ.get("WANDB_DIR") or out_dir).absolute()
    return {
        "mode": mode,
        "project": str(project),
        "entity": _select(cfg, "logger.wandb.entity"),  # None: WANDB_ENTITY, or the account's default
        "tags": [str(t) for t in tags] if tags else None,  # None: WANDB_TAGS, if set
        "dir": root,
        "init_timeout": float(_select(cfg, "logger.wandb.init_timeout", 60.0)),
        "history_every": max(1, int(_select(cfg, "logger.wandb.history_every", 1))),
        "settings": {k: v for k, v in _QUIET_SETTINGS.items() if _env_var(k) not in environ},
    }


def open_tracker(cfg, out_dir, group: str):
    """The tracker for one experiment process; never raises (a broken wandb gives a warning)."""
    try:
        name = str(_select(cfg, "logger.name", "wandb"))
        if name == "none":
            return NullTracker()
        if name != "wandb":
            return NullTracker([f"logger.name={name!r} is neither wandb nor none: nothing was tracked."])
        return WandbTracker(resolve_options(cfg, Path(out_dir)), Path(out_dir), group)
    except Exception as e:  # noqa: BLE001 - tracking must never stop the experiment
        return NullTracker([f"wandb: nothing was logged ({_describe(e)}); the results are complete in {out_dir}."])


# -- trackers -----------------------------------------------------------------------------------


class NullTracker:
    """logger=none: nothing is tracked; ``warnings`` carries why, when it replaces a broken wandb."""

    def __init__(self, warnings: list[str] | None = None):
        self._warnings = list(warnings or [])

    def log_run(self, result: dict) -> None:
        pass

    def log_analysis(self, analysis: dict, out_dir) -> None:
        pass

    def close(self) -> list[str]:
        warnings, self._warnings = self._warnings, []
        return warnings


class WandbTracker:
    def __init__(self, options: dict, out_dir: Path, group: str):
        self.options = options
        self.mode = options["mode"]
        self.out_dir = out_dir
        self.group = group
        self.logged: list[tuple[str, str]] = []  # (run name, mode) of each run logged in full
        self.not_logged: list[str] = []  # run names wandb never saw
        self.problems: list[str] = []  # one warning per run logged only in part
        self.online_failure: str | None = None  # why online failed (the rest went offline)
        self.broken: str | None = None  # why wandb gave up entirely
        self._wandb = None
        self._env_set: dict[str, str] = {}
        self._closed = False
        if self.mode not in MODES:
            self.broken = f"logger.wandb.mode={self.mode!r} is not one of {', '.join(MODES)}"
            return
        # wandb's service writes its cache and artifact staging under $HOME unless told otherwise.
        # Inside <dir>/wandb they travel with the results, and results.py never looks there.
        for var, sub in (("WANDB_CACHE_DIR", "cache"), ("WANDB_DATA_DIR", "data")):
            if var not in os.environ:
                os.environ[var] = self._env_set[var] = str(options["dir"] / "wandb" / sub)
        try:
            import wandb

            self._wandb = wandb
        except Exception as e:  # noqa: BLE001
            self.broken = f"wandb cannot be imported ({_describe(e)})"

    # -- the interface ----------------------------------------------------------------------

    def log_run(self, result: dict) -> None:
        name = _run_name(result)
        try:
            self._log_run(result, name)
        except Exception as e:  # noqa: BLE001 - a wandb failure never stops the experiment
            self._problem(name, e)

    def log_analysis(self, analysis: dict, out_dir) -> None:
        try:
            self._log_analysis(analysis, Path(out_dir))
        except Exception as e:  # noqa: BLE001
            self._problem("analysis", e)

    def close(self) -> list[str]:
        """Finish every run, stop wandb's service, and say what was not logged."""
        if self._closed:
            return []
        self._closed = True
        try:
            self._teardown()
        except Exception as e:  # noqa: BLE001
            self.problems.append(f"wandb: closing failed ({_describe(e)}); some data may not have been written.")
        for var, value in self._env_set.items():
            if os.environ.get(var) == value:
                del os.environ[var]
        return self._warnings()

    # -- runs -------------------------------------------------------------------------------

    def _log_run(self, result: dict, name: str) -> None:
        config = dict(result.get("config") or {})
        config.update(seed=result.get("seed"), arm=result.get("arm"), factor_value=result.get("factor_value"),
                      env=result.get("env") or {})
        run = self._start(name, job_type=str(result.get("arm")), config=config)
        if run is None:
            return
        failed = result.get("status") != "completed"
        complete = False
        try:
            fingerprints = result.get("fingerprints") or {}
            losses = decode_loss_bits((fingerprints.get("steps") or {}).get("loss") or [])
            metrics = {f"metrics/{k}": v for k, v in (result.get("metrics") or {}).items() if _is_number(v)}
            last = len(losses)
            every = self.options["history_every"]
            for step, loss in enumerate(losses[:-1], start=1):
                if step % every == 0:
                    run.log({"train/loss": loss}, step=step)
            # the evaluation belongs to the last optimizer step: one row with the last loss
            final = dict(metrics)
            if losses:
                final["train/loss"] = losses[-1]
            if final:
                run.log(final, step=last)
            summary = {"status": result.get("status"), **metrics}
            summary.update({f"fingerprints/{k}": v for k, v in fingerprints.items() if isinstance(v, str)})
            summary.update({f"timing/{k}": v for k, v in (result.get("timing") or {}).items() if _is_number(v)})
            if failed:
                summary["error"] = result.get("error") or {"type": "unknown", "message": "no error recorded"}
            run.summary.update(summary)
            complete = True
        finally:
            # Finished in every case, so a later init never returns this run again; a failed
            # training run, or one logged only in part, is marked failed in wandb too.
            run.finish(exit_code=0 if complete and not failed else 1)
        self.logged.append((name, self.mode))

    def _log_analysis(self, analysis: dict, out_dir: Path) -> None:
        wandb = self._wandb
        # the config: the analysis's settings and per-arm summaries, not its arrays of per-seed values
        config = {k: v for k, v in analysis.items() if k != "comparisons" and _is_plain(v)}
        run = self._start("analysis", job_type="analysis", config=config)
        if run is None:
            return
        ok = False
        try:
            data = {}
            columns, rows = comparison_table(comparisons_of(analysis))
            if rows:
                data["comparisons"] = wandb.Table(columns=columns, data=rows)
            figure = out_dir / "analysis.png"
            if figure.is_file():
                data["figure"] = wandb.Image(str(figure))
            if data:
                run.log(data, step=0)
            for step, row in sequential_history(analysis):  # a sequential run's looks, _step = seeds
                run.log(row, step=step)
            run.summary.update(analysis_summary(analysis))
            artifact = self._artifact(analysis, out_dir)
            if artifact is not None:
                run.log_artifact(artifact)
            ok = True
        finally:
            run.finish(exit_code=0 if ok else 1)
        self.logged.append(("analysis", self.mode))

    def _artifact(self, analysis: dict, out_dir: Path):
        from .results import find_result_files

        # everything `python -m harness.analyze` needs to redo the analysis, and what it wrote
        files = [out_dir / n for n in _ARTIFACT_FILES if (out_dir / n).is_file()] + find_result_files(out_dir)
        if not files:
            return None
        name = _artifact_name(f"analysis-{analysis.get('experiment') or 'experiment'}")
        artifact = self._wandb.Artifact(name, type="analysis", metadata={"group": self.group})
        for f in files:
            artifact.add_file(str(f), name=f.relative_to(out_dir).as_posix())
        return artifact

    def _start(self, name: str, job_type: str, config: dict):
        """A new wandb run, or None when wandb has given up (the run is then named as not logged)."""
        if self.broken is None:
            try:
                return self._init(name, job_type, config)
            except Exception as e:  # noqa: BLE001
                if self.mode != "online":
                    self._give_up(e)
                else:
                    # Online failed (network, credentials, timeout): one warning, then this and
                    # every later run go offline, so nothing waits for the timeout again.
                    self.online_failure = _describe(e)
                    self.mode = "offline"
                    log.warning(f"wandb: could not start a run online ({self.online_failure}); "
                                f"logging offline instead under {self.options['dir'] / 'wandb'}.")
                    try:
                        return self._init(name, job_type, config)
                    except Exception as e2:  # noqa: BLE001
                        self._give_up(e2)
        self.not_logged.append(name)
        return None

    def _init(self, name: str, job_type: str, config: dict):
        wandb, o = self._wandb, self.options
        o["dir"].mkdir(parents=True, exist_ok=True)
        return wandb.init(
            project=o["project"], entity=o["entity"], group=self.group, job_type=job_type, name=name,
            tags=o["tags"], config=config, dir=str(o["dir"]), mode=self.mode,
            # finish whatever run is still open (ours are always finished; a user's might not be)
            reinit="finish_previous",
            settings=wandb.Settings(init_timeout=o["init_timeout"], **o["settings"]),
        )

    def _give_up(self, e: Exception) -> None:
        self.broken = f"wandb.init failed in {self.mode} mode: {_describe(e)}"
        log.warning(f"wandb: {self.broken}; not trying again in this process. The results are unaffected.")

    def _problem(self, name: str, e: Exception) -> None:
        self.problems.append(f"wandb: {name} was logged only in part ({_describe(e)}); its files on disk are complete.")
        log.warning(self.problems[-1])

    def _teardown(self) -> None:
        wandb = self._wandb
        if wandb is None:
            return
        try:
            if wandb.run is not None:  # only if something above was interrupted mid-run
                wandb.run.finish(exit_code=1)
        finally:
            # ends wandb's service process: no leftover processes, also in a reused joblib worker
            wandb.teardown()

    def _warnings(self) -> list[str]:
        out = []
        where = self.options["dir"] / "wandb"
        offline = [n for n, mode in self.logged if mode == "offline"]
        if self.online_failure and offline:
            out.append(
                f"wandb: not logged online ({self.online_failure}): {_names(offline)}. They were logged "
                f"offline under {where}; upload them later with: wandb sync {where}/offline-run-*"
            )
        if self.not_logged:
            why = self.broken + (f"; online before that: {self.online_failure}" if self.online_failure else "")
            out.append(f"wandb: not logged ({why}): {_names(self.not_logged)}. "
                       f"The results are complete in {self.out_dir}.")
        elif self.broken:
            out.append(f"wandb: {self.broken}.")
        out.extend(self.problems)
        if offline and not self.online_failure:
            log.info(f"wandb: {len(offline)} run(s) logged offline under {where}; "
                     f"upload with: wandb sync {where}/offline-run-*")
        return out


# -- what goes into wandb -----------------------------------------------------------------------


def decode_loss_bits(bits: list[str]) -> list[float]:
    """The per-step losses from their float32 bit patterns (8 hex digits): exact, no rounding."""
    return [struct.unpack("<f", struct.pack("<I", int(h, 16)))[0] for h in bits]


# The comparison table's columns and where each value is in a comparison of analysis.json
# (harness/analysis.py); alternatives after the first keep older or hand-made analyses readable.
_COLUMNS = {
    "arm": ("arm",),
    "baseline": ("baseline",),
    "n": ("n_pairs", "n"),
    "mean_baseline": ("mean_baseline",),
    "mean_arm": ("mean_arm",),
    "mean_diff": ("mean_diff", "mean_difference"),
    "ci_low": ("t.ci.0", "ci_low"),  # the paired t interval
    "ci_high": ("t.ci.1", "ci_high"),
    "bootstrap_ci_low": ("bootstrap.ci.0",),
    "bootstrap_ci_high": ("bootstrap.ci.1",),
    "p_t": ("t.pvalue", "p_value"),
    "p_t_holm": ("holm.t",),
    "p_wilcoxon": ("wilcoxon.pvalue",),
    "p_permutation": ("permutation.pvalue",),
    "p_minimum_effect": ("minimum_effect.pvalue",),
    "p_tost": ("tost.pvalue",),
    "d_z": ("d_z",),
    "verdict": ("verdict.code", "verdict"),
    "verdict_sentence": ("verdict.sentence",),
}
# key numbers that also go into the analysis run's summary, per comparison
_SUMMARY_COLUMNS = ("n", "mean_diff", "ci_low", "ci_high", "p_t", "p_t_holm", "verdict", "verdict_sentence")


def _get(obj, path: str):
    """obj at a dotted path of dict keys and list indices; None where it is missing."""
    for part in path.split("."):
        if isinstance(obj, dict):
            obj = obj.get(part)
        elif isinstance(obj, (list, tuple)) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        else:
            return None
    return obj


def comparisons_of(analysis: dict) -> list[dict]:
    """The comparisons, in order: analysis.json keys them by arm; a list is accepted too."""
    comparisons = analysis.get("comparisons") or []
    if isinstance(comparisons, dict):
        comparisons = [dict(c, arm=c.get("arm", arm)) for arm, c in comparisons.items() if isinstance(c, dict)]
    return [c for c in comparisons if isinstance(c, dict)]


def comparison_table(comparisons: list[dict]) -> tuple[list[str], list[list]]:
    """Columns and rows of the comparison table; a column no comparison has is left out."""
    picks = {}
    for column, paths in _COLUMNS.items():
        path = next((p for p in paths if any(_is_cell(_get(c, p)) for c in comparisons)), None)
        if path is not None:
            picks[column] = path
    rows = [[_cell(_get(c, path)) for path in picks.values()] for c in comparisons]
    return list(picks), rows


def sequential_history(analysis: dict) -> list[tuple[int, dict]]:
    """The looks of a sequential run as history rows: (seeds at the look, sequential/<arm>/... values)."""
    seq = analysis.get("sequential")
    rows: dict[int, dict] = {}
    for arm, a in ((seq or {}).get("arms") or {}).items() if isinstance(seq, dict) else ():
        for x in a.get("looks") or []:
            row = rows.setdefault(int(x["n"]), {})
            lo, hi = x["interval"]
            row.update({f"sequential/{arm}/estimate": x["estimate"], f"sequential/{arm}/lower": lo,
                        f"sequential/{arm}/upper": hi, f"sequential/{arm}/critical": x["critical"],
                        f"sequential/{arm}/decision": x["decision"]})
    return sorted(rows.items())


def analysis_summary(analysis: dict) -> dict:
    """The verdict(s) and key numbers; per comparison under '<arm>_vs_<baseline>/<column>'."""
    columns, rows = comparison_table(comparisons_of(analysis))
    summary = {k: analysis[k] for k in ("experiment", "factor", "metric", "baseline") if _is_cell(analysis.get(k))}
    margin = _get(analysis, "margin.value") if isinstance(analysis.get("margin"), dict) else analysis.get("margin")
    if _is_cell(margin):
        summary["margin"] = margin
    verdicts = []
    for row in rows:
        cells = dict(zip(columns, row))
        label = f"{cells.get('arm', '?')}_vs_{cells.get('baseline', '?')}"
        summary.update({f"{label}/{c}": cells[c] for c in _SUMMARY_COLUMNS if cells.get(c) is not None})
        if cells.get("verdict") is not None:
            verdicts.append((cells.get("arm"), cells["verdict"], cells.get("verdict_sentence")))
    if len(verdicts) == 1:  # the common A/B case: the verdict at the top of the summary
        summary["verdict"] = verdicts[0][1]
        if verdicts[0][2]:
            summary["verdict_sentence"] = verdicts[0][2]
    elif verdicts:
        summary["verdict"] = "; ".join(f"{arm}: {code}" for arm, code, _ in verdicts)
    if isinstance(analysis.get("excluded"), list):
        summary["excluded_runs"] = len(analysis["excluded"])
    cert = analysis.get("certificate")
    if isinstance(cert, dict):
        summary.update({f"certificate/{k}": v for k, v in cert.items() if _is_cell(v)})
    return summary


# -- small helpers ------------------------------------------------------------------------------


def _run_name(result: dict) -> str:
    return f"seed={result.get('seed')} arm={result.get('arm')}"


def _names(names: list[str]) -> str:
    return ", ".join(names) if names else "nothing"


def _describe(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:300]}" if text else type(e).__name__


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_cell(v) -> bool:
    return isinstance(v, (str, int, float, bool))


def _cell(v):
    return v if _is_cell(v) else None


def _is_plain(v) -> bool:
    """Small JSON-like values only: the analysis run's config, not its arrays of per-seed values."""
    if _is_cell(v) or v is None:
        return True
    if isinstance(v, dict):
        return len(v) <= 50 and all(_is_plain(x) for x in v.values())
    if isinstance(v, list):
        return len(v) <= 50 and all(_is_cell(x) for x in v)
    return False


def _artifact_name(name: str) -> str:
    """wandb artifact names allow letters, digits, '-', '_' and '.'."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:120]
