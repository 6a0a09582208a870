"""One declared metric: its direction, its unit, and whether per-example outcomes back it.

``stats.metrics`` entries are either a direction (``rmse: min``) or a mapping
``{direction: max, unit: pts, examples: true}``; ``metric_spec`` reads one, and names the key and what
is allowed when it cannot. Nothing here is guessed from a metric's name.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Mapping

from harness import HarnessError


DIRECTIONS = ("max", "min")
PERCENT_UNITS = ("pts", "%")  # a per-example metric in these units is 100 x the mean outcome


class DeclarationError(ValueError, HarnessError):
    """The config does not declare an analysable experiment; the message names the key and what is allowed."""


def _v(x):
    return getattr(x, "value", x)


def _plain(x):
    omegaconf = sys.modules.get("omegaconf")  # a DictConfig exists only once omegaconf is imported:
    if omegaconf is not None and omegaconf.OmegaConf.is_config(x):  # harness.analyze need not import it
        return omegaconf.OmegaConf.to_container(x, resolve=True)
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return _v(x)


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(frozen=True)
class MetricSpec:
    """One declared metric: its direction, its unit, and whether per-example outcomes back it."""

    name: str
    direction: str  # "max" (higher is better) or "min"
    unit: str = ""
    examples: bool = False  # the mean of per-example 0/1 outcomes (run.record_examples(..., metric=name))

    @property
    def higher_is_better(self) -> bool:
        return self.direction == "max"

    @property
    def example_scale(self) -> float:
        """The metric = example_scale x the mean of its per-example outcomes."""
        return 100.0 if self.unit in PERCENT_UNITS else 1.0

    @property
    def suffix(self) -> str:
        return f" {self.unit}" if self.unit else ""


def metric_spec(name: str, entry) -> MetricSpec:
    """A ``stats.metrics`` entry (a direction, or {direction, unit, examples}) as a MetricSpec."""
    entry = _plain(entry)
    key = f"stats.metrics.{name}"
    if isinstance(entry, str):
        entry = {"direction": entry}
    if not isinstance(entry, Mapping):
        raise DeclarationError(f"{key}={entry!r} must be a direction (max or min) or a mapping "
                               f"{{direction: max|min, unit: TEXT, examples: true|false}}.")
    unknown = sorted(set(entry) - {"direction", "unit", "examples"})
    if unknown:
        raise DeclarationError(f"{key} has unknown key(s) {', '.join(unknown)}; allowed: direction (max or min), "
                               f"unit (text, e.g. pts), examples (true when run.record_examples records it).")
    direction = str(_v(entry.get("direction")))
    if direction not in DIRECTIONS:
        raise DeclarationError(f"{key}.direction={entry.get('direction')!r} must be max (higher is better) or min "
                               f"(lower is better); it is never guessed from the metric's name.")
    unit = entry.get("unit") or ""
    if not isinstance(unit, str):
        raise DeclarationError(f"{key}.unit={unit!r} must be text (e.g. pts, bpc) or empty.")
    examples = entry.get("examples", False)
    if not isinstance(examples, bool):
        raise DeclarationError(f"{key}.examples={examples!r} must be true or false.")
    if examples and unit not in PERCENT_UNITS:
        # the test-set noise (binomial floor, crossed seeds x examples) is computed in points
        raise DeclarationError(f"{key} declares examples: true with unit {unit!r}: a metric that is the mean of "
                               f"per-example 0/1 outcomes is declared in points (unit: pts, 100 x the mean) or "
                               f"percent (unit: '%'), the scale its test-set noise is computed on.")
    return MetricSpec(str(name), direction, unit, examples)
