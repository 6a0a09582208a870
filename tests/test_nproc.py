"""train.nproc: a train.fn unit the harness starts as N ranks (gloo on the CPU, 2 ranks on 2 cores,
each one thread; tests/nproc_fns.py): the proofs cover both shards and compare the replicas, the
world joins the identity, a killed rank is named and leaves no process, a bad value is refused, and
side by side a unit of N processes takes N worker slots."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness
from harness.results import read_json

from .conftest import TEST_CONF

psutil = pytest.importorskip("psutil")

BASE = ["+experiment=command_toy", "train.cmd=null", "train.args={}", "train.metrics_from=null",
        "train.fn=tests.nproc_fns.tiny_ddp", "logger=none", "progress=false", "workers=1",
        "determinism.threads=1", "stats.metric=score", "stats.metrics={score: min}", "ab.seeds=[0]"]


def _result(folder, arm, seed=0):
    return read_json(folder / "runs" / f"seed={seed}" / f"arm={arm}" / "result.json")


def _left_behind(marker: str) -> list:
    """Ranks or launchers of a train.nproc unit still running whose command line names ``marker``."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            line = " ".join(p.info["cmdline"] or [])
            if marker in line and "harness.integrations.ranks.nproc" in line and p.status() != psutil.STATUS_ZOMBIE:
                found.append((p.info["pid"], line))
        except psutil.Error:
            pass
    return found


@pytest.mark.slow
@pytest.mark.solo  # 2 ranks: both cores
def test_a_two_rank_unit_proves_both_shards_and_catches_replicas_that_differ(tmp_path):
    out = tmp_path / "out"
    res = harness.run([*BASE, "train.nproc=2", "+train.kwargs.break_sync=false", "ab.factor=train.kwargs.break_sync",
                       "ab.arms={synced: false, broken: true}", "repro.certificate=true"],
                      out_dir=out, config_dir=TEST_CONF, verbose=False)
    synced, broken = _result(out, "synced"), _result(out, "broken")
    assert synced["status"] == broken["status"] == "completed", (synced.get("error"), broken.get("error"))
    fp = synced["fingerprints"]
    assert [s["rank"] for s in fp["ranks"]] == [0, 1] and all(s["batches"] == 6 for s in fp["ranks"])
    assert fp["ranks"][0]["data_order"] != fp["ranks"][1]["data_order"]  # each rank read its own share
    assert fp["batches"] == 12 and [s["steps"] for s in fp["ranks"]] == [6, 6]  # 3 steps per epoch on each rank
    assert fp["replicas"] == {"equal": True, "ranks": 2, "says": "equal across 2 ranks"}
    assert synced["env"]["world"] == {"world_size": 2, "backend": "gloo"}
    assert synced["metrics"]["score"] >= 0 and res.results  # rank 0's metrics
    replicas = broken["fingerprints"]["replicas"]
    assert replicas["equal"] is False and replicas["differ"] == [{"rank": 1, "from": "from step 2 (of 6)"}]
    certificate = read_json(out / "certificate.json")  # the 2-rank unit rerun, its bits compared
    assert certificate["reproducible"] is True, certificate
    assert not list((out / "runs").rglob("nproc_unit.pkl")) and not list((out / "runs").rglob("attached*.json"))


@pytest.mark.slow
@pytest.mark.solo
def test_one_and_two_ranks_are_different_identities_and_a_killed_rank_is_named_then_resumed(tmp_path):
    once = tmp_path / "once"
    once.write_text("")
    out = tmp_path / "out"
    overrides = [*BASE, "ab.factor=train.nproc", "ab.arms={one: 1, two: 2}", "ab.seeds=[0]",
                 "+train.kwargs.fail_rank=1", f"+train.kwargs.fail_once={once}", "repro.certificate=false"]
    try:
        harness.run(overrides, out_dir=out, config_dir=TEST_CONF, verbose=False)
    except harness.HarnessError:
        pass  # nothing to analyse: arm two failed
    failed = _result(out, "two")
    assert failed["status"] == "failed"
    message = failed["error"]["message"]
    assert "train.nproc=2" in message and "rank 1 failed first: it was killed by SIGKILL" in message, message
    assert _left_behind(str(out)) == []  # the launcher and rank 0 are gone
    harness.run(overrides, out_dir=out, config_dir=TEST_CONF, verbose=False)  # the failed unit reruns
    one, two = _result(out, "one"), _result(out, "two")
    assert one["status"] == two["status"] == "completed"
    assert "world" not in one["env"] and two["env"]["world"]["world_size"] == 2
    assert one["fingerprints"]["init"] == two["fingerprints"]["init"]  # the same seed's init on every rank


def test_a_bad_nproc_is_refused_naming_the_key(tmp_path):
    for given, words in ((["train.nproc=0"], "train.nproc=0 is not allowed: give an integer >= 1"),
                         (["train.nproc=two"], "train.nproc='two' is not allowed"),
                         (["train.nproc=2", "train.cmd='python x.py'"], "is set with train.cmd: a command starts its own ranks")):
        overrides = [*BASE, *given]
        with pytest.raises(harness.HarnessError) as refused:
            harness.run(overrides, out_dir=tmp_path / "out", config_dir=TEST_CONF, verbose=False)
        assert words in str(refused.value), str(refused.value)
        assert not (tmp_path / "out").exists()


def test_a_unit_of_n_processes_takes_n_worker_slots():
    from harness.training.threads import Load, choose_threads

    quiet = Load(cores=4, busy=0, runnable=0)
    assert choose_threads("auto", quiet, units=6).workers == 4  # one process per unit: 4 side by side
    two = choose_threads("auto", quiet, units=6, nproc=2)
    assert (two.workers, two.threads) == (2, 1) and "train.nproc=2" in two.why
    alone = choose_threads("auto", quiet, units=1, nproc=2)
    assert (alone.workers, alone.threads) == (1, 2)  # 2 ranks x 2 threads on 4 free cores
    asked = choose_threads(1, quiet, units=6, workers=4, nproc=2)
    assert asked.workers == 2 and "workers=4 slots hold 2 unit(s)" in asked.why
    busy = choose_threads(1, Load(cores=2, busy=1, runnable=1), units=6, nproc=2)
    assert busy.workers == 1 and busy.warning and "ranks wait for each other" in busy.warning


def test_the_copy_a_trainer_starts_knows_its_rank_and_the_launcher_starts_the_rank_module():
    """In-process (the fast tier): Lightning's started copy of the script (WORLD_SIZE and LOCAL_RANK,
    no RANK) is rank LOCAL_RANK on one node; a launcher that set RANK, another node, or a rank outside
    the world is not read as one; the launcher's command runs the rank module, which imports."""
    import importlib

    from harness.integrations.ranks import nproc_launch, trainer_ranks

    world = trainer_ranks.child_world({"WORLD_SIZE": "2", "LOCAL_RANK": "1"})
    assert (world.rank, world.size, world.local_rank) == (1, 2, 1)
    assert trainer_ranks.child_world({"WORLD_SIZE": "2", "LOCAL_RANK": "1", "RANK": "1"}) is None
    assert trainer_ranks.child_world({"WORLD_SIZE": "2", "LOCAL_RANK": "1", "NODE_RANK": "1"}) is None
    assert trainer_ranks.child_world({"WORLD_SIZE": "2", "LOCAL_RANK": "2"}) is None
    argv = nproc_launch.launcher_argv(2, Path("unit.pkl"))
    assert argv[1:3] == ["-m", "torch.distributed.run"] and "--nproc_per_node=2" in argv
    assert argv[-3:] == ["-m", nproc_launch.RANK_MODULE, "unit.pkl"]
    assert callable(importlib.import_module(nproc_launch.RANK_MODULE).main)
