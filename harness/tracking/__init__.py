"""The tracking room: every run and every verdict in wandb, offline by default.

Owns: tracker.py (the only importer of wandb), content.py (what a run or an analysis becomes in
wandb: rows, tables, summary), options.py (settings, groups, WANDB_* precedence, OnlineGate),
closing.py (what the tracker says when it closes: runs not logged, the one ``wandb sync`` hint),
shared.py (a unit's run opened before it trains, for a trainer's own wandb logger to log into),
notices.py (a trainer's logger turned off, said once for all units; the project its logger names). May
import: harness.results, and harness.integrations.wandb_hook (where the tracker offers that opener). Computes no statistics: it logs the analysis dict as it is.

tracker.py is the one module that imports wandb, and only inside functions: with ``logger=none`` the
tracker is a NullTracker and wandb is never imported. Files on disk are the source of truth; wandb
is a view of them. Nothing here may stop an experiment or lose a result: every public method
catches wandb's failures and turns them into warnings that ``close()`` returns.

What is logged (one wandb run per (seed, arm), one per results folder for the analysis, all in the
same ``group``):

    run "seed=S arm=A"   job_type = the arm; config = the resolved config + seed, arm, factor_value
                         and the captured environment (env); history: train/loss at every optimizer
                         step (_step = the step, decoded exactly from the float32 bits in the result
                         file), and metrics/<name> at the last step; summary: status, metrics,
                         fingerprints, timing (and error for a failed run, finished with exit code 1)
    run "analysis"       job_type = analysis; one per results folder: its run id is derived from the
                         folder, so a rerun (resume) replaces the offline copy / updates the online run; config = the analysis's settings and per-arm stats; a
                         wandb.Table "comparisons" (one row per comparison) and analysis.png as the
                         image "figure"; the verdict(s) and key numbers in the summary; an artifact
                         "analysis-<experiment>" (type "analysis") holding analysis.json, report.md,
                         analysis.png, certificate.json, experiment.json and every result file
    run "race"           job_type = race; one per race folder (hydra/sweeper=harness_race), replaced on a
                         rerun: a wandb.Table "race" (one row per configuration: the look and seeds
                         it was dropped at, by whom, its difference from that look's leader with the
                         interval), race.png as "figure", the verdict in the summary (race/...)

    run "across conditions"  job_type = across_conditions; an experiment with ab.conditions: config = the
                         declaration; a wandb.Table "conditions" (per arm and condition, the average and
                         the random-effects rows), the forest plot as "figure", and across/<arm>/* (the
                         sentence, estimate, CI, tau and its interval, I^2, prediction, better on k of K)
    run "noise sources"  job_type = noise_sources; python -m harness.noise_sources, one per output folder
                         (log_table_run), replaced on a rerun: the table "noise_sources" (per source:
                         std, interval, share, for the arm and for B - A), noise_sources.png as
                         "figure", the two reading sentences in the summary (reading/...)

Runs are logged after they finish (experiment/units.py calls ``log_run`` after writing the result), so
wandb never runs while a model trains; except where a trainer brings its own wandb logger
(Lightning's WandbLogger, a Hugging Face Trainer's report_to="wandb"): the harness's trainer callback
then asks the tracker to open the unit's run before the trainer starts, the trainer's logger logs
into it, and ``log_run`` adds the unit's record to that same run (shared.py): one run per unit.

Which settings win: a value set in the config (``logger.wandb.*``, e.g. on the command line) >
a ``WANDB_*`` environment variable > our default. ``logger.wandb.mode``, ``.project``, ``.group`` and
``.name`` are null by default, so WANDB_MODE, WANDB_PROJECT, WANDB_RUN_GROUP and WANDB_NAME decide
when set, else offline, "harness", ``<experiment>:<folder name>:<hash of the folder's absolute
path>`` (see ``default_group``) and no prefix; WANDB_JOB_TYPE, when set, replaces our job types. The
quiet, light-weight settings below (no console capture, no system metrics, no pip freeze per run)
are our defaults too: each yields to its WANDB_* variable. The wandb folder is ``<out_dir>/wandb``
(unless WANDB_DIR is set), and WANDB_CACHE_DIR / WANDB_DATA_DIR point inside it while the tracker
is open (unless set), so nothing lands under $HOME.

Failures: if a run cannot be started online (no network, bad credentials, a timeout after
``logger.wandb.init_timeout`` seconds), the tracker warns once and logs this and every later run
offline, ready for ``wandb sync``; it never waits for the timeout twice. Within a sweep the jobs
share that outcome through ``OnlineGate`` (files in ``<sweep root>/wandb/``): one job tries online,
the others wait for its answer, and after a failure they log offline at once, without a warning
of their own; the sweep's own tracker (the analysis, in the launching process) prints the one
``wandb sync`` hint for the whole sweep. If even offline fails, the tracker stops trying, and
``close()`` names every run not logged.
"""

from harness.tracking.tracker import (  # noqa: F401,E402 - the room's public names (wandb is imported lazily)
    SWEEP_ENV, NullTracker, TrackingConfigError, WandbTracker, open_tracker)
