"""An empty proof is not a proof: a fingerprint that covered nothing is reported missing (with what
fills it), never equal; init is compared wherever both arms recorded it; run.ordered proves the
order of batches that must not be shuffled."""

from __future__ import annotations

import torch

import harness
from harness.analysis.analyze import analyze
from harness.analysis.render.summary import lines, pairing_line
from harness.results import read_json
from harness.training.fingerprint_coverage import EMPTY_DIGESTS
from harness.training.run import Run

from . import _results_factory as F

PAIRS = ["+experiment=loss_ab", "ab.seeds=[0,1,2]", "logger=none", "progress=false", "workers=1",
         "determinism.threads=1", "repro.certificate=false", "data.train_limit=64"]


def _run(tmp_path, fn):
    return harness.run([*PAIRS, f"train.fn=tests.pairing_fns.{fn}"], out_dir=tmp_path, verbose=False)


def test_a_run_fed_by_a_loader_that_drew_nothing_is_never_reported_as_paired(tmp_path):
    res = _run(tmp_path, "own_batches")
    assert res.analysis is not None
    a = read_json(tmp_path / "analysis.json")
    assert a["pairing_verified"] == [] and a["pairing"]["proven"] is False
    order = a["pairing"]["checks"]["data_order"]
    assert order["state"] == "missing" and "run.ordered" in order["line"]  # says what fills it
    assert a["pairing"]["checks"]["init"]["state"] == "equal"  # what was recorded is still compared
    screen = "\n".join(lines(res.to_dict()))
    report = (tmp_path / "report.md").read_text()
    for text in (screen, report):
        assert "pairing verified" not in text and "pairing NOT verified" in text and "data_order MISSING" in text
    fp = read_json(tmp_path / "runs" / "seed=0" / "arm=A" / "result.json")["fingerprints"]
    assert fp["data_order"] is None and fp["batches"] == 0 and "run.loader" in fp["missing"]["data_order"]
    files = sorted((tmp_path / "runs").glob("seed=*/arm=*/result.json"))
    before = [p.stat().st_mtime_ns for p in files]
    harness.run([*PAIRS, "train.fn=tests.pairing_fns.own_batches"], out_dir=tmp_path, verbose=False)
    assert [p.stat().st_mtime_ns for p in files] == before  # resumed: a recorded missing fingerprint is no damage


def test_results_holding_the_digest_of_zero_batches_are_not_paired():
    """Results written before missing fingerprints were recorded as such hold the hash of no bytes."""
    items = F.make_results(F.accuracies(6, shift=0.5))
    for r in items:
        r["fingerprints"]["data_order"] = EMPTY_DIGESTS["data_order"]
    a = analyze(items)
    assert a["pairing_verified"] == [] and a["pairing"]["checks"]["data_order"]["state"] == "missing"
    assert "covered nothing" in a["pairing"]["checks"]["data_order"]["line"]
    assert "pairing verified" not in "\n".join(lines(a))


def test_init_is_compared_when_the_factor_may_change_it_and_reported_as_what_it_is():
    items = F.make_results(F.accuracies(6, shift=0.5), pairing={"init": False, "data_order": True})
    for r in items:  # the factor changed the model: each arm its own init
        r["fingerprints"]["init"] = F._hex("init", r["seed"], r["arm"])
    a = analyze(items)
    assert a["pairing_verified"] == ["data_order"]
    assert a["pairing"]["checks"]["init"]["state"] == "differs"
    assert "init differs across arms in 6 of 6 seed(s), as expected" in "\n".join(lines(a))


def test_the_ordered_stream_proves_the_order_equal_across_arms_and_different_across_seeds(tmp_path):
    _run(tmp_path, "ordered_windows")
    a = read_json(tmp_path / "analysis.json")
    assert a["pairing_verified"] == ["init", "data_order"] and a["pairing"]["proven"] is True
    order = {(s, arm): read_json(tmp_path / "runs" / f"seed={s}" / f"arm={arm}" / "result.json")["fingerprints"]
             for s in range(3) for arm in "AB"}
    assert all(order[s, "A"]["data_order"] == order[s, "B"]["data_order"] for s in range(3))
    assert len({order[s, "A"]["data_order"] for s in range(3)}) == 3
    assert order[0, "A"]["batches"] > 0


def test_the_ordered_stream_hands_the_batches_through_and_fingerprints_their_content():
    def consume(batches):
        run = Run(0)
        seen = list(run.ordered(batches))
        return seen, run._order.hexdigest()

    data = [torch.arange(6.0).reshape(2, 3), (torch.ones(2), {"y": torch.tensor([1, 2])})]
    seen, digest = consume(data)
    assert seen[0] is data[0] and seen[1] is data[1]  # unchanged, in order
    assert consume(data)[1] == digest
    assert consume(list(reversed(data)))[1] != digest  # order
    assert consume([data[0].reshape(3, 2), data[1]])[1] != digest  # shape
    assert consume([data[0] + 1e-7, data[1]])[1] != digest  # content


def test_a_missing_proof_means_pairing_not_verified_even_where_the_factor_may_change_it():
    """ab.factor under train.* may change the data order, so data_order is not required; a missing
    one is still missing: the line opens with NOT verified, never with verified and a clause after."""
    items = F.make_results(F.accuracies(6, shift=0.5), pairing={"init": True, "data_order": False})
    for r in items:
        r["fingerprints"].update(data_order=None, missing={"data_order": "no batch was drawn through the Run"})
    a = analyze(items)
    line = pairing_line(a)
    assert line.startswith("pairing NOT verified:") and "data_order MISSING in 6 of 6 seed(s)" in line
    assert "init equal across arms in every seed" in line and a["pairing"]["proven"] is False


def test_records_covering_fewer_steps_than_the_trainer_took_are_partial_not_verified():
    items = F.make_results(F.accuracies(6, shift=0.5))
    for r in items:  # each record stopped after 3 of the trainer's 225 steps (a record closed early)
        r["fingerprints"].update(batches=3, steps_trained=225)
    a = analyze(items)
    line = pairing_line(a)
    assert line.startswith("pairing NOT verified:") and "data_order PARTIAL" in line and "3 of the 225 steps" in line
    assert a["pairing"]["proven"] is False and a["pairing_verified"] == []
    for r in items:  # the same records, covering every step the trainer took
        r["fingerprints"]["steps_trained"] = 3
    line = pairing_line(analyze(items))
    assert line == ("pairing verified: init equal across arms in every seed; "
                    "data_order equal across arms in every seed (3 batches each)")
