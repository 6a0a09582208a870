"""train.rank_timeout_s: a rank that never reaches a collective stops the unit once the others have
waited that long in it (the process group's timeout), named, well before train.timeout_s; for a
train.nproc unit (the harness opens the group) and for a torchrun command arm (the script opens it
with ``harness.rank_timeout()``). A bad value is refused before anything is written."""

from __future__ import annotations

import pytest

import harness
from harness.results import read_json

from .conftest import REPO, TEST_CONF
from .test_ranks import _left_behind  # the processes whose command line names a folder

SCRIPT = REPO / "tests" / "command_scripts" / "ddp_tiny.py"
NPROC = ["+experiment=command_toy", "train.cmd=null", "train.args={}", "train.metrics_from=null",
         "train.fn=tests.nproc_fns.tiny_ddp", "logger=none", "progress=false", "workers=1",
         "determinism.threads=1", "stats.metric=score", "stats.metrics={score: min}", "ab.seeds=[0]",
         "repro.certificate=false"]
# the unit's wall limit, far above the ranks' timeout: the unit must end by the latter
LIMITS = ["train.rank_timeout_s=15", "train.timeout_s=3000"]


def _message(out, arm):
    result = read_json(out / "runs" / "seed=0" / f"arm={arm}" / "result.json")
    assert result["status"] == "failed", result
    return result["error"]["message"]


def _says_the_rank_timeout_stopped_it(message: str) -> None:
    assert "rank 0 failed first" in message, message
    assert "waited in a collective past train.rank_timeout_s=15 s" in message, message
    assert "rank 1 never reached that collective" in message, message
    assert "train.timeout_s" not in message, message


@pytest.mark.parametrize("value", ["0", "-3", "ten", "true"])
def test_a_bad_rank_timeout_is_refused_naming_the_key(tmp_path, value):
    with pytest.raises(harness.HarnessError) as refused:
        harness.run([*NPROC, "train.nproc=2", f"train.rank_timeout_s={value}"], out_dir=tmp_path / "out",
                    config_dir=TEST_CONF, verbose=False)
    text = str(refused.value)
    assert "train.rank_timeout_s=" in text and "is not allowed: give a number of seconds > 0, or null" in text, text
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.solo  # 2 ranks: both cores
def test_a_rank_that_skips_an_all_reduce_stops_a_train_nproc_unit_by_the_rank_timeout(tmp_path):
    once = tmp_path / "once"
    once.write_text("")
    out = tmp_path / "out"
    try:
        harness.run([*NPROC, *LIMITS, "train.nproc=2", "+train.kwargs.fail_rank=1", f"+train.kwargs.fail_once={once}",
                     "+train.kwargs.hang=true", "seed=0", "arm=A"], out_dir=out, config_dir=TEST_CONF, verbose=False)
    except harness.HarnessError:
        pass  # nothing to analyse: the unit failed
    _says_the_rank_timeout_stopped_it(_message(out, "A"))
    assert _left_behind(out) == []


@pytest.mark.slow
@pytest.mark.solo
def test_a_rank_that_skips_an_all_reduce_stops_a_torchrun_command_by_the_rank_timeout(tmp_path):
    once = tmp_path / "once"
    once.with_name("once.hang").write_text("")
    out = tmp_path / "out"
    cmd = f"python -m torch.distributed.run --standalone --nproc_per_node=2 {SCRIPT}"
    try:
        harness.run(["+experiment=command_toy", "logger=none", "progress=false", "workers=1", "determinism.threads=1",
                     "stats.metrics={score: min}", "ab.seeds=[0]", "repro.certificate=false", *LIMITS,
                     f"train.cmd='{cmd}'", f"+train.args.fail_once={once}", "+train.args.fail_rank=1",
                     "+train.args.how=hang", "seed=0", "arm=A"], out_dir=out, config_dir=TEST_CONF, verbose=False)
    except harness.HarnessError:
        pass
    _says_the_rank_timeout_stopped_it(_message(out, "A"))
    assert _left_behind(tmp_path) == []


def test_the_timeout_named_is_the_one_the_rank_waited(tmp_path):
    """A torchrun script opens its own group: the message names train.rank_timeout_s only where the
    rank waited that long (gloo says how long), else the script's own timeout."""
    from harness.integrations.process import ending
    from harness.integrations.ranks import failure_words, rank_error

    stderr = "Root Cause (first observed failure):\n[0]:\n  rank      : 0 (local_rank: 0)\n  exitcode  : 1 (pid: 7)\n" + "=" * 40

    def words(name, waited_ms, key):
        folder = tmp_path / name
        folder.mkdir()
        rank_error(folder, 0).write_text(f"RuntimeError: [pair.cc:78] Timed out waiting {waited_ms}ms for recv operation\n")
        return failure_words(stderr, folder, ending, 2, key)

    passed = words("passed", 15000, 15.0)
    assert "past train.rank_timeout_s=15 s (the process group's timeout): rank 1 never reached" in passed, passed
    own = words("own", 10000, 15.0)
    assert "past the process group's timeout (10 s, the script's own: not train.rank_timeout_s=15 s)" in own, own
    unset = words("unset", 1800000, None)
    assert "(1800 s; train.rank_timeout_s is null)" in unset, unset
