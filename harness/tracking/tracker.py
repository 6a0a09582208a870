"""The tracker: every run and every verdict in wandb, offline by default (what is logged, which
settings win and what happens on failure: the room's docstring, harness/tracking/__init__.py).

The one module that imports wandb, and only inside functions: with ``logger=none`` the tracker is a
NullTracker and wandb is never imported. Every public method catches wandb's failures and turns
them into warnings that ``close()`` returns.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path

from harness.tracking.content import (
    _is_plain, analysis_summary, comparison_table, comparisons_of, decode_loss_bits,
    conditions_summary, conditions_table, race_summary, race_table, sequential_history,
)
from harness.integrations import wandb_hook
from harness.tracking.closing import closing_words
from harness.tracking.notices import Notices
from harness.tracking.shared import log_at_step, open_unit_run
from harness.tracking.options import (
    MODES, SWEEP_ENV, OnlineGate, _describe, _is_number, _select, check, folder_id, resolve_options,
)

log = logging.getLogger("harness.tracking")

_ARTIFACT_FILES = ("analysis.json", "report.md", "analysis.png", "certificate.json", "experiment.json",
                   "sequential.json", "sequential.png")


def open_tracker(cfg, out_dir, group: str | None = None, sweep_root=None):
    """The tracker for one experiment process.

    ``sweep_root``: the sweep's folder when ``out_dir`` is one job of a sweep (the jobs then share
    the online outcome and leave the ``wandb sync`` hint to the sweep), else None (out_dir is the
    whole experiment). ``group`` overrides the group (tests); normally it comes from the config.
    Raises TrackingConfigError for a bad ``logger.*`` value (call it before the first run);
    anything else wandb does wrong becomes a warning.
    """
    name = str(_select(cfg, "logger.name", "wandb"))
    if name == "none":
        return NullTracker()
    if name == "wandb":
        check(cfg)
    try:
        if name != "wandb":
            return NullTracker([f"logger.name={name!r} is neither wandb nor none: nothing was tracked."])
        options = resolve_options(cfg, Path(out_dir), sweep_root=sweep_root)
        if group is not None:
            options["group"] = group
        return WandbTracker(options, Path(out_dir), sweep_root=sweep_root)
    except Exception as e:  # noqa: BLE001 - tracking must never stop the experiment
        return NullTracker([f"wandb: nothing was logged ({_describe(e)}); the results are complete in {out_dir}."])


# -- trackers -----------------------------------------------------------------------------------


class NullTracker:
    """logger=none: nothing is tracked; ``warnings`` carries why, when it replaces a broken wandb."""

    def __init__(self, warnings: list[str] | None = None):
        self._warnings = list(warnings or [])
        self.notices = Notices()

    def log_run(self, result: dict) -> None:
        self.notices.heed(result)

    def log_analysis(self, analysis: dict, out_dir) -> None:
        pass

    def log_race(self, analysis: dict, out_dir) -> None:
        pass

    def log_conditions(self, summary: dict, out_dir) -> None:
        pass

    def log_table_run(self, name: str, key: str, out_dir, config: dict, columns: list, rows: list,
                      figure: str, summary: dict) -> None:
        pass

    def close(self) -> list[str]:
        warnings, self._warnings = self._warnings + self.notices.said(None), []
        return warnings


class WandbTracker:
    def __init__(self, options: dict, out_dir: Path, group: str | None = None, sweep_root=None):
        self.options = options
        self.mode = options["mode"]
        self.out_dir = out_dir
        self.group = group or options["group"]
        self.root = Path(sweep_root) if sweep_root is not None else out_dir
        # one job of a sweep (not the sweep's own tracker, nor a single run)
        self.in_sweep = self.root.absolute() != out_dir.absolute()
        self.gate = OnlineGate(self.root, os.environ.get(SWEEP_ENV), wait_s=options["init_timeout"] + 30)
        self.online_skipped = False  # online was not tried: another job of the sweep found it failing
        self.logged: list[tuple[str, str]] = []  # (run name, mode) of each run logged in full
        self.not_logged: list[str] = []  # run names wandb never saw
        self.problems: list[str] = []  # one warning per run logged only in part
        self.online_failure: str | None = None  # why online failed (the rest went offline)
        self.broken: str | None = None  # why wandb gave up entirely
        self._wandb = None
        self._early: dict = {}  # run name -> a unit's run opened before it trained (open_unit_run)
        self._env_set: dict[str, str] = {}
        self._closed = False
        self.notices = Notices()  # what the units' trainer callbacks noted: said once, at close
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
            return
        wandb_hook.offer(self.open_unit_run)  # a trainer's own wandb logger then logs into the unit's run

    def open_unit_run(self, folder: Path) -> str | None:
        """The unit's run opened before it trains, for a trainer's own wandb logger (shared.py)."""
        return open_unit_run(self, Path(folder))

    # -- the interface ----------------------------------------------------------------------

    def log_run(self, result: dict) -> None:
        name = _run_name(result)
        self.notices.heed(result, self)  # before its run opens: the user's project, where it can be kept
        try:
            self._log_run(result, name)
        except Exception as e:  # noqa: BLE001 - a wandb failure never stops the experiment
            from harness.results import RESULT_NAME, run_dir

            self._problem(name, e, run_dir(self.out_dir, result.get("seed"), result.get("arm")) / RESULT_NAME)

    def log_analysis(self, analysis: dict, out_dir) -> None:
        try:
            self._log_analysis(analysis, Path(out_dir))
        except Exception as e:  # noqa: BLE001
            self._problem("analysis", e, Path(out_dir) / "analysis.json")

    def log_race(self, analysis: dict, out_dir) -> None:
        """A race's analysis (harness/experiment/adaptive/race_report.py): one run "race" per race folder, with the
        table "race" (who was dropped when, the interval against the leader), race.png and the verdict."""
        race = analysis.get("race") or {}
        self._summary_run("race", "race", Path(out_dir), {"declaration": analysis.get("declaration"),
                          "design": race.get("design")}, lambda: race_table(analysis), "race.png",
                          lambda: race_summary(analysis))

    def log_conditions(self, summary: dict, out_dir) -> None:
        """The claim across ab.conditions (analysis/conditions.py): one run "across conditions" per
        results folder, with the table "conditions", the forest plot and across/<arm>/* in its summary."""
        self._summary_run("across conditions", "conditions", Path(out_dir), summary["declaration"],
                          lambda: conditions_table(summary), "analysis.png", lambda: conditions_summary(summary))

    def log_table_run(self, name: str, key: str, out_dir, config: dict, columns: list, rows: list,
                      figure: str, summary: dict) -> None:
        """A tool's measurement as one run per results folder (python -m harness.noise_sources: run
        "noise sources"), replaced on a rerun: the wandb.Table ``key`` (``columns``, ``rows``), the
        image ``out_dir/figure`` as "figure" when it exists, and ``summary``."""
        self._summary_run(name, key, Path(out_dir), config, lambda: (columns, rows), figure, lambda: summary)

    def close(self) -> list[str]:
        """Finish every run, stop wandb's service, and say what was not logged."""
        if self._closed:
            return []
        self._closed = True
        wandb_hook.withdraw(self.open_unit_run)
        try:
            self._teardown()
        except Exception as e:  # noqa: BLE001
            self.problems.append(f"wandb: closing failed ({_describe(e)}); some data may not have been written "
                                 f"under {self.options['dir'] / 'wandb'}. The results are complete in {self.out_dir}.")
        for var, value in self._env_set.items():
            if os.environ.get(var) == value:
                del os.environ[var]
        return closing_words(self) + self.notices.said(self.options["project"])

    # -- runs -------------------------------------------------------------------------------

    def _log_run(self, result: dict, name: str) -> None:
        config = dict(result.get("config") or {})
        config.update(seed=result.get("seed"), arm=result.get("arm"), factor_value=result.get("factor_value"),
                      env=result.get("env") or {})
        shared = self._early.pop(name, None)  # opened before the unit trained: a trainer logged into it
        if shared is not None:
            shared.config.update(config, allow_val_change=True)
        run = shared or self._start(name, job_type=str(result.get("arm")), config=config)
        if run is None:
            return
        failed = result.get("status") != "completed"
        complete = False
        try:
            fingerprints = result.get("fingerprints") or {}
            from harness.results import load_steps

            losses = decode_loss_bits(load_steps(result)["loss"])
            metrics = {f"metrics/{k}": v for k, v in (result.get("metrics") or {}).items() if _is_number(v)}
            last = len(losses)
            every = self.options["history_every"]
            log_at = log_at_step(run, shared is not None)
            for step, loss in enumerate(losses[:-1], start=1):
                if step % every == 0:
                    log_at({"train/loss": loss}, step)
            # the evaluation belongs to the last optimizer step: one row with the last loss
            final = dict(metrics)
            if losses:
                final["train/loss"] = losses[-1]
            if final:
                log_at(final, last)
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
        run_id = f"analysis-{folder_id(out_dir)}"  # one analysis run per results folder
        self._replaced = []
        run = self._start("analysis", job_type="analysis", config=config, run_id=run_id)
        if run is None:
            return
        if self._replaced:
            log.info(f"wandb: the analysis run {run_id} replaces its earlier offline copy "
                     f"({', '.join(p.name for p in self._replaced)}, removed): one analysis run per results folder.")
        elif getattr(run, "resumed", False):
            log.info(f"wandb: the analysis run {run_id} was updated (the same run id as before).")
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
                run.log(data)  # no explicit step: a resumed online run continues after its last one
            for row in sequential_history(analysis):  # a sequential run's looks, one row per look
                run.log(row)
            run.summary.update(analysis_summary(analysis))
            artifact = self._artifact(analysis, out_dir)
            if artifact is not None:
                run.log_artifact(artifact)
            ok = True
        finally:
            run.finish(exit_code=0 if ok else 1)
        self.logged.append(("analysis", self.mode))

    def _summary_run(self, name: str, key: str, out_dir: Path, config, table, figure: str, summary) -> None:
        """One run per results folder (a rerun replaces it) holding a table, a figure and a summary;
        finished in every case, so that a later init never returns this run again."""
        try:
            run = self._start(name, job_type=key.replace(" ", "_"), config=config, run_id=f"{key}-{folder_id(out_dir)}")
            if run is None:
                return
            ok = False
            try:
                data = {key: self._wandb.Table(*table())}
                if (out_dir / figure).is_file():
                    data["figure"] = self._wandb.Image(str(out_dir / figure))
                run.log(data)
                run.summary.update(summary())
                ok = True
            finally:
                run.finish(exit_code=0 if ok else 1)
            self.logged.append((name, self.mode))
        except Exception as e:  # noqa: BLE001 - a wandb failure never stops the experiment
            self._problem(name, e, out_dir / "analysis.json")

    def _artifact(self, analysis: dict, out_dir: Path):
        from harness.results import find_result_files

        # everything `python -m harness.analyze` needs to redo the analysis, and what it wrote
        files = [out_dir / n for n in _ARTIFACT_FILES if (out_dir / n).is_file()] + find_result_files(out_dir)
        if not files:
            return None
        name = _artifact_name(f"analysis-{analysis.get('experiment') or 'experiment'}")
        artifact = self._wandb.Artifact(name, type="analysis", metadata={"group": self.group})
        for f in files:
            artifact.add_file(str(f), name=f.relative_to(out_dir).as_posix())
        return artifact

    def _start(self, name: str, job_type: str, config: dict, run_id: str | None = None):
        """A new wandb run, or None when wandb has given up (the run is then named as not logged)."""
        if self.broken is None and self.mode == "online" and not self.online_failure:
            verdict, why = self.gate.decide()
            if verdict == "offline":  # another job of this sweep paid the timeout already
                self.online_failure, self.online_skipped, self.mode = why, True, "offline"
                log.debug(f"wandb: logging offline without trying online: {why}.")
        if self.broken is None:
            try:
                run = self._init(name, job_type, config, run_id)
                if self.mode == "online":
                    self.gate.record(True, None, self.out_dir)
                return run
            except Exception as e:  # noqa: BLE001
                if self.mode != "online":
                    self._give_up(e)
                else:
                    # Online failed (network, credentials, timeout): one warning, then this and
                    # every later run go offline, so nothing waits for the timeout again; in a
                    # sweep, the other jobs read the outcome and do not wait either.
                    self.online_failure = _describe(e)
                    self.gate.record(False, self.online_failure, self.out_dir)
                    self.mode = "offline"
                    others = (f" The other jobs of this sweep log offline without trying (recorded in "
                              f"{self.gate.state_file}); the sweep's end says how to upload them."
                              if self.gate.sweep_id and self.in_sweep else "")
                    log.warning(f"wandb: could not start a run online ({self.online_failure}); "
                                f"logging offline instead under {self.options['dir'] / 'wandb'}.{others}")
                    try:
                        return self._init(name, job_type, config, run_id)
                    except Exception as e2:  # noqa: BLE001
                        self._give_up(e2)
        self.not_logged.append(name)
        return None

    def _init(self, name: str, job_type: str, config: dict, run_id: str | None = None):
        wandb, o = self._wandb, self.options
        o["dir"].mkdir(parents=True, exist_ok=True)
        fixed = {}
        if run_id is not None:
            # A fixed id: online, resume="allow" updates the run of that id; offline, wandb would
            # add a second folder with the same id, so the earlier offline copy is removed first.
            fixed = {"id": run_id, "resume": "allow"}
            if self.mode == "offline":
                self._replaced = self._remove_offline_copies(run_id)
        prefix = o.get("name_prefix")
        return wandb.init(
            project=o["project"], entity=o["entity"], group=self.group, job_type=o.get("job_type") or job_type,
            name=f"{prefix} {name}" if prefix else name,
            tags=o["tags"], config=config, dir=str(o["dir"]), mode=self.mode,
            # finish whatever run is still open (ours are always finished; a user's might not be)
            reinit="finish_previous",
            settings=wandb.Settings(init_timeout=o["init_timeout"], **o["settings"]),
            **fixed,
        )

    def _remove_offline_copies(self, run_id: str) -> list[Path]:
        """Earlier offline folders of the run ``run_id`` in this tracker's wandb folder (removed)."""
        removed = []
        for folder in sorted((self.options["dir"] / "wandb").glob(f"offline-run-*-{run_id}")):
            if (folder / f"run-{run_id}.wandb").is_file():
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
        return removed

    def _give_up(self, e: Exception) -> None:
        self.broken = f"wandb.init failed in {self.mode} mode (dir {self.options['dir'] / 'wandb'}): {_describe(e)}"
        log.warning(f"wandb: {self.broken}; not trying again in this process. The results are unaffected.")

    def _problem(self, name: str, e: Exception, file: Path) -> None:
        self.problems.append(f"wandb: {name} was logged only in part ({_describe(e)}); its file on disk, {file}, "
                             "is complete.")
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


# -- small helpers -------------------------------------------------------------------------------


def _run_name(result: dict) -> str:
    return f"seed={result.get('seed')} arm={result.get('arm')}"


def _artifact_name(name: str) -> str:
    """wandb artifact names allow letters, digits, '-', '_' and '.'."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:120]
