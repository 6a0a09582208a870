"""The analysis's fast paths give what the plain computation gives, to the bit.

Analysing 10,000 results must take seconds (scripts/bench_analyze.py), so a few per-result steps
take shortcuts: the metric a per-example record gives is a count over the size, and the caches of
config hashes and identities are keyed by unsorted bytes; and python -m harness.analyze computes
the statistics in a second process, which imports scipy while the results are read. Each is
checked here against the plain computation it replaces.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from harness import results as results_io
from harness.analysis.identity import run_identity
from harness.analysis import example_records
from harness.config.metric_spec import metric_spec
from tests import _results_factory as F


def test_a_records_value_is_numpys_mean_of_its_outcomes_to_the_bit():
    rng = np.random.default_rng(7)
    sizes = [1, 2, 3, 7, 8, 9, 360, 450, 1000, 10_000, 12_345]
    for spec in (metric_spec("test_accuracy", {"direction": "max", "unit": "pts", "examples": True}),
                 metric_spec("hit_rate", {"direction": "max", "unit": "%", "examples": True})):
        for n in sizes:
            for p in (0.0, 0.03, 0.5, 0.975, 1.0):
                correct = rng.random(n) < p
                record = results_io.pack_examples(correct, metric=spec.name)
                value, outcomes = example_records.record_value(record, spec)
                assert np.array_equal(outcomes, correct) and outcomes.dtype == bool
                plain = spec.example_scale * float(np.asarray(correct, dtype=bool).mean())
                assert value == plain, (spec.name, n, p, value, plain)
                assert isinstance(value, float)


def test_a_records_mean_from_its_packed_bits_is_record_value_to_the_bit():
    """record_mean counts the 1 bits of the packed record instead of unpacking it; outcomes
    unpacks many records at once: both give what record_value and np.array of each record give,
    also for records with spare bits, short or long bytes, mixed sizes and no outcomes."""
    import base64

    rng = np.random.default_rng(11)
    spec = metric_spec("test_accuracy", {"direction": "max", "unit": "pts", "examples": True})
    records = []
    for n in (1, 2, 7, 8, 9, 450, 1000, 12_345):
        for p in (0.0, 0.5, 0.975, 1.0):
            records.append(results_io.pack_examples(rng.random(n) < p, metric=spec.name))
    # spare 1 bits past n, too few bytes (unpacked as zeros), too many bytes
    records.append({"metric": spec.name, "n": 3, "correct": base64.b64encode(b"\xff").decode()})
    records.append({"metric": spec.name, "n": 20, "correct": base64.b64encode(b"\xff").decode()})
    records.append({"metric": spec.name, "n": 9, "correct": base64.b64encode(b"\xff\xff\xff\xff").decode()})
    records.append({"metric": spec.name, "n": 0, "correct": ""})
    for record in records:
        value = example_records.record_value(record, spec)[0]
        mean = example_records.record_mean(record, spec)
        assert (mean == value or (np.isnan(mean) and np.isnan(value))) and isinstance(mean, float), record
    same = [results_io.pack_examples(rng.random(450) < 0.9, metric=spec.name) for _ in range(30)]
    nine, twenty = (results_io.pack_examples(rng.random(n) < 0.5, metric=spec.name) for n in (9, 20))
    for group in (same, same[:1], records[:4], [nine, records[-2]], [records[-3], twenty], []):
        plain = np.array([results_io.unpack_examples(r) for r in group])
        got = example_records.outcomes(group)
        assert got.dtype == plain.dtype and got.shape == plain.shape and np.array_equal(got, plain)


def _reordered(mapping: dict) -> dict:
    """The same content with the keys in reverse order (not nested: the order of ``ab.arms`` is
    meaningful, its first arm is the baseline)."""
    return {k: mapping[k] for k in reversed(list(mapping))}


def test_configs_and_environments_in_another_key_order_are_the_same_identity():
    """The hash and identity caches key by unsorted bytes (a cache miss, not a new identity): a
    config or environment written in another key order gets the same hashes and identity, and an
    analysis of both orders mixed is one identity with the same numbers."""
    run_identity._DIGESTS.clear()
    run_identity._IDENTITIES.clear()
    items = F.make_results(F.accuracies(8, shift=0.4))
    mixed = copy.deepcopy(items)
    for r in mixed[1::2]:
        r["config"] = _reordered(r["config"])
        r["env"] = _reordered(r["env"])
    for plain, other in zip(copy.deepcopy(items), mixed):
        assert run_identity.hashes(other) == run_identity.hashes(plain)
        assert run_identity.identity(other) == run_identity.identity(plain)
    from harness.analysis.analyze import analyze

    a = analyze(copy.deepcopy(items), bootstrap_resamples=999)
    b = analyze(mixed, bootstrap_resamples=999)
    assert b["identity"]["consistent"] is True and len(b["identity"]["groups"]) == 1
    assert b["comparisons"] == a["comparisons"] and b["identity"]["inputs_digest"] == a["identity"]["inputs_digest"]


def test_a_changed_config_is_still_caught_behind_the_cache():
    """A config that differs in one value outside the factor is another base_hash even after the
    cache has seen the original: the cache never answers for content it was not given."""
    items = F.make_results(F.accuracies(6, shift=0.4))
    for r in items:
        run_identity.hashes(r)
    edited = copy.deepcopy(items[0])
    edited.pop("_hashes", None)
    edited.pop("_identity", None)
    edited["config"]["train"] = {**edited["config"].get("train", {}), "lr": 0.123456}
    assert run_identity.hashes(edited)[1] != run_identity.hashes(items[0])[1]
    assert run_identity.hashes(edited)[2] is not None  # its recorded base_hash no longer matches its config


# -- the statistics in another process, which imports scipy meanwhile (analyze_dir's ``apart``) ----


def _tree(tmp_path, n_seeds=8):
    rng = np.random.default_rng(3)
    values = F.accuracies(n_seeds, shift=0.4)
    items = []
    for r in F.make_results(values):  # with per-example records: their outcome arrays cross the pipe
        k = round(r["metrics"]["test_accuracy"] * F.N_TEST / 100)
        correct = np.zeros(F.N_TEST, dtype=bool)
        correct[rng.permutation(F.N_TEST)[:k]] = True  # k of them right: the record agrees with the metric
        r["metrics"]["test_accuracy"] = 100 * k / F.N_TEST
        r["examples"] = results_io.pack_examples(correct, metric="test_accuracy")
        items.append(r)
    return F.write_results(tmp_path / "exp", items)


def test_statistics_apart_give_the_same_analysis_and_the_same_refusal(tmp_path):
    from harness.analysis.analyze import analyze_dir
    from harness.analysis import AnalysisError

    root = _tree(tmp_path)
    here = analyze_dir(root, write=False)
    apart = analyze_dir(root, write=False, apart=True)
    assert here["test_set_noise"]["available"] is True
    assert apart == here

    one_arm = tmp_path / "one_arm"
    for path in root.glob("runs/seed=*/arm=A/result.json"):
        target = one_arm / path.relative_to(root)
        target.parent.mkdir(parents=True)
        target.write_bytes(path.read_bytes())
    with pytest.raises(AnalysisError, match="Only one arm") as here_refused:
        analyze_dir(one_arm, write=False)
    with pytest.raises(AnalysisError) as apart_refused:
        analyze_dir(one_arm, write=False, apart=True)
    assert str(apart_refused.value) == str(here_refused.value)


def test_a_statistics_process_that_ends_without_an_answer_is_replaced_by_computing_here(tmp_path, monkeypatch, capsys):
    from harness.analysis import decide
    from harness.analysis.analyze import analyze_dir

    root = _tree(tmp_path)
    here = analyze_dir(root, write=False)
    monkeypatch.setattr(decide, "_STATISTICS", "import sys; sys.exit(3)")
    assert analyze_dir(root, write=False, apart=True) == here
    assert "ended without an answer (exit code 3); computing them in this process instead" in capsys.readouterr().err


@pytest.mark.slow
def test_a_refusal_of_the_statistics_process_sets_the_stale_analysis_aside(tmp_path):
    """The statistics process refuses (here: an extra key that would overwrite the analysis's own)
    and the refusal is raised here: outputs that described other results are moved aside, and
    outputs that describe these results stay."""
    from harness.analysis.analyze import analyze_dir
    from harness.analysis import AnalysisError

    root = _tree(tmp_path, n_seeds=8)
    analyze_dir(root, apart=True)
    before = (root / "analysis.json").read_bytes()
    with pytest.raises(AnalysisError, match="would overwrite") as refused:
        analyze_dir(root, apart=True, extra={"schema": 1})
    assert "moved" not in str(refused.value)
    assert (root / "analysis.json").read_bytes() == before and not (root / "superseded").exists()

    for path in root.glob("runs/seed=7/arm=*/result.json"):  # the results change: the outputs are stale
        path.unlink()
    with pytest.raises(AnalysisError, match="moved to superseded/analysis-"):
        analyze_dir(root, apart=True, extra={"schema": 1})
    (aside,) = (root / "superseded").glob("analysis-*")
    assert (aside / "analysis.json").read_bytes() == before and not (root / "analysis.json").exists()


def test_a_statistics_process_not_needed_is_ended_and_leaves_nothing_behind():
    """A refusal while the results are read (or Ctrl-C) ends the process that waits for them."""
    import os
    import signal

    from harness.analysis.decide import StatisticsApart

    statistics = StatisticsApart()
    pid = statistics.process.pid
    assert statistics.close() == -signal.SIGKILL
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_agrees_is_the_float32_tolerance_comparison_to_the_bit():
    """agrees inlines float32_tolerance (it runs twice per run): the same answer on near and far
    pairs, signs, zeros, ints, huge numbers, inf and nan."""
    rng = np.random.default_rng(5)
    base = [0.0, -0.0, 1, 97.5, -3.25, 1e-300, 1e300, float("inf"), float("-inf"), float("nan")]
    pairs = [(x, y) for x in base for y in base]
    for x in rng.normal(0, 100, 300):
        for rel in (0.0, 1e-9, 2e-7, 4.7e-7, 4.8e-7, 1e-6, 1e-3):
            pairs.append((float(x), float(x) * (1 + rel)))
    for value, expected in pairs:
        plain = abs(float(value) - float(expected)) <= example_records.float32_tolerance(value, expected)
        assert example_records.agrees(value, expected) == plain, (value, expected)


def test_what_the_statistics_do_not_read_is_made_after_they_are_handed_over(tmp_path, monkeypatch):
    """Apart, the curves and the inputs digest are made while the second process computes the
    statistics (issue 33), not before it can start; the analysis is the same as made here."""
    from harness.analysis.identity import copies
    from harness.analysis import curves, decide
    from harness.analysis.analyze import analyze_dir

    root = _tree(tmp_path)
    here = analyze_dir(root, write=False)
    events = []
    for module, name in ((curves, "curves"), (copies, "inputs_digest")):
        made = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _made=made, _name=name: events.append(_name) or _made(*a))
    send = decide.StatisticsApart.send
    monkeypatch.setattr(decide.StatisticsApart, "send", lambda self, g: events.append("send") or send(self, g))
    apart = analyze_dir(root, write=False, apart=True)
    assert events[0] == "send" and sorted(events[1:3]) == ["curves", "inputs_digest"], events
    assert apart == here and apart["curves"] and apart["identity"]["inputs_digest"] == here["identity"]["inputs_digest"]
