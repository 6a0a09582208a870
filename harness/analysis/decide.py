"""decide(): the statistics of gathered inputs (gather.py), and analysis.json's content from them.

analyze() is gather() then decide(). ``StatisticsApart`` runs decide() in a second Python process,
which imports scipy while this one reads the results (analyze_dir's ``apart``, what python -m
harness.analyze does with a second core free): on 10,000 results each takes about half a second.
"""

from __future__ import annotations

import sys

import numpy as np

from harness import stats
from harness.analysis import diverged as diverged
from harness.analysis import dose_trend, other_metrics
from harness.analysis.blocks import _arm_summary, _comparison_block, _noise_floor_block, _plain
from harness.analysis.gather import Gathered
from harness.analysis.selection import AnalysisError, _seed_sorted

SCHEMA = "harness.analysis/1"


def decide(g: Gathered) -> dict:
    """The statistics of gathered inputs (gather.py), and analysis.json's content from them."""
    decl, arms, baseline, usable, compared = g.decl, g.arms, g.baseline, g.usable, g.compared
    metric, alpha, spec, directions = decl.metric, decl.alpha, decl.primary, decl.directions
    by_arm = {arm: {seed: run for (seed, a), run in usable.items() if a == arm} for arm in arms}
    unit = spec.suffix
    higher_is_better = spec.higher_is_better
    values = {arm: np.array([by_arm[arm][s]["value"] for s in _seed_sorted(by_arm[arm])]) for arm in arms}
    n_test = g.n_test
    try:
        chosen = stats.resolve_margin(decl.margin, [v for v in values.values() if len(v)], unit=unit, alpha=alpha,
                                      resolution=spec.example_scale / n_test if n_test else None,
                                      declared=decl.margin_declared)
    except ValueError as e:
        raise AnalysisError(f"Bad margin: {e}") from None
    examples, examples_note = g.examples
    # arms decided only on their diverged pairs (too few finished) are claims of the family too
    k = len(compared) + len(diverged.decided_by_rank_only(g.diverged, compared))
    comparisons = stats.compare_to_baseline(
        {arm: (np.array([by_arm[baseline][s]["value"] for s in seeds]),
               np.array([by_arm[arm][s]["value"] for s in seeds]))
         for arm, seeds in compared.items()},
        margin=chosen, baseline=baseline, alpha=alpha, n_resamples=decl.bootstrap_resamples,
        seed=decl.bootstrap_seed, n_test=n_test, unit=unit, higher_is_better=higher_is_better,
        examples=examples, n_comparisons=k,
    ) if compared else {}
    others_reported = other_metrics.other_metrics(usable, compared, baseline, metric, directions, alpha)

    out = {
        "schema": SCHEMA,
        "declaration": decl.to_dict(),
        "departures": list(decl.departures),  # empty: the declared analysis; else an alternative
        "experiment": g.experiment,
        "factor": g.factor,
        "metric": metric,
        "unit": spec.unit,
        "direction": directions[metric],
        "higher_is_better": higher_is_better,
        "directions": {name: directions[name] for name in [metric, *others_reported["metrics"]]},
        "alpha": alpha,
        "baseline": baseline,
        "margin": chosen.to_dict(),
        "arms": {arm: _arm_summary(arm, by_arm[arm], g.factor_values[arm]) for arm in arms},
        "noise_floor": _noise_floor_block(values, chosen, n_test, metric),
        "test_set_noise": examples_note,
        "pairing_verified": g.verified,
        "pairing": g.pairing,
        "setup": g.setup,
        "identity": g.ident,
        "multiple_comparisons": {
            "method": "bonferroni",
            "comparisons": k,
            "note": "with k comparisons with the baseline each claim is tested at alpha / k, and the "
                    "intervals that decide claims ('intervals') are at that level; 't.ci' is the "
                    "unadjusted (1 - alpha) interval. Other metrics: Holm over all their comparisons",
        },
        "comparisons": {
            arm: _comparison_block(c, compared[arm], by_arm, baseline, arm, others_reported["by_arm"].get(arm, {}))
            for arm, c in comparisons.items()
        },
        "curves": g.curves,
        "dose_trend": dose_trend.dose_trend(usable, arms, alpha),  # a numeric factor with 3+ arms, else None
        "dose_trend_why": dose_trend.dose_trend_why(usable, arms),  # why there is none (None when there is)
        "not_compared": g.not_compared,
        "excluded": g.excluded,
        "unreadable": g.unreadable,
        "data_unverified": g.data_unverified,  # runs whose data files were trusted without their checksums
    }
    if g.examples_set_aside:  # only then: every other analysis.json stays byte for byte as it was
        out["examples_set_aside"] = g.examples_set_aside
    diverged.apply(out, g.diverged, arms=arms, baseline=baseline, alpha=alpha, unit=unit)
    # in one order whoever added them (a run adds its sequential block, then the certificate; a
    # re-analysis reads both from disk): the re-analysis rewrites analysis.json byte for byte
    for key, value in sorted(g.extra.items()):
        if key in out:
            raise AnalysisError(f"extra key {key!r} would overwrite the analysis's own {key!r}; rename it.")
        out[key] = value
    return _plain(out)


# The process StatisticsApart starts: it takes this one's sys.path (the same harness), imports
# scipy, then takes a Gathered on stdin and answers decide()'s result, one pickle on stdout.
# Ctrl-C is the parent's to handle (it ends this process): no second traceback from here.
_STATISTICS = ("import pickle, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
               "sys.path[:] = pickle.load(sys.stdin.buffer); "
               "from harness.analysis.decide import _decide_for_parent; _decide_for_parent()")


class StatisticsApart:
    """decide() in another Python process, which imports scipy while this one reads the results:
    on 10,000 results each takes about half a second. Its refusal is raised here; should it not
    start, or end without an answer (killed), decide() runs in this process instead."""

    def __init__(self):
        import pickle
        import subprocess

        self.process, self.sent = None, False
        if not sys.executable:  # an embedded interpreter: no Python to start
            return
        try:
            self.process = subprocess.Popen([sys.executable, "-c", _STATISTICS],
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            self.process.stdin.write(pickle.dumps(sys.path))
            self.process.stdin.flush()
        except OSError:
            self.close()

    def send(self, gathered: Gathered) -> None:
        """Hand the inputs over; decide() then only waits for the answer. Called before the results
        they were gathered from are freed (10,000 of them: a tenth of a second), it computes meanwhile."""
        import pickle

        if self.process is None or self.sent:
            return
        self.sent = True
        try:
            pickle.dump(gathered, self.process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # it has ended (BrokenPipeError), or an extra value cannot be pickled: decide() sees
            pass
        try:
            self.process.stdin.close()
        except OSError:
            pass

    def decide(self, gathered: Gathered) -> dict:
        import pickle

        answer = None
        if self.process is not None:
            self.send(gathered)
            try:
                answer = pickle.load(self.process.stdout)
                self.close(answered=True)
            except Exception:  # BrokenPipeError, EOFError, UnpicklingError: it ended without an answer
                code = self.close()
                print(f"harness.analyze: the statistics process ended without an answer (exit code {code}); "
                      "computing them in this process instead.", file=sys.stderr)
        if answer is None:
            return decide(gathered)
        ok, payload = answer
        if not ok:
            raise payload
        return payload

    def close(self, answered: bool = False):
        """End the process; its exit code. Not ``answered`` (a refusal came first, or it failed), it
        is killed: it would wait for a Gathered that will not come."""
        process, self.process = self.process, None
        if process is None:
            return None
        if not answered:
            process.kill()  # nothing when it has already ended: its exit code stays
        for stream in (process.stdin, process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        return process.wait()


def _decide_for_parent() -> None:
    """The statistics process's side of StatisticsApart."""
    import gc
    import os
    import pickle

    answer_to = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr: stdout carries only the answer
    sys.stdout = sys.stderr
    from scipy import stats as _scipy_stats  # noqa: F401 - now, while the parent reads the results

    gc.disable()  # what it unpickles (a run's compact record each) has no cycles: see results.gc_paused
    try:
        gathered = pickle.load(sys.stdin.buffer)
    except EOFError:  # refused before the statistics: nothing to compute
        os._exit(0)
    try:
        answer = (True, decide(gathered))
    except Exception as e:  # a refusal (AnalysisError): raised in the parent
        answer = (False, e)
    pickle.dump(answer, answer_to, protocol=pickle.HIGHEST_PROTOCOL)
    answer_to.flush()
    os._exit(0)
