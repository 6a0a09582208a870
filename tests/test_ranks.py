"""A unit that spans processes: a command arm started through torchrun, each rank attached.

On the CPU with gloo, 2 ranks on 2 cores, each rank one thread (tests/command_scripts/ddp_tiny.py):
the unit's proofs cover both ranks' shards and compare the replicas' parameters; 1 and 2 ranks are
different identities, refused naming the world; a rank killed, raising or hung in a collective is
named, leaves no process behind, and rerunning resumes."""

from __future__ import annotations

import signal

import pytest

import harness
from harness.results import read_json

from .conftest import REPO, TEST_CONF

psutil = pytest.importorskip("psutil")

SCRIPT = REPO / "tests" / "command_scripts" / "ddp_tiny.py"
BASE = ["+experiment=command_toy", "logger=none", "progress=false", "workers=1", "determinism.threads=1",
        "stats.metrics={score: min}", "ab.seeds=[0]"]


def _torchrun(nproc: int) -> str:
    return f"python -m torch.distributed.run --standalone --nproc_per_node={nproc} {SCRIPT}"


def _result(folder, arm, seed=0):
    return read_json(folder / "runs" / f"seed={seed}" / f"arm={arm}" / "result.json")


def _left_behind(tmp_path) -> list:
    """The processes still running whose command line names this test's folder (the ranks get it
    through --out)."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if str(tmp_path) in " ".join(p.info["cmdline"] or []) and p.status() != psutil.STATUS_ZOMBIE:
                found.append((p.info["pid"], p.info["cmdline"]))
        except psutil.Error:
            pass
    return found


@pytest.mark.slow
def test_a_torchrun_unit_proves_both_shards_and_catches_replicas_that_differ(tmp_path):
    out = tmp_path / "out"
    res = harness.run([*BASE, f"train.cmd='{_torchrun(2)}'", "+train.args.break_sync=false",
                       "ab.factor=train.args.break_sync", "ab.arms={synced: false, broken: true}",
                       "ab.seeds=[0,1,2]", "repro.certificate=true"],
                      out_dir=out, config_dir=TEST_CONF, verbose=False)
    synced, broken = _result(out, "synced"), _result(out, "broken")
    assert synced["status"] == broken["status"] == "completed", (synced.get("error"), broken.get("error"))
    fp = synced["fingerprints"]
    shards = fp["ranks"]
    assert [s["rank"] for s in shards] == [0, 1] and all(s["batches"] == 6 for s in shards)
    assert shards[0]["data_order"] != shards[1]["data_order"]  # each rank read its own share
    assert fp["batches"] == 12 and fp["data_order"] not in (None, shards[0]["data_order"], shards[1]["data_order"])
    assert fp["replicas"] == {"equal": True, "ranks": 2, "says": "equal across 2 ranks"}
    assert synced["env"]["world"] == {"world_size": 2, "backend": "gloo"}
    assert res.verdict and res.analysis["pairing"]  # the comparison was analysed
    # rank 1 nudged its weights after its 2nd step: the replica check names it and the step
    replicas = broken["fingerprints"]["replicas"]
    assert replicas["equal"] is False and replicas["differ"] == [{"rank": 1, "from": "from step 2 (of 6)"}]
    assert "rank 1's parameters differ from rank 0's from step 2" in replicas["says"]
    certificate = read_json(out / "certificate.json")  # the multi-process unit rerun, its bits compared
    assert certificate["reproducible"] is True and certificate["line"].startswith("bitwise reproducible: yes")


@pytest.mark.slow
def test_one_and_two_ranks_are_different_identities_and_the_refusal_names_the_world(tmp_path):
    out = tmp_path / "out"
    harness.run([*BASE, "ab.factor=train.cmd", f"ab.arms={{one: '{_torchrun(1)}', two: '{_torchrun(2)}'}}",
                 "repro.certificate=false"], out_dir=out, config_dir=TEST_CONF, verbose=False)
    with pytest.raises(harness.HarnessError) as refused:
        harness.analyze_folder(out, write=False)
    text = str(refused.value)
    assert "processes per run: world size and backend (env.world)" in text, text
    assert "2 processes (gloo) for arm two" in text and "1 process for arm one" in text, text
    assert _result(out, "one")["status"] == _result(out, "two")["status"] == "completed"  # nothing deleted


@pytest.mark.slow
def test_a_rank_that_dies_or_hangs_is_named_leaves_no_process_and_a_rerun_resumes(tmp_path):
    once = tmp_path / "once"
    overrides = [*BASE, f"train.cmd='{_torchrun(2)}'",
                 f"+train.args.fail_once={once}", "+train.args.fail_rank=1", "+train.args.how=kill",
                 "+train.args.pg_timeout=10", "ab.factor=train.args.how", "ab.arms={killed: kill, raised: raise, hung: hang}",
                 "repro.certificate=false"]
    for how in ("kill", "raise", "hang"):
        once.with_name(f"once.{how}").write_text("")
    out = tmp_path / "out"
    try:
        harness.run(overrides, out_dir=out, config_dir=TEST_CONF, verbose=False)
    except harness.HarnessError:
        pass  # nothing to analyse: both units failed
    killed, raised = _result(out, "killed"), _result(out, "raised")
    assert killed["status"] == raised["status"] == "failed"
    assert "rank 1 failed first: it was killed by SIGKILL" in killed["error"]["message"], killed["error"]["message"]
    assert "rank 1 failed first" in raised["error"]["message"]
    assert "it raised ValueError: rank 1 broke on purpose" in raised["error"]["message"], raised["error"]["message"]
    # rank 1 never reached the next all-reduce: rank 0 waited past the process group's timeout
    hung = _result(out, "hung")["error"]["message"]
    assert "rank 0 failed first" in hung and "waited in a collective past the process group's timeout" in hung, hung
    assert _left_behind(tmp_path) == []  # torchrun and both ranks are gone
    harness.run(overrides, out_dir=out, config_dir=TEST_CONF, verbose=False)  # the failed units rerun
    assert all(_result(out, arm)["status"] == "completed" for arm in ("killed", "raised", "hung"))


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_an_interrupted_or_killed_harness_leaves_no_rank_of_a_black_box_torchrun(tmp_path, sig):
    # torchrun starts each rank in a session of its own: the unit's process group does not hold them
    from .test_process_tree import _alive, _end_leftovers, _of_run, _pid_in, _start, _until

    out = tmp_path / "run"
    script = REPO / "tests" / "command_scripts" / "hang_ranks.py"
    proc = _start(["+experiment=command_toy", "logger=none", "progress=false", "determinism.threads=1", "workers=1",
                   f"train.cmd='{_torchrun(2).replace(str(SCRIPT), str(script))}'", "seed=0", "arm=A"], out)
    try:
        unit = out / "runs" / "seed=0" / "arm=A"
        _until(lambda: all(_pid_in(unit / f"rank-{r}.pid") for r in (0, 1)), "both ranks to run")
        ranks = [_pid_in(unit / f"rank-{r}.pid") for r in (0, 1)]
        proc.send_signal(sig)
        proc.communicate(timeout=120)
        _until(lambda: not any(_alive(p) for p in ranks), "both ranks to end")
        assert not _of_run(out)
    finally:
        proc.kill()
        _end_leftovers(out)


@pytest.mark.parametrize("argv, words", [
    (["torchrun", "--nproc_per_node=2", "train.py", "--lr", "1"], "2 processes (backend unknown)"),
    (["python", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4", "train.py"],
     "4 processes (backend unknown)"),
    (["torchrun", "--nnodes=2", "--nproc_per_node=2", "train.py"], "4 processes (backend unknown)"),
    (["torchrun", "--nproc_per_node=gpu", "train.py"], "torchrun --nproc_per_node=gpu --nnodes=1 (size unknown)"),
    (["torchrun", "train.py"], None),  # one process: as a script run alone
    (["python", "train.py", "--nproc_per_node=2"], None),  # not a launcher
])
def test_a_torchrun_command_that_reports_nothing_is_identified_by_the_world_it_asks_for(argv, words):
    from harness.integrations.ranks import launched_world, world_words

    assert world_words(launched_world(argv)) == words


def test_the_world_records_the_backend_and_the_nccl_settings_that_decide_the_bits():
    from harness.integrations.ranks import World, world_block, world_words

    env = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_DEBUG": "INFO", "PATH": "/bin"}
    block = world_block(World(rank=0, size=2, local_rank=0), "nccl", env)
    assert block == {"world_size": 2, "backend": "nccl", "nccl": {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}}
    assert world_words(block) == "2 processes (nccl; NCCL_ALGO=Ring; NCCL_PROTO=Simple)"


def _rank_record(params, data_order="d0", init="i0"):
    return {"fingerprints": {"init": init, "data_order": data_order, "final": params[-1], "batches": len(params),
                             "steps": {"loss": ["l"] * len(params), "params": list(params)}}}


def test_the_ranks_records_make_one_and_a_rank_without_one_is_named(tmp_path):
    import json

    from harness.integrations.ranks import RanksFailed, combine, rank_record

    head = {**_rank_record(["a", "b", "c"]), "world": {"world_size": 3, "backend": "gloo"}, "metrics": {"loss": 1.0}}
    rank_record(tmp_path, 1).write_text(json.dumps(_rank_record(["a", "b", "c"], data_order="d1")))
    with pytest.raises(RanksFailed, match=r"rank 2 of 3 wrote no record"):
        combine(head, tmp_path)
    rank_record(tmp_path, 2).write_text(json.dumps(_rank_record(["a", "x", "y", "z"], data_order="d2")))
    fp = combine(head, tmp_path)["fingerprints"]
    assert fp["batches"] == 3 + 3 + 4 and [r["data_order"] for r in fp["ranks"]] == ["d0", "d1", "d2"]
    assert fp["replicas"]["equal"] is False and fp["replicas"]["differ"] == [{"rank": 2, "from": "from step 2 (of 3)"}]
    rank_record(tmp_path, 2).write_text(json.dumps(_rank_record(["a", "b", "c"], data_order="d2")))
    ordered = combine(head, tmp_path)["fingerprints"]
    assert ordered["replicas"]["says"] == "equal across 3 ranks"
    # the same shards read by other ranks are another data order: the digest keeps the rank order
    rank_record(tmp_path, 2).write_text(json.dumps(_rank_record(["a", "b", "c"], data_order="d1")))
    rank_record(tmp_path, 1).write_text(json.dumps(_rank_record(["a", "b", "c"], data_order="d2")))
    swapped = combine(head, tmp_path)["fingerprints"]
    assert swapped["data_order"] != ordered["data_order"] and swapped["batches"] == ordered["batches"]


def test_each_rank_reads_its_share_of_the_seeds_order():
    import torch

    from harness.integrations.ranks.shards import ShardedBatches

    def gen():
        return torch.Generator().manual_seed(0)

    epoch = torch.randperm(10, generator=gen()).tolist()
    padded = epoch + epoch[:2]  # 10 examples, 3 ranks: 4 each, padded with the epoch's head
    shares = []
    for rank in range(3):
        sampler = ShardedBatches(10, 3, gen(), rank=rank, size=3)
        batches = list(sampler)
        assert len(sampler) == len(batches) == 2  # 4 indices in batches of 3: 3 + 1
        shares.append(torch.cat(batches).tolist())
    assert shares == [padded[rank::3] for rank in range(3)]
    assert sorted(set(sum(shares, []))) == list(range(10))


def test_a_script_run_by_bare_torchrun_reads_the_same_share_as_under_the_harness(monkeypatch):
    """attach() on its own (no harness) in a rank of torchrun: run.loader shards the data as the
    harness's unit would, so the script trains the same way with and without the harness."""
    import torch

    import harness
    from harness import TensorBatches
    from harness.integrations.attach import AttachedRun
    from harness.integrations.ranks.records import World

    monkeypatch.delenv("HARNESS_RUN_DIR", raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    x = torch.arange(10.0).unsqueeze(1)

    def share(run):
        return torch.cat([xb for xb, _ in run.loader(TensorBatches(x, x), batch_size=2)]).flatten().long().tolist()

    seen = {}
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("LOCAL_RANK", str(rank))
        run = harness.attach(seed=3)
        assert not run.attached
        seen[rank] = share(run)
        assert seen[rank] == share(AttachedRun(3, world=World(rank, 2, rank)))  # the harness's rank's Run
    assert len(seen[0]) == len(seen[1]) == 5 and sorted(seen[0] + seen[1]) == list(range(10))
