"""The ledger (harness/ledger/): every claim once, concurrent writers, alternatives flagged, a damaged
file refused, alpha_t from the online FDR stream, and python -m harness.ledger."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from harness.config.declaration import Declaration
from harness.ledger import cli
from harness.ledger.record import assign_alpha, record_analysis
from harness.ledger.claims import claim_rows, declaration_hash
from harness.ledger.postgres import open_ledger
from harness.ledger.store import Ledger, LedgerError
from harness.stats.fdr import online as ofdr
from harness.stats.fdr.asynchronous import next_alpha
from harness.stats.fdr.dependent import DEPENDENT


def _declaration(experiment="abl", fdr=None, alpha=0.05) -> Declaration:
    from harness.config.metric_spec import MetricSpec

    return Declaration(experiment=experiment, factor="x", arms={"A": 0, "B": 1}, baseline="A", seeds=(0, 1, 2),
                       metric="score", metrics={"score": MetricSpec("score", "max")}, margin=None, alpha=alpha,
                       fdr=fdr)


def _analysis(p=0.01, departures=(), alpha=0.05, arms=("B",)) -> dict:
    comparisons = {arm: {"baseline": "A", "mean_diff": 1.5, "t": {"pvalue": p / 2},
                         "intervals": {"zero": {"low": 0.5, "high": 2.5, "level": 0.95}},
                         "decision": {"pvalues": {"zero": p}}, "verdict": {"code": "better" if p <= alpha else "undecided"}}
                   for arm in arms}
    return {"experiment": "abl", "metric": "score", "alpha": alpha, "departures": list(departures),
            "identity": {"groups": [{"identity": {"code_version": "0.1.0+abc"}}]}, "comparisons": comparisons}


def _rows(worker: int, n: int) -> list[dict]:
    # each worker's own claims, plus claims both workers write (the same analysis recorded twice)
    base = claim_rows(_analysis(), "/f/shared", _declaration())[0]
    own = [{**base, "folder": f"/f/{worker}", "claim": f"claim {i}"} for i in range(n)]
    shared = [{**base, "claim": f"shared {i}"} for i in range(n)]
    return own + shared


def _append(path, worker, n, start):
    start.wait()
    ledger = open_ledger(path)
    for i, row in enumerate(_rows(worker, n)):  # one transaction per row: the writers interleave
        ledger.append_claims([row])
        if i % 5 == 0:  # a level that depends on every test before it, reserved between the appends
            ledger.reserve_test(folder=f"/f/{worker}/{i}", experiment="abl", declaration="d", method="lord++",
                                level=0.1, alpha_for=lambda tests: 0.001 * (len(tests) + 1))


@pytest.mark.slow
def test_two_processes_appending_at_once_write_each_claim_exactly_once(tmp_path):
    check_two_writers(tmp_path / "ledger.sqlite")


def check_two_writers(path):
    """Two processes append 50 claims each (25 of them the same) and reserve 10 tests each, at once."""
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    procs = [ctx.Process(target=_append, args=(path, w, 25, start)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    claims = open_ledger(path, create=False).claims()
    keys = [(c["folder"], c["claim"]) for c in claims]
    assert len(keys) == len(set(keys)) == 25 * 2 + 25  # own claims of both, the shared ones once
    tests = open_ledger(path).tests()
    # the level of each reservation saw every one before it: no two tests took the same place
    assert [t["alpha"] for t in tests] == pytest.approx([0.001 * (k + 1) for k in range(20)])


def test_reanalysis_adds_no_row_and_an_alternative_is_flagged_not_counted(tmp_path):
    path, decl = tmp_path / "l.sqlite", _declaration()
    assert record_analysis(_analysis(), tmp_path / "e", decl, path, warn=pytest.fail) == 1
    assert record_analysis(_analysis(), tmp_path / "e", decl, path, warn=pytest.fail) == 0
    alt = _analysis(departures=["alpha 0.1 (declared: 0.05)"], alpha=0.1)
    assert record_analysis(alt, tmp_path / "e", decl.alternative(alpha=0.1), path, warn=pytest.fail) == 1
    ledger = Ledger(path)
    assert len(ledger.claims()) == 1
    both = ledger.claims(alternatives=True)
    assert [c["alternative"] for c in both] == [0, 1] and "alpha 0.1" in both[1]["claim"]
    # another declaration of the same folder is a new claim
    assert record_analysis(_analysis(), tmp_path / "e", _declaration(alpha=0.01), path, warn=pytest.fail) == 1


def test_a_ledger_that_cannot_be_written_warns_and_the_analysis_stands(tmp_path):
    said = []
    (tmp_path / "dir.sqlite").mkdir()
    assert record_analysis(_analysis(), tmp_path, _declaration(), tmp_path / "dir.sqlite", warn=said.append) is None
    assert "dir.sqlite" in said[0] and "not written" in said[0]


@pytest.mark.parametrize("damage", ["garbage", "other_tables", "truncated"])
def test_a_damaged_ledger_is_refused_with_its_name_and_left_as_it_is(tmp_path, damage):
    path = tmp_path / "ledger.sqlite"
    if damage == "garbage":
        path.write_bytes(b"not a database at all" * 100)
    elif damage == "other_tables":
        with sqlite3.connect(path) as con:
            con.execute("CREATE TABLE runs (x)")
    else:
        record_analysis(_analysis(), tmp_path, _declaration(), path, warn=pytest.fail)
        data = path.read_bytes()
        path.write_bytes(data[:100] + b"\xff" * 200 + data[300:])
    before = path.read_bytes()
    with pytest.raises(LedgerError, match=str(path)):
        Ledger(path).claims()
    assert path.read_bytes() == before
    assert cli.main(["--ledger", str(path)]) == cli.EXIT_BAD_INPUT


def test_alpha_t_follows_the_stream_and_a_resumed_declaration_keeps_its_level(tmp_path):
    path = tmp_path / "l.sqlite"
    fdr = {"method": "lord++", "level": 0.1}
    p = [1e-5, 0.3, 1e-4]
    levels = []
    for i, pv in enumerate(p):
        decl = assign_alpha(_declaration(f"abl{i}", fdr=fdr), tmp_path / f"e{i}", path)
        assert decl.fdr["claim"] == i + 1 and decl.alpha == decl.fdr["alpha_t"]
        levels.append(decl.alpha)
        record_analysis(_analysis(p=pv, alpha=decl.alpha), tmp_path / f"e{i}", decl, path, warn=pytest.fail)
    np.testing.assert_allclose(levels, ofdr.lord_plus_plus(p, level=0.1).alpha, rtol=1e-12)
    assert cli.main(["--ledger", str(path), "--figure", str(tmp_path / "stream.png")]) == 0
    assert (tmp_path / "stream.png").stat().st_size > 10_000  # a panel with a line and its points
    assert ofdr.lord_plus_plus(p, level=0.1).rejected.tolist() == [t["rejected"] == 1 for t in Ledger(path).tests()]
    # the same declaration again (a resume) takes the same place, even from the ledger alone
    again = assign_alpha(_declaration("abl1", fdr=fdr), tmp_path / "e1", path)
    assert (again.alpha, again.fdr["claim"]) == (levels[1], 2)
    # and from its declaration.json when the ledger changed meanwhile
    path.unlink()
    kept = assign_alpha(_declaration("abl1", fdr=fdr), tmp_path / "e1", path, earlier=again)
    assert kept.alpha == levels[1] and not path.exists()
    assert declaration_hash(kept) == declaration_hash(_declaration("abl1", fdr=fdr))


@pytest.mark.parametrize("method", ["lond_dep", "lord_dep"])
def test_the_dependent_methods_levels_are_onlinefdrs_and_the_cli_shows_them(tmp_path, capsys, method):
    """stats.fdr.method=lond_dep / lord_dep: 10 claims, each decided before the next is declared, take
    onlineFDR's LOND(dep = TRUE) / LORD(version = "dep") levels on the vignette's first p-values
    (tests/test_online_fdr_dep.py's reference numbers) and make its rejections."""
    from .test_online_fdr import VIGNETTE_P
    from .test_online_fdr_dep import REFERENCE

    path, fdr = tmp_path / "l.sqlite", {"method": method, "level": 0.1}
    levels = []
    p = list(VIGNETTE_P[:10])
    for i, pv in enumerate(p):
        decl = assign_alpha(_declaration(f"abl{i}", fdr=fdr), tmp_path / f"e{i}", path)
        assert decl.fdr["method"] == method and decl.fdr["claim"] == i + 1
        levels.append(decl.alpha)
        record_analysis(_analysis(p=pv, alpha=decl.alpha), tmp_path / f"e{i}", decl, path, warn=pytest.fail)
    alpha, rejected = (r[:10] for r in REFERENCE[(method, 0.1)])
    np.testing.assert_allclose(levels, alpha, rtol=0, atol=1e-9)
    assert [t["rejected"] for t in Ledger(path).tests()] == rejected and sum(rejected) >= 3
    following = DEPENDENT[method](p + [1.0], level=0.1).alpha[-1]
    assert cli.main(["--ledger", str(path), "--method", method]) == 0
    out = capsys.readouterr().out
    assert (f"{ofdr.NAMES[method]} at FDR 0.1: 10 tests (10 decided), {sum(rejected)} rejected; the next experiment "
            f"is tested at alpha_t = {following:.4g}") in out


def test_lord_dep_counts_a_claim_still_running_as_not_rejected(tmp_path):
    from harness.stats.fdr.asynchronous import lord_dep_async

    path, fdr = tmp_path / "l.sqlite", {"method": "lord_dep", "level": 0.1}
    first = assign_alpha(_declaration("abl0", fdr=fdr), tmp_path / "e0", path)
    second = assign_alpha(_declaration("abl1", fdr=fdr), tmp_path / "e1", path)  # the first still running
    record_analysis(_analysis(p=1e-5, alpha=first.alpha), tmp_path / "e0", first, path, warn=pytest.fail)
    third = assign_alpha(_declaration("abl2", fdr=fdr), tmp_path / "e2", path)
    expected = lord_dep_async([1e-5, np.nan, np.nan], [2, 4, 4], level=0.1).alpha
    np.testing.assert_allclose([first.alpha, second.alpha, third.alpha], expected, rtol=1e-12)
    not_rejected = DEPENDENT["lord_dep"]([1.0, 1.0], level=0.1).alpha
    assert second.alpha == pytest.approx(not_rejected[1], rel=1e-12)  # the running claim earned nothing
    assert third.alpha > DEPENDENT["lord_dep"]([1.0, 1.0, 1.0], level=0.1).alpha[2]  # its rejection, once known


def test_cli_lists_filters_and_says_bh_and_the_next_alpha(tmp_path, capsys):
    path = tmp_path / "l.sqlite"
    for i, pv in enumerate([0.001, 0.04, 0.5]):
        record_analysis({**_analysis(p=pv), "experiment": f"e{i}"}, tmp_path / f"e{i}", _declaration(f"e{i}"), path,
                        warn=pytest.fail)
    assert cli.main(["--ledger", str(path), "--offline", "bh", "--level", "0.1", "--method", "saffron"]) == 0
    out = capsys.readouterr().out
    # BH at 0.1 over (0.001, 0.04, 0.5): adjusted 0.003, 0.06, 0.5: the first two survive
    assert "3 claim(s)" in out and "2 survive (# 1, 2)" in out
    assert f"alpha_t = {next_alpha('saffron', [], [], level=0.1):.4g}" in out
    assert cli.main(["--ledger", str(path), "--experiment", "e2", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [c["experiment"] for c in listed["claims"]] == ["e2"]
    assert cli.main(["--ledger", str(path), "--offline", "by", "--json", "--figure", str(tmp_path / "a.png")]) == 0
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # BY at 0.1: 0.001 * 3 * (1 + 1/2 + 1/3) = 0.0055 survives, 0.04 * 1.5 * 1.833 = 0.11 does not
    assert json.loads(capsys.readouterr().out)["offline"]["survive"] == [1]


@pytest.mark.parametrize("argv", [["--offline", "holm"], ["--level", "2"], ["--frobnicate"]])
def test_cli_bad_input_exits_2_with_one_paragraph(tmp_path, capsys, argv):
    with pytest.raises(SystemExit) as e:
        cli.main(["--ledger", str(tmp_path / "none.sqlite"), *argv])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("harness.ledger: ") and err.count("\n") == 1


def test_cli_on_a_ledger_not_made_yet_says_so_and_makes_nothing(tmp_path, capsys):
    assert cli.main(["--ledger", str(tmp_path / "none.sqlite"), "--method", "lord++"]) == 0
    out = capsys.readouterr().out
    assert "(not made yet): 0 claim(s)" in out and f"alpha_t = {next_alpha('lord++', [], [], level=0.1):.4g}" in out
    assert not (tmp_path / "none.sqlite").exists()


def test_a_locked_ledger_is_a_warning_and_the_analysis_stands(tmp_path, monkeypatch):
    from harness.ledger import store

    path = tmp_path / "l.sqlite"
    Ledger(path)
    monkeypatch.setattr(store, "BUSY_TIMEOUT_S", 0.05)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock past the timeout
    said = []
    try:
        assert record_analysis(_analysis(), tmp_path, _declaration(), path, warn=said.append) is None
    finally:
        holder.execute("ROLLBACK")
    assert "could not be written" in said[0] and str(path) in said[0]
    assert record_analysis(_analysis(), tmp_path, _declaration(), path, warn=pytest.fail) == 1


def test_the_default_ledger_is_harness_ledger_when_set(monkeypatch, tmp_path):
    """The test suite points $HARNESS_LEDGER at its own folder (conftest.py): its claims never enter
    the ledger of the checkout it runs in."""
    from harness.ledger.record import ledger_path

    monkeypatch.setenv("HARNESS_LEDGER", str(tmp_path / "mine.sqlite"))
    assert ledger_path({}) == tmp_path / "mine.sqlite"
    assert ledger_path({"path": "team.sqlite"}) == Path("team.sqlite") and ledger_path({"enabled": False}) is None
    monkeypatch.delenv("HARNESS_LEDGER")
    assert ledger_path({}) == Path("outputs/ledger.sqlite")


def test_overlapping_claims_take_the_asynchronous_level_from_when_each_decision_was_known(tmp_path):
    """Zrnic et al.'s LORD*: a claim declared while the one before it runs sees no decision of it; the
    rejection counts from the first claim declared after it was recorded (onlineFDR's decision time)."""
    from harness.stats.fdr.asynchronous import lord_async

    path, fdr = tmp_path / "l.sqlite", {"method": "lord++", "level": 0.1}
    first = assign_alpha(_declaration("abl0", fdr=fdr), tmp_path / "e0", path)
    second = assign_alpha(_declaration("abl1", fdr=fdr), tmp_path / "e1", path)  # the first still running
    record_analysis(_analysis(p=1e-5, alpha=first.alpha), tmp_path / "e0", first, path, warn=pytest.fail)
    third = assign_alpha(_declaration("abl2", fdr=fdr), tmp_path / "e2", path)
    t0 = Ledger(path).tests()[0]
    assert t0["rejected"] == 1 and t0["decision_time"] == 2 and t0["decided_at"] >= t0["declared_at"]
    expected = lord_async([1e-5, np.nan, np.nan], [2, 4, 4], level=0.1).alpha
    np.testing.assert_allclose([first.alpha, second.alpha, third.alpha], expected, rtol=1e-12)
    synchronous = ofdr.lord_plus_plus([1e-5, 1.0, 1.0], level=0.1).alpha
    assert second.alpha < synchronous[1]  # the pending rejection earned nothing yet
    assert third.alpha > second.alpha  # and earns once known


def test_a_ledger_made_before_decision_times_gains_them_and_reads_as_synchronous(tmp_path):
    path, fdr = tmp_path / "old.sqlite", {"method": "lord++", "level": 0.1}
    first = assign_alpha(_declaration("abl0", fdr=fdr), tmp_path / "e0", path)
    record_analysis(_analysis(p=1e-5, alpha=first.alpha), tmp_path / "e0", first, path, warn=pytest.fail)
    with sqlite3.connect(path) as con:  # as the first version of the ledger wrote it
        con.execute("ALTER TABLE tests DROP COLUMN decision_time")
        con.execute("ALTER TABLE tests DROP COLUMN decided_at")
    second = assign_alpha(_declaration("abl1", fdr=fdr), tmp_path / "e1", path)
    assert second.alpha == pytest.approx(ofdr.lord_plus_plus([1e-5, 1.0], level=0.1).alpha[1], rel=1e-12)
    assert Ledger(path).tests()[0]["decision_time"] is None


def test_cli_writes_the_claims_as_an_offline_wandb_table(tmp_path, monkeypatch, capsys):
    from . import wandb_reader

    for key in [k for k in __import__("os").environ if k.startswith("WANDB_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    path = tmp_path / "l.sqlite"
    for i, pv in enumerate([0.001, 0.5]):
        record_analysis({**_analysis(p=pv), "experiment": f"e{i}"}, tmp_path / f"e{i}", _declaration(f"e{i}"), path,
                        warn=pytest.fail)
    record_analysis(_analysis(p=0.2, departures=["alpha=0.1"]), tmp_path / "e1", _declaration("e1").alternative(alpha=0.1),
                    path, warn=pytest.fail)
    assert cli.main(["--ledger", str(path), "--alternatives", "--method", "lord++", "--wandb", str(tmp_path / "w")]) == 0
    assert "wandb: the claims written to" in capsys.readouterr().err
    [run] = wandb_reader.read_runs(tmp_path / "w" / "wandb")  # offline: nothing left the machine
    assert run.name == "ledger" and run.job_type == "ledger" and run.exit_code == 0
    table = run.table("claims")
    rows = [dict(zip(table["columns"], r)) for r in table["data"]]
    assert [(r["experiment"], r["p_decision"], r["alternative"]) for r in rows] == [("e0", 0.001, 0), ("e1", 0.5, 0),
                                                                                   ("abl", 0.2, 1)]
    stream = run.table("online_fdr")
    assert dict(zip(stream["columns"], stream["data"][0]))["next_alpha"] == pytest.approx(
        next_alpha("lord++", [], [], level=0.1))
    assert run.summary["counted_claims"] == 2 and run.summary["alternatives"] == 1
