"""The declaration: what an experiment said it would analyse, made once and read by every tool.

``Declaration.from_config(cfg)`` turns the composed config into one typed, frozen object: the
factor, the arms and the baseline, the seeds, the primary metric, every declared metric with its
direction, unit and per-example record, the margin (a number, "auto" or none), alpha, the
resampling settings, the sequential design, and the conditions (``ab.conditions``: name -> config
overrides, the same arms and seeds under each; their average is then the primary claim). It is written beside the runs as
``declaration.json`` and it is the only thing the analysis, ``harness.analyze``, the sweep callback,
the sequential runner and sweeper, the report, wandb, the noise audit and goldens read about these
choices: none of them has a default of its own, and nothing is inferred from a metric's name.

An analysis with another metric, margin, alpha, baseline or direction is an *alternative*:
``declaration.alternative(...)`` returns a copy whose ``departures`` name each change, and the
tools write it to its own files (``alternatives/<name>/``), never over the declared ones.

``stats.metrics`` entries are either a direction (``rmse: min``) or a mapping
``{direction: max, unit: pts, examples: true}``. ``unit`` is how a person reads the numbers
("pts" = percentage points); ``examples: true`` says the metric is the mean of per-example 0/1
outcomes that the training function records with ``run.record_examples(correct, metric=NAME)``
(times 100 when the unit is "pts" or "%"): such a metric gets the test set's own noise.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Optional

from harness.config.condition_rules import condition_problems
from harness.config.fdr_spec import fdr_spec
from harness.config.metric_spec import (
    DIRECTIONS, DeclarationError, MetricSpec, _number, _plain, _v, metric_spec)

SCHEMA = "harness.declaration/1"
DECLARATION_NAME = "declaration.json"
DIVERGED = ("worst", "exclude", "fail")  # stats.diverged


@dataclass(frozen=True)
class SequentialSpec:
    """ab.sequential without the margin (declared once, at stats.margin)."""

    max_seeds: int = 50
    min_seeds: Optional[int] = None
    seeds_per_look: int = 2
    alpha: Optional[float] = None
    equivalence: Optional[bool] = None
    spending: str = "pocock"
    gamma: float = 1.0
    futility: float = 0.05
    max_failures: int = 0
    futility_rule: str = "reach"
    futility_from: Optional[int] = None


@dataclass(frozen=True)
class Declaration:
    experiment: str
    factor: str
    arms: dict  # arm name -> value at the factor, in the declared order
    baseline: str
    seeds: tuple
    metric: str  # the primary metric: the verdict is about it
    metrics: dict  # name -> MetricSpec, every declared metric
    margin: Any  # a number >= 0, "auto" (the seed noise floor, estimated) or None (no margin)
    alpha: float
    bootstrap_resamples: int = 9999
    bootstrap_seed: int = 0
    sequential: Optional[SequentialSpec] = None  # the design when ab.sequential.enabled
    departures: tuple = ()  # for an alternative analysis: each change from the declaration, in words
    # name -> tuple of config overrides (ab.conditions): the same arms and seeds under each; when
    # there are any, the primary claim is the average effect across them (conditions.py)
    conditions: dict = field(default_factory=dict)
    diverged: str = "worst"  # worst | exclude | fail: how a run with a non-finite loss or metric counts
    fdr: Optional[dict] = None  # stats.fdr: {method, level}, then alpha_t and its place in the ledger (fdr_spec.py)
    # when this declaration replaced another in a folder that already held results (write()):
    # {"results": how many, "superseded": the earlier one's file, "margin": its margin}. A record of
    # when it was made, not a choice: declarations that differ only here are the same declaration.
    declared_after: Optional[dict] = None

    # -- reading ---------------------------------------------------------------------------------

    @property
    def primary(self) -> MetricSpec:
        return self.metrics[self.metric]

    @property
    def unit(self) -> str:
        return self.primary.unit

    @property
    def others(self) -> list:
        return [a for a in self.arms if a != self.baseline]

    @property
    def directions(self) -> dict:
        return {name: m.direction for name, m in self.metrics.items()}

    @property
    def is_alternative(self) -> bool:
        return bool(self.departures)

    def spec(self, name: str) -> MetricSpec:
        if name not in self.metrics:
            raise DeclarationError(self._undeclared(name))
        return self.metrics[name]

    def examples_metric(self) -> Optional[str]:
        """The one metric whose per-example outcomes run.record_examples(correct) records without a name."""
        named = [name for name, m in self.metrics.items() if m.examples]
        return named[0] if len(named) == 1 else None

    @property
    def sequential_alpha(self) -> float:
        return float(self.sequential.alpha if self.sequential and self.sequential.alpha is not None else self.alpha)

    # -- making ----------------------------------------------------------------------------------

    @classmethod
    def from_config(cls, cfg, *, strict: bool = True) -> "Declaration":
        """The declaration of a composed config (a DictConfig, or a result's recorded config dict).

        ``strict=False`` (results' recorded configs) lets a primary metric without a declared
        direction through: an analysis may still name another metric, and refuses an undeclared one."""
        c = _plain({k: cfg[k] for k in ("experiment_name", "ab", "stats") if k in cfg})  # not hydra's node
        # A key the config does not hold (a result written by hand or by an older harness) has the
        # schema's default: the value a run of this harness would have declared.
        ab, s = c.get("ab") or {}, {**_schema_defaults("stats"), **(c.get("stats") or {})}
        problems = []
        arms = {str(k): v for k, v in (ab.get("arms") or {}).items()}
        baseline = s.get("baseline")
        if baseline is None:
            baseline = next(iter(arms), None)
        elif arms and str(baseline) not in arms:
            problems.append(f"stats.baseline={baseline!r} is not an arm; the arms are {', '.join(arms)}.")
        metrics = {}
        for name, entry in declared_metrics({"stats": s, "train": _plain(cfg.get("train") or {})}).items():
            try:
                metrics[str(name)] = metric_spec(str(name), entry)
            except DeclarationError as e:
                problems.append(str(e))
        metric = s.get("metric")
        if not isinstance(metric, str) or not metric:
            problems.append(f"stats.metric={metric!r} must name the primary metric (a key of the metrics "
                            f"the training function returns).")
        elif metric not in metrics and not problems and strict:
            problems.append(_undeclared_text(metric, metrics))
        alpha = s.get("alpha", 0.05)
        if not (_number(alpha) and 0 < alpha < 0.5):
            problems.append(f"stats.alpha={alpha!r} must be a number between 0 and 0.5 (e.g. 0.05).")
        margin = s.get("margin", "auto")
        if not (margin is None or margin == "auto" or (_number(margin) and margin >= 0)):
            problems.append(f"stats.margin={margin!r} must be a number >= 0 in {metric}'s units (the smallest "
                            f"effect that matters, declared before the data), auto (the seed noise floor, "
                            f"estimated from the data) or null (no margin: better or worse than 0 only).")
        seq_cfg = ab.get("sequential") or {}
        sequential = None
        if seq_cfg.get("margin") is not None:
            problems.append(f"ab.sequential.margin={seq_cfg.get('margin')!r}: the margin is declared once, for "
                            f"every mode, at stats.margin. Write stats.margin={seq_cfg.get('margin')} instead.")
        if seq_cfg.get("enabled"):
            fields = {k: seq_cfg[k] for k in SequentialSpec.__dataclass_fields__ if k in seq_cfg}
            sequential = SequentialSpec(**fields)
            if margin == "auto":
                problems.append("stats.margin=auto cannot be used in sequential mode: the design is declared "
                                "before any data, so the margin cannot be estimated from it. Declare "
                                "stats.margin=<the smallest effect that matters, in "
                                f"{metric}'s units>, or stats.margin=null (better or worse than 0 only, "
                                "no equivalence claims).")
        problems += condition_problems(ab.get("conditions") or {}, factor=str(ab.get("factor", "")),
                                       sequential=sequential is not None, metric=metric)
        diverged = s.get("diverged", "worst")
        if diverged not in DIVERGED:
            problems.append(f"stats.diverged={diverged!r} must be one of {', '.join(DIVERGED)}: worst counts a run "
                            f"whose loss or metric became non-finite as worse than every finished run of its "
                            f"seed, exclude leaves it out with its partner (with a survivorship warning), fail "
                            f"gives no verdict when any run diverged.")
        for key in ("bootstrap_resamples", "bootstrap_seed"):
            value = s.get(key, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < (1 if key == "bootstrap_resamples" else 0):
                problems.append(f"stats.{key}={value!r} must be " + ("an integer >= 1." if key == "bootstrap_resamples"
                                                                      else "a non-negative integer."))  # as every seed
        fdr = fdr_spec(s.get("fdr"), problems, sequential=sequential is not None, conditions=bool(ab.get("conditions")))
        if problems:
            raise DeclarationError(" ".join(problems))
        return cls(fdr=fdr,
            experiment=str(c.get("experiment_name", "default")), factor=str(ab.get("factor", "")), arms=arms,
            baseline=str(baseline) if baseline is not None else "", seeds=tuple(int(x) for x in ab.get("seeds") or ()),
            metric=metric, metrics=metrics, margin=float(margin) if _number(margin) else margin,
            alpha=float(alpha), bootstrap_resamples=int(s.get("bootstrap_resamples", 9999)),
            bootstrap_seed=int(s.get("bootstrap_seed", 0)), sequential=sequential,
            conditions={str(k): tuple(str(o) for o in v) for k, v in (ab.get("conditions") or {}).items()},
            diverged=str(diverged),
        )

    def alternative(self, *, metric: Optional[str] = None, margin: Any = "declared", alpha: Optional[float] = None,
                    baseline: Optional[str] = None, direction: Optional[str] = None,
                    directions: Optional[Mapping] = None) -> "Declaration":
        """A copy with other analysis choices; ``departures`` names each one that differs. ``margin``:
        "declared" keeps the declared one."""
        changes, departures = {}, list(self.departures)
        metrics = dict(self.metrics)
        for name, d in (directions or {}).items():
            d = str(_v(d))
            if d not in DIRECTIONS:
                raise DeclarationError(f"the direction of {name} must be 'max' or 'min', got {d!r}.")
            old = metrics.get(name)
            if old is None or old.direction != d:
                departures.append(f"direction of {name} {d} (declared: {old.direction if old else 'none'})")
                metrics[name] = replace(old, direction=d) if old else MetricSpec(str(name), d)
        if metric is not None and metric != self.metric:
            departures.append(f"metric {metric} (declared: {self.metric})")
            changes["metric"] = metric
        target = changes.get("metric", self.metric)
        if direction is not None:
            direction = str(_v(direction))
            old = metrics.get(target)
            if direction not in DIRECTIONS:
                raise DeclarationError(f"--direction must be 'max' or 'min', got {direction!r}.")
            if old is None or old.direction != direction:
                departures.append(f"direction of {target} {direction} (declared: {old.direction if old else 'none'})")
                metrics[target] = replace(old, direction=direction) if old else MetricSpec(target, direction)
        changes["metrics"] = metrics  # an undeclared target is refused by the analysis, after it is found
        if margin == "declared" and target != self.metric and _number(self.margin):
            # A margin is in its metric's units: another metric gets none of its own.
            departures.append(f"margin none for {target} (the declared margin {self.margin:g} is "
                              f"{self.metric}'s; give one for {target} with --margin)")
            changes["margin"] = None
        elif margin != "declared":
            margin = float(margin) if _number(margin) else margin
            if margin != self.margin:
                departures.append(f"margin {_margin_words(margin)} (declared: {_margin_words(self.margin)})")
                changes["margin"] = margin
        if alpha is not None and float(alpha) != self.alpha:
            departures.append(f"alpha {float(alpha):g} (declared: {self.alpha:g})")
            changes["alpha"] = float(alpha)
        if baseline is not None and str(baseline) != self.baseline:
            departures.append(f"baseline {baseline} (declared: {self.baseline})")
            changes["baseline"] = str(baseline)
        return replace(self, departures=tuple(departures), **changes)

    @property
    def margin_declared(self) -> str:
        """When the margin in use was declared, in words: before the data, after it (declared again on
        a folder that held results), or chosen for this alternative analysis."""
        chosen = [d for d in self.departures if d.startswith("margin ")]
        if chosen:
            return f"chosen for this alternative analysis, after the data ({chosen[0]})"
        after = self.declared_after
        if after and after.get("margin") != self.margin:
            return (f"declared after the data ({after['results']} results were in the folder; the earlier "
                    f"declaration, margin {_margin_words(after.get('margin'))}, is {after['superseded']})")
        return "declared before the data"

    def _undeclared(self, name: str, metrics=None) -> str:
        return _undeclared_text(name, self.metrics if metrics is None else metrics)

    # -- the file --------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        d = asdict(self)
        d["seeds"] = list(self.seeds)
        d["departures"] = list(self.departures)
        d["arms"] = {k: _plain(v) for k, v in self.arms.items()}
        d["conditions"] = {k: list(v) for k, v in self.conditions.items()}
        if d["declared_after"] is None:  # the files of declarations made before any result stay as they were
            del d["declared_after"]
        if d["sequential"] and d["sequential"]["futility_rule"] == "reach":  # as they were before the key, too
            del d["sequential"]["futility_rule"]
        if d["sequential"] and d["sequential"]["futility_from"] is None:  # and before this one
            del d["sequential"]["futility_from"]
        return {"schema": SCHEMA, **d}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Declaration":
        d = dict(d)
        if d.pop("schema", SCHEMA) != SCHEMA:
            raise DeclarationError(f"not a {SCHEMA} record")
        d["metrics"] = {k: MetricSpec(**v) for k, v in (d.get("metrics") or {}).items()}
        d["sequential"] = SequentialSpec(**d["sequential"]) if d.get("sequential") else None
        d["seeds"] = tuple(d.get("seeds") or ())
        d["departures"] = tuple(d.get("departures") or ())
        d["conditions"] = {k: tuple(v) for k, v in (d.get("conditions") or {}).items()}
        return cls(**d)

    def write(self, folder, say=None) -> Path:
        """declaration.json in ``folder`` (atomic). A different declaration already there is moved to
        superseded/ and the change is said: the folder keeps the record of what was declared before."""
        from harness.results import write_json

        path = Path(folder) / DECLARATION_NAME
        try:
            existing = read(folder)
        except DeclarationError:
            existing = None
        if existing is not None and not differences(existing, self):
            return path  # the same declaration (its record of when it was made kept)
        written = self
        if existing is not None or path.exists():
            from harness.config.superseded import supersede

            changed = "; ".join(differences(existing, self)) if existing else "unreadable"
            written = supersede(path, existing, self, changed, say)
        write_json(path, written.to_dict())
        return path


def read(folder) -> Optional[Declaration]:
    """The declaration.json in ``folder``, or None when there is none."""
    path = Path(folder) / DECLARATION_NAME
    if not path.is_file():
        return None
    try:
        return Declaration.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError) as e:
        raise DeclarationError(f"{path} cannot be read as a declaration ({e}); delete it to declare again "
                               f"from the results' recorded config.") from None


def of_results(results) -> Declaration:
    """The declaration the results' recorded configs make (they must agree): for folders without
    declaration.json (written before it existed, or result files collected by hand)."""
    made, seen, read_already = None, None, set()
    from harness.results import key_bytes

    for r in results:
        config = r.get("config")
        if not isinstance(config, Mapping) or not config.get("stats"):
            continue
        # from_config reads these three blocks only, and a folder's results mostly share them: each
        # distinct one is declared once (10,000 results: seconds, once per result)
        key = key_bytes([config.get(k) for k in ("experiment_name", "ab", "stats")], sort_keys=False)
        if key in read_already:
            continue
        read_already.add(key)
        d = Declaration.from_config(_recorded(config), strict=False)
        if made is None:
            made, seen = d, r.get("_path")
        elif d.to_dict() != made.to_dict():
            raise DeclarationError(
                f"the results were declared differently ({'; '.join(differences(made, d))}: {seen} and "
                f"{r.get('_path')}); one analysis reads one declaration. Analyse the folders apart.")
    if made is None:
        raise DeclarationError("the results record no config with a stats block, so nothing declares what to "
                               "analyse; write a declaration.json (harness.config.declaration) or pass the metric and "
                               "its direction explicitly.")
    return made


def declared_metrics(cfg: Mapping) -> dict:
    """name -> stats.metrics entry: what the config declares; when it declares none (empty) and runs
    the built-in loop, the built-in loop's metrics (schema.builtin_loop_metrics); else none."""
    from harness.config.schema import BUILTIN_LOOP, builtin_loop_metrics

    declared = (cfg.get("stats") or {}).get("metrics")
    if declared:
        return dict(declared)
    # only a config that names the built-in loop (every composed one does, by the schema's default):
    # results written by hand or by another program declare their own, or are analysed with --direction
    fn = (cfg.get("train") or {}).get("fn")
    return builtin_loop_metrics() if fn == BUILTIN_LOOP else {}


def _schema_defaults(group: str) -> dict:
    from dataclasses import asdict as as_dict

    from harness.config.schema import StatsConfig

    return {k: _plain(v) for k, v in as_dict({"stats": StatsConfig}[group]()).items()}


def _recorded(config: Mapping) -> dict:
    """A result's recorded config is one arm's (its arm set, the sequential flag as it ran)."""
    return dict(config)


def find(folder, results=()) -> Declaration:
    """The folder's declaration.json, else the one its results' configs make."""
    folder = Path(folder)
    found = read(folder if folder.is_dir() else folder.parent)
    return found if found is not None else of_results(results)


def differences(old: Declaration, new: Declaration) -> list:
    a, b = old.to_dict(), new.to_dict()
    return [f"{k} {a.get(k)!r} -> {b.get(k)!r}" for k in {**a, **b}
            if a.get(k) != b.get(k) and k not in ("departures", "declared_after")]


def _margin_words(m) -> str:
    return "none" if m is None else ("auto" if m == "auto" else f"{m:g}")


def _undeclared_text(name: str, metrics) -> str:
    listed = ", ".join(metrics) or "none"
    return (f"The metric {name!r} has no declared direction (declared metrics: {listed}), and a direction is "
            f"never guessed from a name. Declare it in the experiment's config: stats.metrics.{name}=max (higher is better) or "
            f"stats.metrics.{name}=min (lower is better), or {{direction: min, unit: ...}}; for one analysis, "
            f"pass --direction max|min to python -m harness.analyze.")
