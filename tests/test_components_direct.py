"""A flat ``_target_`` node is called directly (no Hydra deep copy and merge per call: ~5 ms each,
1.3% of the default experiment's run), with exactly the arguments ``hydra.utils.instantiate(node,
_convert_="all", **call_site)`` passes; anything else still goes through Hydra."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate as hydra_instantiate
from omegaconf import OmegaConf
from omegaconf.errors import MissingMandatoryValue

from harness.training import components
from harness.training.components import instantiate

TARGET = "tests.test_components_direct.echo"


def echo(**kwargs):
    return kwargs


class Token:
    """A call-site object Hydra passes through untouched (an optimizer's params, a model)."""


NODES = [
    {"_target_": TARGET, "lr": 0.1, "betas": [0.9, 0.99], "name": "x", "extra": {"a": 1, "b": [1, 2]}},
    {"_target_": TARGET, "lr": "${.base}", "base": 0.5, "none": None, "flag": True},
    {"_target_": TARGET},
    {"_target_": TARGET, "inner": {"_target_": TARGET, "k": 1}},  # nested: Hydra builds it
    {"_target_": TARGET, "_partial_": False, "k": 2},  # a reserved key: Hydra
    {"_target_": TARGET, "items": [{"_target_": TARGET, "k": 3}, 4]},
]


def _same(a, b):
    """Equal values with the same container types all the way down (plain list/dict, not ListConfig)."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        assert a is b or a == b


CASES = [(plain, True) for plain in NODES] + [(plain, False) for plain in NODES if "${" not in str(plain)]


@pytest.mark.parametrize("plain,as_config", CASES)  # as a DictConfig, and as a plain dict (no interpolations there)
def test_the_direct_call_passes_what_hydra_passes(plain, as_config):
    token = Token()
    node = OmegaConf.create(plain) if as_config else plain
    ours = instantiate(node, token=token, size=3)
    hydras = hydra_instantiate(node, _convert_="all", token=token, size=3)
    _same(ours, hydras)
    assert ours["token"] is token  # the call-site object itself, not a copy


def test_a_flat_config_node_is_called_without_hydra(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("Hydra's instantiate was called for a flat node")

    monkeypatch.setattr("hydra.utils.instantiate", refuse)
    node = OmegaConf.create(NODES[0])
    assert components._direct_call(node, {}) is not None
    assert instantiate(node)["betas"] == [0.9, 0.99]


def test_a_missing_value_is_refused_as_hydra_refuses_it():
    node = OmegaConf.create({"_target_": TARGET, "lr": "???"})
    with pytest.raises(MissingMandatoryValue):
        hydra_instantiate(node, _convert_="all")
    with pytest.raises(MissingMandatoryValue):
        instantiate(node)


def test_the_targets_own_error_reaches_the_caller():
    node = OmegaConf.create({"_target_": "harness.builtin.losses.ClassificationLoss", "label_smoothing": 2.0})
    with pytest.raises(ValueError, match="label_smoothing=2.0 must be in"):
        instantiate(node)
