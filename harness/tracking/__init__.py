"""The tracking room: every run and every verdict in wandb, offline by default.

Owns: tracker.py (the only importer of wandb), content.py (what a run or an analysis becomes in
wandb: rows, tables, summary), options.py (settings, groups, WANDB_* precedence, OnlineGate),
closing.py (what the tracker says when it closes: runs not logged, the one ``wandb sync`` hint),
shared.py (a unit's run opened before it trains, for a trainer's own wandb logger to log into),
notices.py (a trainer's logger turned off, said once for all units; the project its logger names). May
import: harness.results, and harness.integrations.wandb_hook (where the tracker offers that opener). Computes no statistics: it logs the analysis dict as it is.

tracker.py imports wandb only inside functions: with ``logger=none`` the tracker is a NullTracker
and wandb is never imported. Files on disk are the source of truth; wandb is a view of them, so
nothing here may stop an experiment or lose a result: every public method catches wandb's failures
and turns them into warnings that ``close()`` returns. Runs are logged after they finish
(experiment/units.py calls ``log_run`` after writing the result), so wandb never runs while a model
trains, except into a run shared.py opens for a trainer's own wandb logger.

What is logged, which settings win (config > ``WANDB_*`` > our default) and what a failure to go
online does (``OnlineGate``: a sweep pays the timeout once): docs/wandb.md.
"""

from harness.tracking.tracker import NullTracker, WandbTracker, open_tracker  # noqa: F401,E402 - the room's public names (wandb is imported lazily)
from harness.tracking.options import SWEEP_ENV, TrackingConfigError  # noqa: F401,E402
