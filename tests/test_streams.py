"""One random stream at a time (issue 31, item 1): ``seeds.<purpose>`` sets a stream's seed apart from
``seed``; unset, every stream derives from the seed exactly as before, with the same identity."""

from __future__ import annotations

import pytest

import harness
from harness import HarnessError
from harness.results import config_digest
from harness.training.rng import PURPOSES, Streams, derive_seed

from .conftest import FAST

ONE = [*FAST, "seed=0", "arm=A", "train.max_steps=3", "data.train_limit=128", "repro.certificate=false"]


def _fingerprints(tmp_path, name, *extra):
    res = harness.run([*ONE, *extra], out_dir=tmp_path / name, verbose=False)
    (r,) = res.results
    assert r["status"] == "completed", r.get("error")
    return r["fingerprints"], r["config_hash"]


def test_unset_streams_derive_from_the_seed_as_before_and_keep_the_identity():
    for seed in (0, 7):
        streams = Streams.from_seed(seed, {})
        assert [streams.derive(p) for p in PURPOSES] == [derive_seed(seed, p) for p in PURPOSES]
        assert streams.derive("noise") == derive_seed(seed, "noise")  # a named run.generator stream too
    config = {"seed": None, "model": {"width": 16}, "seeds": {}}
    assert config_digest(config) == config_digest({k: v for k, v in config.items() if k != "seeds"})
    assert config_digest({**config, "seeds": {"init": None}}) == config_digest(config)
    assert config_digest({**config, "seeds": {"init": 5}}) != config_digest(config)


@pytest.mark.slow
def test_setting_one_stream_moves_its_fingerprint_and_no_other(tmp_path):
    ref, ref_hash = _fingerprints(tmp_path, "ref")
    order, _ = _fingerprints(tmp_path, "order", "+seeds.data_order=99")
    init, init_hash = _fingerprints(tmp_path, "init", "+seeds.init=99")
    assert order["data_order"] != ref["data_order"] and order["init"] == ref["init"]
    assert init["init"] != ref["init"] and init["data_order"] == ref["data_order"]
    assert init_hash != ref_hash  # a stream set apart is another configuration
    same, same_hash = _fingerprints(tmp_path, "same", "+seeds.data_order=0")  # its own seed again: no change
    assert same["final"] == ref["final"] and same["data_order"] == ref["data_order"]


def test_a_stream_seed_that_is_not_an_integer_is_refused_at_compose_time():
    from harness.config import compose

    with pytest.raises(Exception, match="seeds"):
        compose([*ONE, "+seeds.init=abc"])


def test_every_seed_follows_one_rule_a_negative_one_is_refused_before_any_run(tmp_path):
    """seed=-5 is refused; so is a stream's seed and the bootstrap's, in the same words, with nothing written."""
    for bad, key in (("seed=-5", "seed"), ("+seeds.init=-1", "seeds.init"), ("+seeds.noise=-2", "seeds.noise"),
                     ("stats.bootstrap_seed=-3", "stats.bootstrap_seed")):
        overrides = [o for o in ONE if not o.startswith("seed=")] + [bad] + ([] if key == "seed" else ["seed=0"])
        with pytest.raises(HarnessError) as e:
            harness.run(overrides, out_dir=tmp_path / key, verbose=False)
        value = bad.split("=")[1]
        assert f"{key}={value} must be a non-negative integer" in str(e.value), str(e.value)
        assert not (tmp_path / key).exists()
