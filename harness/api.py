"""The Python API, for scripts and notebooks: no CLI, no "config module not found".

    import harness
    res = harness.run(["+experiment=loss_ab", "ab.seeds=[0,1,2]"], out_dir="outputs/mine")
    res.verdict            # the verdict sentence(s) of the comparison(s)
    res.to_dict()          # analysis.json's content
    res.to_pandas()        # one row per (seed, arm); pandas imported only here
    res.figure()           # the analysis figure (a matplotlib Figure)

    res = harness.analyze_folder("multirun/loss_ab/default", metric="test_loss")

Both compose and analyse exactly as ``python -m harness`` and ``python -m harness.analyze`` do;
``config_dir`` adds a folder of your own configs (like ``--config-dir``).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

import harness  # noqa: F401 - CUBLAS_WORKSPACE_CONFIG before torch
from harness import HarnessError


@dataclass
class ExperimentResult:
    out_dir: Path
    analysis: Optional[dict]
    results: list = field(default_factory=list)  # the result dicts (result.json contents)

    @property
    def verdict(self) -> Optional[str]:
        """The verdict sentence of each comparison with the baseline, one per line."""
        if not self.analysis:
            return None
        from harness.analysis.render.summary import verdicts

        return "\n".join(verdicts(self.analysis))

    @property
    def figure_path(self) -> Path:
        return self.out_dir / "analysis.png"

    def to_dict(self) -> dict:
        """The analysis (analysis.json's content)."""
        return dict(self.analysis or {})

    def to_pandas(self):
        """A DataFrame with one row per (seed, arm): status, factor value, every metric, fingerprints."""
        try:
            import pandas as pd
        except ImportError as e:  # pandas is optional
            raise ImportError("to_pandas needs pandas: pip install pandas") from e
        rows = []
        for r in self.results:
            row = {"seed": r.get("seed"), "arm": r.get("arm"), "factor": r.get("factor"),
                   "factor_value": r.get("factor_value"), "status": r.get("status")}
            row.update(r.get("metrics") or {})
            fp = r.get("fingerprints") or {}
            row.update({f"fingerprint_{k}": fp.get(k) for k in ("init", "data_order", "final")})
            rows.append(row)
        return pd.DataFrame(rows)

    def figure(self):
        """The analysis figure as a matplotlib Figure (read from analysis.png)."""
        from matplotlib.figure import Figure
        from matplotlib.image import imread

        if not self.figure_path.is_file():
            raise FileNotFoundError(f"{self.figure_path}: no figure (was the analysis written?)")
        image = imread(self.figure_path)
        fig = Figure(figsize=(image.shape[1] / 100, image.shape[0] / 100), dpi=100)
        ax = fig.add_axes((0, 0, 1, 1))
        ax.imshow(image)
        ax.axis("off")
        return fig

    def __repr__(self) -> str:
        done = sum(1 for r in self.results if r.get("status") == "completed")
        head = f"ExperimentResult({self.out_dir}, {done}/{len(self.results)} runs completed"
        return head + (f"; {self.verdict})" if self.verdict else ")")


def _default_out_dir(cfg, overrides: Sequence[str], config_dirs=()) -> Path:
    """Named by the overrides that change results, as on the command line (config.compose.not_in_name):
    neither a key that changes no bit nor one typed at the value the config already has."""
    from harness.config.compose import compose, not_in_name, replace_whole_arms
    from harness.config.unchanged import unchanged_keys

    def recompose(kept):
        again = compose(kept, config_dirs=config_dirs)
        replace_whole_arms(again, kept)
        return again

    skip = set(not_in_name(overrides, cfg.ab.sequential.enabled))
    skip |= set(unchanged_keys(cfg, overrides, recompose, skip=skip))
    key = ",".join(sorted(o for o in overrides if str(o).split("=", 1)[0].lstrip("+~") not in skip))
    name = "default" if not key else "api-" + hashlib.sha256(key.encode()).hexdigest()[:10]
    return Path("outputs") / str(cfg.experiment_name) / name


def run(overrides: Sequence[str] = (), *, out_dir=None, config_dir=None, cfg=None, verbose: bool = True) -> ExperimentResult:
    """Run an experiment (every seed x arm, resume, certificate) and analyse it.

    ``overrides``: the same strings as on the command line. ``cfg``: an already composed config
    instead. ``out_dir``: where results go (default outputs/<experiment>/...). Raises HarnessError
    on a bad config; failed runs are in ``results`` with status "failed".
    """
    from omegaconf.errors import OmegaConfBaseException

    from harness.experiment.execute import execute
    from harness.config import compose, compose_error, factor_override_problem, replace_whole_arms
    from harness.experiment.arms import ExperimentError
    from harness.results import load_tree

    given = cfg is not None  # ab.conditions recomposes from the overrides: not from a given cfg
    if cfg is None:
        from hydra.errors import HydraException

        try:
            cfg = compose(overrides, config_dirs=[config_dir] if config_dir else ())
        except (HydraException, OmegaConfBaseException) as e:
            raise HarnessError(f"the overrides {list(overrides)} do not compose a config: {compose_error(e)}") from None
        replace_whole_arms(cfg, overrides)
        problem = factor_override_problem(cfg, overrides)
        if problem:
            raise HarnessError(problem)
    out = Path(out_dir) if out_dir is not None else _default_out_dir(cfg, overrides, [config_dir] if config_dir else ())
    log = logging.getLogger("harness")
    say = (lambda m: print(m, flush=True)) if verbose else log.debug
    try:
        done = execute(cfg, out, say=say, show_table=verbose, overrides=None if given else list(overrides),
                       config_dirs=[config_dir] if config_dir else ())
    except ExperimentError as e:
        raise HarnessError(str(e)) from None
    except OSError as e:
        from harness.experiment.execute import storage_message

        raise HarnessError(storage_message(e, out, again="harness.run(...) with the same arguments")) from None
    results = [r for r in load_tree(out).results] if (out / "runs").exists() else done.outcome.results
    if done.analysis_error and verbose:
        print(done.analysis_error)
    return ExperimentResult(out, done.analysis, results)


def analyze_folder(folder, *, write: bool = True, **options) -> ExperimentResult:
    """Analyse every result.json under ``folder`` (options as ``python -m harness.analyze``'s:
    metric, margin, baseline, alpha, ...). Raises HarnessError when they cannot be analysed."""
    from harness.analysis.analyze import analyze_dir
    from harness.analysis import AnalysisError
    from harness.results import ResultsError, load_tree

    folder = Path(folder)
    try:
        analysis = analyze_dir(folder, write=write, **options)
    except (AnalysisError, ResultsError) as e:
        raise HarnessError(str(e)) from None
    return ExperimentResult(folder if folder.is_dir() else folder.parent, analysis, load_tree(folder).results)
