"""Where the noise floor comes from (issue 31): each stream moved alone, the arm and the paired
difference. Synthetic trainings whose metric is a known function of the streams, so the answer is
known: independent per-stream terms (they add up, each recovered within its interval), a metric
any change scrambles (unstable), and arms that differ in nothing (B - A has no spread anywhere)."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch

from harness.stats.sources import read_sources, spread
from harness.tools.noise import noise_sources
from harness.tools.noise.noise_sources_table import table_rows
from harness.training.run import Run

K = 12
SD = {"init": 3.0, "data_order": 2.0, "model": 1.0}  # the per-stream terms' standard deviations


def additive(cfg, run: Run, scramble: bool = False, shift: float = 0.0) -> dict:
    """score = 3 z_init + 2 z_order + 1 z_model (+ the arm's shift, the factor); scramble: a hash of all."""
    with run.init():
        model = torch.nn.Linear(2, 1)
        z_init = torch.randn(()).item()
    run.watch(model)
    z_order = torch.randn((), generator=run.generator("data_order")).item()
    z_model = torch.randn(()).item()  # after run.init: the model stream
    run.step(model.weight.sum() * 0)
    terms = SD["init"] * z_init + SD["data_order"] * z_order + SD["model"] * z_model
    if scramble:  # any stream's change gives a fresh draw: unstable training in miniature
        g = torch.Generator().manual_seed(hash((round(z_init, 12), round(z_order, 12), round(z_model, 12))) % 2**31)
        terms = 4.0 * torch.randn((), generator=g).item()
    return {"score": 50.0 + terms + shift}


EXPERIMENT = """# @package _global_
experiment_name: sources
train:
  fn: tests.test_noise_sources.additive
  kwargs: {scramble: false, shift: 0.0}
stats:
  metric: score
  metrics: {score: max}
ab:
  factor: train.kwargs.shift
  arms: {A: 0.0, B: 0.0}
  seeds: [0]
"""


@pytest.fixture(scope="module")
def conf(tmp_path_factory):
    folder = tmp_path_factory.mktemp("conf")
    (folder / "experiment").mkdir()
    (folder / "experiment" / "sources.yaml").write_text(EXPERIMENT)
    return folder


def _run(conf, tmp_path, *extra, k=K, sources="init,data_order,model,augment", workers=1):
    out = tmp_path / "out"
    code = noise_sources.main(["--config-dir", str(conf), "--repeats", str(k), "--out", str(out),
                               "--sources", sources, "+experiment=sources",
                               "determinism.threads=1", "logger=none", f"workers={workers}", *extra])
    assert code == 0
    return json.loads((out / "noise_sources.json").read_text())


def test_independent_terms_are_recovered_and_add_up_and_the_difference_of_equal_arms_is_zero(conf, tmp_path):
    r = _run(conf, tmp_path)
    for source, sd in SD.items():
        a = r["sources"][source]["a"]
        assert a["low"] <= sd <= a["high"], (source, a)  # within its 95% chi-square interval
    full = r["sources"]["all"]["a"]
    assert full["low"] <= math.sqrt(sum(v * v for v in SD.values())) <= full["high"]
    assert r["unused"] == ["augment"]  # the training never draws from it: one run per arm said so
    assert r["reading_a"]["kind"] == "adds_up"
    # arms that differ in nothing: no spread in any source, exactly
    assert all(v["difference"]["std"] == 0 for v in r["sources"].values())
    assert r["reading_difference"]["kind"] == "none"


@pytest.mark.slow
def test_a_training_that_scrambles_on_any_change_is_called_unstable(conf, tmp_path):
    r = _run(conf, tmp_path, "train.kwargs.scramble=true", k=40)  # enough runs for the intervals to tell
    assert r["reading_a"]["kind"] == "unstable", r["reading_a"]
    assert r["reading_a"]["sentence"].startswith("every single source reaches")


def test_the_reading_rules_on_known_spreads():
    import numpy as np

    z = np.random.default_rng(0).standard_normal(200)
    z = (z - z.mean()) / z.std(ddof=1)  # std exactly 1, 200 values: narrow intervals
    full = spread(z)
    same = read_sources({"init": full, "data_order": spread(z[::-1])}, full)
    assert same.kind == "unstable" and "100-100%" in same.sentence
    half = spread(z / math.sqrt(2))  # each half the variance: together exactly the full one
    assert read_sources({"init": half, "data_order": half}, full).kind == "adds_up"
    small = spread(z / 10)  # together 2% of the variance: neither reading
    assert read_sources({"init": small, "data_order": small}, full).kind == "dominant"
    few = spread([0.0, 1.0, 2.0, 3.0, 4.0])  # 5 runs: the intervals allow both readings
    assert read_sources({"init": few, "data_order": spread([0.0, 0.7, 1.4, 2.1, 2.8])}, few).kind == "undetermined"
    two = read_sources({"init": few, "threads": spread([0.0, 1.5])}, few)  # a source with fewer runs is named
    assert two.kind == "undetermined" and "with 5 runs per source (threads 2)" in two.sentence
    assert spread([3.0, 3.0, 3.0]).std == 0.0  # identical values: exactly zero, never a residue


def test_bad_input_is_refused_in_one_paragraph(conf, tmp_path, capsys):
    assert noise_sources.main(["--config-dir", str(conf), "--repeats", "2", "+experiment=sources"]) == 2
    assert "--repeats 2: a spread with an interval needs at least 3 runs" in capsys.readouterr().err
    assert noise_sources.main(["--config-dir", str(conf), "+experiment=sources", "workers=0"]) == 2
    assert "workers=0 is not allowed: give 'auto'" in capsys.readouterr().err


@pytest.mark.slow
def test_the_wandb_run_holds_the_json_table_the_readings_and_the_figure(conf, tmp_path, monkeypatch):
    """With the harness's default logger (wandb, offline), one run "noise sources" whose table rows are
    the json's numbers, whose summary holds the two reading sentences and whose figure is the png;
    with logger=none (the other tests) no wandb folder is written."""
    from . import wandb_reader

    for key in [k for k in os.environ if k.startswith("WANDB_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    out = tmp_path / "out"
    args = ["--config-dir", str(conf), "--repeats", "3", "--out", str(out), "--sources", "init,augment",
            "+experiment=sources", "determinism.threads=1", "workers=1", "logger=wandb"]
    assert noise_sources.main(args) == 0
    d = json.loads((out / "noise_sources.json").read_text())
    [run] = wandb_reader.read_runs(out / "wandb")
    assert run.name == "noise sources" and run.exit_code == 0
    table = run.table("noise_sources")
    rows = {r[0]: dict(zip(table["columns"], r)) for r in table["data"]}
    assert set(rows) == {"init", "all streams", "augment"}
    for source, name in (("init", "init"), ("all", "all streams")):
        for side, prefix in (("a", "a_"), ("difference", "b_minus_a_")):
            s, full = d["sources"][source][side], d["sources"]["all"][side]["std"]
            assert [rows[name][prefix + c] for c in ("std", "low", "high")] == [s["std"], s["low"], s["high"]]
            share = rows[name][prefix + "share"]
            assert share == (1.0 if source == "all" else (s["std"] / full if full > 0 else None))
    assert d["unused"] == ["augment"] and rows["augment"]["a_std"] is None and rows["augment"]["note"]
    assert run.summary["reading/a"] == d["reading_a"]["sentence"]
    assert run.summary["reading/b_minus_a"] == d["reading_difference"]["sentence"]
    assert run.summary["figure"]["_type"] == "image-file"
    assert run.config["arms"] == d["arms"] and run.config["k"] == 3
    # a rerun into the same folder replaces the run; logger=none writes none
    assert noise_sources.main(args) == 0 and len(wandb_reader.read_runs(out / "wandb")) == 1
    none = tmp_path / "none"
    assert noise_sources.main([*args[:5], str(none), *args[6:-1], "logger=none"]) == 0
    assert (none / "noise_sources.json").is_file() and not (none / "wandb").exists()


def fitted(cfg, run: Run, shift: float = 0.0) -> dict:
    """A few SGD steps of a linear model: its metric depends on every bit of the initial weights."""
    with run.init():
        model = torch.nn.Linear(8, 1)
    run.watch(model)
    x = torch.randn(64, 8, generator=torch.Generator().manual_seed(0))
    y = x.sum(1, keepdim=True)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)  # small steps: no weight leaves its binade
    order = run.generator("data_order")
    for _ in range(5):
        idx = torch.randperm(64, generator=order)[:16]
        loss = ((model(x[idx]) - y[idx]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        run.step(loss.detach())
    with torch.no_grad():
        return {"score": float(((model(x) - y) ** 2).mean()) + shift}


@pytest.mark.slow
def test_side_by_side_gives_the_serial_numbers_and_ulp_and_thread_counts_are_rows(conf, tmp_path, monkeypatch, capsys):
    """Side by side (workers=2, the experiment's worker processes) every run's numbers are the serial
    path's, bit for bit, at the same pinned thread count, and the run at 2 threads runs alone on the 2
    free cores (pinned here). The numerical sources: K runs each with a different one-ULP nudge of the
    initial weights (the same nudge in both arms), and the reference again at the other thread counts
    the free cores allow (2 threads); CUDA mode off is named as not measured on CPU."""
    from harness.training import threads

    monkeypatch.setattr(threads, "measure_load", lambda *a, **k: threads.Load(cores=2, busy=0))
    runs = {}
    for workers in (1, 2):
        runs[workers] = _run(conf, tmp_path / str(workers), "train.fn=tests.test_noise_sources.fitted",
                             "~train.kwargs.scramble", k=3, sources="init,ulp,threads,mode_off", workers=workers)
        runs[workers]["said"] = capsys.readouterr().out
    r, side = runs[1], runs[2]
    for key in ("sources", "too_few", "unused", "numerical", "reading_a", "reading_difference", "power", "table"):
        assert side[key] == r[key], key
    assert "trained 18 runs" in r["said"] and "one after another" in r["said"]
    assert "at most 2 at 1 thread, 1 at 2 threads side by side" in side["said"]
    assert {"ulp", "threads"} <= set(r["sources"])
    ulp = r["sources"]["ulp"]
    assert len(ulp["values_a"]) == 3
    changes = r["numerical"]["ulp"]["changes"]
    assert len({(c["param"], c["position"]) for c in changes}) == 3  # a different element each run
    assert all(c["new"] != c["old"] for c in changes)
    assert len(set(r["numerical"]["ulp"]["final_a"])) == 3  # each nudge still shows in the trained weights
    assert r["numerical"]["threads"]["counts"] == [2] and len(r["sources"]["threads"]["values_a"]) == 2
    for source in ("ulp", "threads"):  # arms that differ in nothing: B - A is exactly 0, run by run
        assert r["sources"][source]["differences"] == [0.0] * len(r["sources"][source]["differences"])
        assert r["sources"][source]["difference"]["std"] == 0
    assert "ulp" in r["reading_a"]["shares"] and "threads" in r["reading_a"]["shares"]
    wandb_rows = {row[0] for row in table_rows(r)}  # the wandb table's rows, from the json
    assert {"ulp", "threads", "mode_off"} <= wandb_rows
    if r["numerical"]["mode_off"] is not None:  # CPU: said, not faked
        assert "mode_off" not in r["sources"] and "not measured: no GPU" in r["table"]


def test_how_many_run_side_by_side_follows_the_experiments_rule():
    """workers=N runs N at the reference's thread count, as an experiment's units (even beyond the free
    cores: asked for); a run at another count never pins more threads than the free cores, all told."""
    from harness.tools.noise.noise_sources_runs import Runner

    busy = Runner(2, free=1, threads=1, log=print)  # workers=2 asked on one free core
    assert (busy.width(1, runs=10), busy.width(2, runs=1)) == (2, 1)
    quiet = Runner(4, free=4, threads=1, log=print)
    assert (quiet.width(1, runs=3), quiet.width(2, runs=5), quiet.width(3, runs=5)) == (3, 2, 1)


def test_threads_with_no_other_count_the_machine_keeps_busy_is_too_few_runs(conf, tmp_path, monkeypatch, capsys):
    """One free core and the reference at 1 thread: no other count may run (pinned threads beyond the
    free cores wait at every barrier), so threads has one run: said, with the skipped counts, and kept
    out of the reading; --reread says it again."""
    from harness.training import threads

    monkeypatch.setattr(threads, "measure_load", lambda *a, **k: threads.Load(cores=1, busy=0))
    r = _run(conf, tmp_path, "train.fn=tests.test_noise_sources.fitted", "~train.kwargs.scramble", k=3,
             sources="init,threads")
    assert "threads" not in r["sources"] and len(r["too_few"]["threads"]["values_a"]) == 1
    assert r["numerical"]["threads"]["skipped"] == [2, 3] and "threads" not in r["reading_a"]["shares"]
    assert "too few runs (1)" in r["table"] and "skipped 2, 3" in r["table"]
    capsys.readouterr()
    assert noise_sources.main(["--reread", str(tmp_path / "out" / "noise_sources.json")]) == 0
    assert capsys.readouterr().out.strip() == r["table"]


def test_an_adds_up_reading_says_the_interval_of_the_sum_and_which_source_falls_short():
    """255% of the seed variance read as "adds up" (the digits table): the sentence must say why, not
    look like a contradiction: the sum's range over the intervals holds 100%, and the one source that
    cannot reach the full spread is named."""
    import numpy as np

    full = spread(np.linspace(-1, 1, 20) * 0.6)
    big = spread(np.linspace(-1, 1, 20) * 0.8)
    zero = spread(np.zeros(20))
    r = read_sources({"init": big, "data_order": big, "ulp": zero}, full)
    assert r.kind == "adds_up" and r.variance_sum_share > 1
    assert "which includes 100%" in r.sentence and "(ulp falls short)" in r.sentence, r.sentence


def _counting_runs(monkeypatch):
    from harness.tools.noise import noise_sources_runs

    trained, real = [], noise_sources_runs.train_job
    monkeypatch.setattr(noise_sources_runs, "train_job", lambda *a, **k: trained.append(a[3]) or real(*a, **k))
    return trained


def test_a_source_the_built_in_loop_never_draws_from_is_refused_before_any_run(tmp_path, monkeypatch, capsys):
    trained = _counting_runs(monkeypatch)
    code = noise_sources.main(["--out", str(tmp_path / "out"), "--sources", "init,data-order", "--repeats", "3",
                               "+experiment=loss_ab", "determinism.threads=1", "logger=none", "workers=1"])
    err = capsys.readouterr().err
    assert code == 2 and trained == [] and not (tmp_path / "out").exists()
    assert "'data-order' is not used by this training" in err and "data_order" in err, err


def test_a_stream_an_own_training_never_draws_from_is_refused_before_its_runs(conf, tmp_path, monkeypatch, capsys):
    trained = _counting_runs(monkeypatch)
    code = noise_sources.main(["--config-dir", str(conf), "--out", str(tmp_path / "out"), "--sources",
                               "init,data-order", "--repeats", "3", "+experiment=sources", "determinism.threads=1",
                               "logger=none", "workers=1"])
    err = capsys.readouterr().err
    assert code == 2 and not (tmp_path / "out").exists()
    assert trained == [{}, {}, {"data-order": 1}, {"data-order": 1}]  # the reference and one run of it, per arm
    assert "'data-order' is not used by this training" in err, err
