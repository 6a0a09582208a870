"""The config read once (issue 23, ask 2): the composed config becomes the declaration and the plan at
the entry point, and everything below takes those typed objects.

One tiny experiment runs through harness.run under a profiler that records every harness function
called with a config (a DictConfig holding ``ab`` and ``stats``): the root config (the object
``execute`` receives) and the arm configs (copies with ``arm`` set). Asserted: the root config
reaches only the entry functions listed below; followed from ``execute``, the rooms it visits are
each visited at most twice; an arm config reaches only what builds it, checks it, runs it and trains
it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import harness
import pytest
from omegaconf import DictConfig

pytestmark = pytest.mark.slow  # every test here spawns the harness or takes seconds

ROOT = str(Path(harness.__file__).resolve().parent) + "/"

# Where the root config may go. Each is an entry: it reads the composed config to make a typed
# object (or a check of it) that the code below takes instead.
ROOT_ENTRIES = {
    # harness.run finishes composing (arms replaced whole, a factor override refused): before execute
    ("config.compose", "replace_whole_arms"), ("config.compose", "factor_override_problem"),
    # while Hydra composes: the folder's name leaves out an override the composed config already held
    ("config.compose", "not_in_name"), ("config.unchanged", "unchanged_in_hydra"),
    # the invocation's entry point
    ("experiment.execute", "execute"), ("experiment.execute", "_execute"),  # (its body, in the code arms' session)
    # every value checked before torch, then the full preflight (imports, components, the data)
    ("config.preflight", "preflight_cheap"), ("config.preflight", "check_settings"),
    ("config.preflight", "preflight"), ("config.preflight", "check_train_fn"),
    ("experiment.plan", "preflight_or_refuse"), ("experiment.plan", "check_unless_done"),  # (unless all done)
    # what is analysed
    ("config.declaration", "from_config"),
    # determinism.threads=auto resolved into the config before anything hashes it (and the workers)
    ("experiment.units", "pin_threads"),  # (run_experiment's, when called directly)
    ("training.threads", "resolve_threads"),
    ("training.threads", "units_of"), ("training.threads", "uses_gpu"),
    ("training.threads", "processes_of"),  # a unit of train.nproc processes takes that many worker slots
    ("integrations.ranks.nproc_spec", "ranks_problem"),  # train.nproc checked with the settings
    # ab.factor=code: each arm's revision snapshotted at launch, and the preflight run in each snapshot
    ("experiment.code_arms", "prepare"), ("experiment.code_arms", "preflight_each"),
    # the tracker reads its own options (logger.*) when it opens: its entry
    ("tracking.tracker", "open_tracker"), ("tracking.options", "_select"),
    # what is run: the plan, with each arm's config (arms.py makes them)
    ("experiment.plan", "from_config"), ("experiment.plan", "_owns_certificate"),
    ("experiment.arms", "arm_configs"), ("experiment.arms", "check_ab"),
    ("experiment.identity", "plain"),  # the plain record of the config, for experiment.json
    # (not reached here) ab.conditions composes each condition's config from the overrides: each
    # becomes its own plan in run_conditions, every plan checked before any is run
    ("experiment.conditions", "condition_configs"),
}

# Where an arm config may go: made and described by the plan, checked by the preflight, and then the
# unit runner (resume decision, identity, the run, the certificate's rerun) and the training code.
ARM_PLACES = {"experiment.plan", "experiment.arms", "config.preflight", "experiment.units", "experiment.runner",
              "experiment.identity", "experiment.resume", "training", "builtin",
              "integrations",  # a way in (the command arm) is the unit's training code
              "experiment.code_arms",  # the runner runs a code arm inside its revision's snapshot
              "config.declaration"}  # the metrics the arm declares, handed to its Run (declared_metrics)


def _module(filename: str) -> str:
    return filename[len(ROOT):-3].replace("/", ".")


def _trace(overrides: list[str], out_dir: Path):
    root: list = []  # the config execute receives (its identity, not its content: copies are arms)
    calls: list[tuple[str, str, str]] = []  # (kind, module, function), in call order

    def prof(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if not code.co_filename.startswith(ROOT) or "/conf/" in code.co_filename:
            return
        mod = _module(code.co_filename)
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        for v in (frame.f_locals.get(n) for n in names):
            if not (isinstance(v, DictConfig) and "ab" in v and "stats" in v):
                continue
            if (mod, code.co_name) == ("experiment.execute", "execute") and not root:
                root.append(v)
            if root and v is root[0] or not root and v.get("arm") is None:
                calls.append(("root", mod, code.co_name))
            elif v.get("arm") is not None:
                calls.append(("arm", mod, code.co_name))

    sys.setprofile(prof)
    try:
        harness.run(overrides, out_dir=out_dir)
    finally:
        sys.setprofile(None)
    return calls


def _rooms(calls) -> list[str]:
    """The rooms the root config visits from execute on, a room once per stay."""
    seq: list[str] = []
    started = False
    for kind, mod, fn in calls:
        started = started or (mod, fn) == ("experiment.execute", "execute")
        if kind != "root" or not started:
            continue
        room = mod.split(".")[0]
        if not seq or seq[-1] != room:
            seq.append(room)
    return seq


def test_the_root_config_reaches_only_the_entry_points_and_arm_configs_only_the_runner(tmp_path):
    calls = _trace(["+experiment=loss_ab", "ab.seeds=[0,1]", "train.max_steps=10", "data.train_limit=128",
                    "determinism.threads=1", "workers=1", "logger=none", "progress=false"], tmp_path / "out")
    root = {(m, f) for kind, m, f in calls if kind == "root"}
    assert ("experiment.execute", "execute") in root
    assert root - ROOT_ENTRIES == set(), "the root config went below the entry points"

    rooms = _rooms(calls)
    assert all(rooms.count(r) <= 2 for r in rooms), f"rooms visited with the root config: {' > '.join(rooms)}"

    arm = {(m, f) for kind, m, f in calls if kind == "arm"}
    assert ("builtin.loop", "train") in arm and ("experiment.runner", "run_one") in arm  # it was followed
    astray = {(m, f) for m, f in arm if m not in ARM_PLACES and m.split(".")[0] not in ARM_PLACES}
    assert astray == set(), "an arm config went somewhere else than the runner and the training code"
