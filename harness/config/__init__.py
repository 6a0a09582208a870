"""The config room: what an experiment says, checked before anything runs.

Owns: schema.py (the dataclass schema in Hydra's ConfigStore: a typo fails at compose time),
compose.py (composing as ``python -m harness`` does, and the overrides' rules; unchanged.py, an
override at the value the config already has, which names no folder), declaration.py (the
typed declaration every tool reads; superseded.py, a changed declaration kept in superseded/; metric_spec.py, one declared metric; condition_rules.py, what
ab.conditions may set; fdr_spec.py, stats.fdr checked; ledger_spec.py, the ledger's address (a PostgreSQL URL
without a password, or a file) and the masking of a URL's password; sequential_design.py, the sequential design), preflight.py (every value, import and the data, checked before the first run).
The shipped yaml files are in harness/conf/.

May import: harness.training (the ``_target_`` door, the Run's dataset cache), harness.stats (the
sequential design), harness.results. Never reads results to decide what was declared.
"""

from harness.config.compose import (  # noqa: F401 - the public names of the room
    CONFIG_MODULE, compose, compose_error, factor_override_problem, register_configs, replace_whole_arms,
    typed_overrides)
from harness.config.schema import Config, Device, Direction, Mode, Precision, StatsConfig  # noqa: F401
