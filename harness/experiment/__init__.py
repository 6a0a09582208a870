"""The experiment room: every (seed, arm) run, resumed, paired and certified; sweeps and sequential runs.

Owns: execute.py (one invocation, Hydra-free, and the exits a user sees), plan.py (the Plan: what one
invocation runs, read from the composed config once at the entry point; below it, only the plan, the
declaration and each arm's read-only config travel), arms.py (each arm's config and the
single-factor guard), code_arms.py (ab.factor=code: arms that name git revisions or WORKTREE, their
snapshots under the results and their code identity), units.py (run the units, write result files, check the pairing, the
certificate), rerun.py (the certificate's rerun in a fresh process, on a GPU), runner.py (one unit: the training function through the Run), resume.py and
identity.py (what may be skipped: config and code identity), adaptive/ (seeds in batches until
settled: the sequential mode and the race of K configurations, one loop on either launcher),
conditions.py (one A/B under every declared condition of ab.conditions, each in condition=NAME/),
callbacks.py and precheck.py (the Hydra callbacks of a sweep), refused_files.py (what a refused run
may remove or puts back in its folder: nothing once a unit started), progress.py (the progress
line), parallel/ (an invocation's units at once on long-lived worker processes that end with their
launcher).

May import: harness.analysis and harness.tracking (to analyse and log what ran), harness.config,
harness.training, harness.stats, harness.results. Computes no statistics itself.
"""
