"""Issue 33 item 3: the statistics made cheaper must give the same numbers, bit for bit.

The expected values below were recorded by running this file's ``_snapshot()`` on the code
BEFORE the speed-ups (main at 89eafe3: ``_exact_share`` simulated on every new effect size, no
tables, no caches), with

    OPENBLAS_CORETYPE=Haswell OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python tests/test_stats_cost.py

which prints ``EXPECTED`` (held to OpenBLAS's Haswell kernels: see PINNED_BLAS; this file copied
into a checkout of 89eafe3 and run there). Each entry is a sha256 of the canonical JSON (floats written exactly, by
repr) of one result's ``to_dict()``, plus the counts and p-values spelled out where a reader wants
to see which number moved. A speed-up that changes any number, however slightly, fails here.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness import stats
from harness.stats.margins import Margin, resolve_margin
from harness.stats.power.seeds_needed import seeds_needed_for


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:20]


def _datasets():
    """(name, a, b, margin): 10 seeds near the margin and with shifted effects (each a new effect
    size), a clear difference, an equivalence, 3, 6 and 16 seeds."""
    rng = np.random.default_rng(1)
    a = 97 + rng.normal(0, 0.5, 10)
    b = a + 0.3 + rng.normal(0, 0.4, 10)
    out = [("near", a, b, "auto")]
    out += [(f"shift{i}", a, b + 0.013 * i, "auto") for i in (1, 2, 3)]
    out.append(("clear", a, a + 1.5 + rng.normal(0, 0.3, 10), 0.5))
    out.append(("equivalent", a[:6], a[:6] + rng.normal(0, 0.05, 6), 0.5))
    c = 80 + rng.normal(0, 1.0, 3)
    out.append(("three", c, c + rng.normal(0.5, 0.5, 3), "auto"))
    e = 60 + rng.normal(0, 2.0, 16)
    out.append(("sixteen", e, e + 0.8 + rng.normal(0, 1.0, 16), "auto"))
    return out


def _snapshot() -> dict:
    snap = {}
    for name, a, b, margin in _datasets():
        c = stats.compare(a, b, margin=margin, n_resamples=999)
        s = c.seeds_needed
        snap[f"compare/{name}"] = {
            "digest": _digest(c.to_dict()),
            "seeds": [s.at_margin, s.at_observed, s.to_settle_margin, list(s.at_margin_range),
                      list(s.at_observed_range), list(s.to_settle_margin_range)],
            "p": {k: float(v).hex() for k, v in c.p_decision.items()},
        }
    rng = np.random.default_rng(7)
    a = 90 + rng.normal(0, 1, 8)
    pairs = {"B": (a, a + 0.4 + rng.normal(0, 0.5, 8)), "C": (a, a + 1.2 + rng.normal(0, 0.5, 8))}
    margin = resolve_margin("auto", [a, pairs["B"][1], pairs["C"][1]])
    family = stats.compare_to_baseline(pairs, margin=margin, n_resamples=999)
    snap["baseline/B,C"] = {arm: _digest(c.to_dict()) for arm, c in family.items()}
    estimated = Margin(value=0.6, source="auto", description="", low=0.45, high=0.8, df=9, bound_alpha=0.025)
    for mean, sd, margin_, n, k in [(0.3, 0.4, 0.5, 10, 1), (1.1, 0.5, 0.5, 10, 1), (0.05, 0.3, 0.5, 6, 2),
                                    (0.3, 0.4, estimated, 10, 1), (0.9, 0.4, estimated, 10, 3),
                                    (2.0, 0.2, 0.5, 4, 1), (0.49, 0.1, 0.5, 12, 1)]:
        s = seeds_needed_for(mean, sd, margin_, n=n, n_comparisons=k)
        snap[f"seeds/{mean},{sd},{getattr(margin_, 'value', margin_)},{n},{k}"] = [
            s.at_margin, s.at_observed, s.to_settle_margin, list(s.at_margin_range),
            list(s.at_observed_range), list(s.to_settle_margin_range), _digest(s.to_dict())]
    rows = np.random.default_rng(3).normal(0.2, 1.0, (5, 9))
    p = stats.decision_pvalues(rows, margin_beyond=0.5, margin_equivalent=0.4, margin_share=0.5, n_comparisons=2)
    snap["decision_pvalues"] = {k: [float(x).hex() for x in np.atleast_1d(v)] for k, v in sorted(p.items())}
    return snap


# Printed by the old code (89eafe3), as the module docstring says; the digests of the comparisons of
# fewer than 10 pairs (equivalent, three, baseline/B,C) were printed again when a comparison stopped
# showing a bootstrap interval below 10 pairs (stats.BOOTSTRAP_MIN_PAIRS): their p-values and seeds
# are the old code's, and the old digests come back with BOOTSTRAP_MIN_PAIRS set to 0.
EXPECTED = {'baseline/B,C': {'B': '7d52f0e8a810797910dd', 'C': '98a52fdab1bbb1ffd6e8'},
 'compare/clear': {'digest': '630e92f788491b550c74',
                   'p': {'beyond': '0x1.0000000000000p-9',
                         'equivalent': '0x1.0000000000000p+0',
                         'zero': '0x1.0000000000000p-9'},
                   'seeds': [7, 6, 6, [6, 16], [6, 6], [6, 7]]},
 'compare/equivalent': {'digest': '1da67d5d0670ebe58efa',
                        'p': {'beyond': '0x1.0000000000000p+0',
                              'equivalent': '0x1.0000000000000p-6',
                              'zero': '0x1.2000000000000p-2'},
                        'seeds': [6, 32, 5, [6, 6], [14, 179], [5, 5]]},
 'compare/near': {'digest': '3c3c4d0a0ffa9c159f3d',
                  'p': {'beyond': '0x1.0000000000000p+0',
                        'equivalent': '0x1.d400000000000p-1',
                        'zero': '0x1.8000000000000p-8'},
                  'seeds': [6, 8, 80, [6, 10], [6, 19], [58, 156]]},
 'compare/shift1': {'digest': '6d1516a1c0bedcea642e',
                    'p': {'beyond': '0x1.0000000000000p+0',
                          'equivalent': '0x1.0000000000000p+0',
                          'zero': '0x1.1b591b86b1341p-9'},
                    'seeds': [6, 8, 102, [6, 10], [6, 17], [75, 198]]},
 'compare/shift2': {'digest': '9e75d6ffdf6487b2a377',
                    'p': {'beyond': '0x1.0000000000000p+0',
                          'equivalent': '0x1.0000000000000p+0',
                          'zero': '0x1.0000000000000p-9'},
                    'seeds': [6, 7, 134, [6, 10], [6, 16], [99, 259]]},
 'compare/shift3': {'digest': '32776773af88fb1fad5b',
                    'p': {'beyond': '0x1.0000000000000p+0',
                          'equivalent': '0x1.0000000000000p+0',
                          'zero': '0x1.0000000000000p-9'},
                    'seeds': [6, 7, 184, [6, 10], [6, 15], [136, 352]]},
 'compare/sixteen': {'digest': 'e97645df0030b28924df',
                     'p': {'beyond': '0x1.0000000000000p+0',
                           'equivalent': '0x1.6780000000000p-5',
                           'zero': '0x1.4400000000000p-7'},
                     'seeds': [7, 17, 28, [6, 9], [10, 36], [21, 45]]},
 'compare/three': {'digest': '63633e3c16d5335c1883',
                   'p': {'beyond': '0x1.0000000000000p+0',
                         'equivalent': '0x1.0000000000000p-1',
                         'zero': '0x1.0000000000000p-1'},
                   'seeds': [6, 25, 9, [6, 35], [9, 880], [6, 80]]},
 'decision_pvalues': {'beyond': ['0x1.0000000000000p+0',
                                 '0x1.0000000000000p+0',
                                 '0x1.0000000000000p+0',
                                 '0x1.0000000000000p+0',
                                 '0x1.0000000000000p+0'],
                      'equivalent': ['0x1.0000000000000p+0',
                                     '0x1.0000000000000p+0',
                                     '0x1.0000000000000p+0',
                                     '0x1.0000000000000p+0',
                                     '0x1.0000000000000p+0'],
                      'zero': ['0x1.0000000000000p+0',
                               '0x1.0000000000000p+0',
                               '0x1.2000000000000p-4',
                               '0x1.f619b640a3490p-3',
                               '0x1.b800000000000p-1']},
 'seeds/0.05,0.3,0.5,6,2': [8, 345, 7, [7, 24], [136, 2061], [6, 26], '1e97f0407c83333201bb'],
 'seeds/0.3,0.4,0.5,10,1': [8, 17, 27, [6, 19], [10, 49], [14, 84], 'a9082971a1cd8497b530'],
 'seeds/0.3,0.4,0.6,10,1': [7, 17, 44, [6, 14], [10, 49], [30, 93], '2c1d4eaa7d547e2cf641'],
 'seeds/0.49,0.1,0.5,12,1': [6, 6, 620, [6, 6], [6, 6], [312, 1784], '606b66cb64ad03a7366d'],
 'seeds/0.9,0.4,0.6,10,3': [9, 7, 76, [7, 19], [7, 11], [57, 146], '8b9517c0d4fa29091982'],
 'seeds/1.1,0.5,0.5,10,1': [11, 6, 9, [7, 29], [6, 8], [7, 21], '4367f308441ce26ec374'],
 'seeds/2.0,0.2,0.5,4,1': [6, 6, 6, [6, 20], [6, 6], [6, 6], '85ea0084a2885f3d35e4']}


@pytest.mark.slow
def test_the_shipped_table_is_what_the_simulation_gives():
    # A sample of the table, regenerated by the simulation itself (exact_share.simulate_share, the
    # code _exact_share ran before the table): every share the same float. The sample covers each
    # level, the ends of each range and points in between, chosen by a seeded generator.
    from harness.stats.power import exact_share as es

    table = json.loads(es.TABLE.read_text())
    rng = np.random.default_rng(2026)
    checked = 0
    for n, by_level in sorted(table["shares"].items()):
        for level, entry in by_level.items():
            n_, level_ = int(n), float(level)
            assert (entry["low"], entry["high"]) == es.bounds(n_)
            inside = range(entry["low"] + 1, entry["high"])
            picks = {inside[0], inside[-1]} if rng.random() < 0.5 else set()
            picks |= {int(j) for j in rng.choice(inside, size=1)}
            for j in picks:
                delta = j / es._STEP
                assert es.exact_share.__wrapped__(n_, delta, level_) == es.simulate_share(n_, delta, level_), (n, level, j)
                checked += 1
            # beyond the range the answer is 1.0 without simulating: so does the simulation say
            for j in (entry["low"], entry["low"] - 7, entry["high"], entry["high"] + 13):
                assert es.simulate_share(n_, j / es._STEP, level_) == 1.0
    assert checked >= 90


def test_a_share_off_the_table_is_simulated():
    from harness.stats.power import exact_share as es

    # a level no table entry has (alpha 0.1), and an effect off the 0.05 grid
    for n, delta, level in [(8, 1.25, 0.05 / 1.5), (10, 0.72, 0.025), (6, 2.0, 0.1)]:
        assert es.exact_share.__wrapped__(n, delta, level) == es.simulate_share(n, delta, level)


def test_the_first_counts_of_a_scan_are_those_of_the_whole_block():
    # _smallest_t_n computes the first 8 of its 64 counts first (rows=8): each must be the number
    # the whole block gives it, for declared and estimated margins, on both sides of the margin
    from harness.stats.power import margin as M, seeds_needed as P, t_test as T

    ns = np.arange(37, 37 + 64)
    for bound_alpha in (0.0, 0.025):
        for effect in (0.1, 0.35, 0.6):
            def beyond(n, m):
                return T.paired_t_power(n, effect, 0.4, 0.0125, null=m, alternative="greater")

            def within(n, m):
                near = T.paired_t_power(n, effect, 0.4, 0.025, null=m, alternative="less")
                far = T.paired_t_power(n, effect, 0.4, 0.025, null=-np.asarray(m), alternative="greater")
                return np.maximum(np.asarray(near) + far - 1, 0.0)
            for power_with, which in ((beyond, 1), (within, 0)):
                whole = np.asarray(M._margin_power(power_with, 0.3, bound_alpha, ns, which))
                first = np.asarray(M._margin_power(power_with, 0.3, bound_alpha, ns, which, rows=P._FIRST))
                assert first.tobytes() == whole[:P._FIRST].tobytes()


def test_remembered_quantiles_are_scipys_to_the_bit():
    # power/seeds_needed.py computes an estimated margin's bounds and the t critical values from remembered
    # special-function values (power/t_test.py: cached_ppf) instead of scipy.stats' ppf: the same floats
    from scipy import stats as sps

    from harness.stats.power import margin as M
    from harness.stats.margins import margin_bound_factors
    from harness.stats.power.t_test import cached_ppf

    df = np.concatenate([np.arange(1.0, 80.0), np.geomspace(80, 2e6, 59).round(), [0.5, 2.5]])
    for q in (0.95, 0.975, 0.9875, 0.0125, 0.025, 0.5, 0.99999):
        for dist in ("t", "chi2"):
            expected = getattr(sps, dist).ppf(q, df)
            assert cached_ppf(dist, q, df).tobytes() == expected.tobytes()
            assert cached_ppf(dist, q, df[::-1]).tobytes() == expected[::-1].tobytes()  # now remembered
            assert float(cached_ppf(dist, q, 9.0)) == float(getattr(sps, dist).ppf(q, 9.0))
    for bound_alpha in (0.025, 0.0125, 0.01, 0.0083333):
        for x in (df, df.reshape(-1, 2), 11.0, np.array([11.0])):
            got, expected = M._bound_factors(x, bound_alpha), margin_bound_factors(x, bound_alpha)
            assert [np.asarray(v).tobytes() for v in got] == [np.asarray(v).tobytes() for v in expected]
            assert [type(v) for v in got] == [type(v) for v in expected]


def test_the_noncentral_t_tail_is_scipys_to_the_bit():
    # t_test._nct_tail calls the special functions scipy.stats.nct calls, without its argument
    # checks: the same floats in every shape, in the far tail where scipy gives NaN (then integrated
    # by _t_tail), and for the arguments it hands back to scipy (NaN, infinite, df <= 0)
    from scipy import stats as sps

    from harness.stats.power.t_test import _nct_tail

    rng = np.random.default_rng(33)
    k = 3000
    df = np.floor(np.exp(rng.uniform(0, 14, k)))
    c = rng.uniform(-1, 5, k) * rng.choice([1, 0.1, 3], k)
    nc = rng.normal(0, 1, k) * np.exp(rng.uniform(-3, 6.5, k))
    odd = [(np.nan, 5, 1), (2, np.inf, 1), (np.inf, 3, 0), (1, 0, 1), (1, -2, 1), (0.0, 4, 0.0), (1.5, 4, np.nan)]
    far_tail = 0
    for upper in (True, False):
        def scipys(c, df, nc):
            return sps.nct.sf(c, df, nc) if upper else sps.nct.cdf(-c, df, nc)
        with np.errstate(all="ignore"):
            expected = scipys(c, df, nc)
            far_tail += int(np.isnan(expected).sum())
            assert _nct_tail(c, df, nc, upper).tobytes() == expected.tobytes()
            shaped = [x.reshape(100, 30) for x in (c, df, nc)]
            assert _nct_tail(*shaped, upper).tobytes() == expected.reshape(100, 30).tobytes()
            for i in range(0, k, 97):
                one = [np.asarray(x[i]) for x in (c, df, nc)]
                assert np.asarray(_nct_tail(*one, upper)).tobytes() == np.asarray(scipys(*one)).tobytes()
            for args in odd:
                one = [np.asarray(float(x)) for x in args]
                assert np.asarray(_nct_tail(*one, upper)).tobytes() == np.asarray(scipys(*one)).tobytes(), args
    assert far_tail > 10  # the far tail, where scipy gives NaN, is among them


def _claims(effect, sd, alpha):
    """(power_with, upper_with) of seeds_to_settle_margin's two claims at this effect: beyond the
    margin (upper_with is power_with itself) and within it (TOST's bound; upper_with its near test)."""
    from harness.stats.power.t_test import paired_t_power

    def beyond(n, m):
        return paired_t_power(n, effect, sd, alpha / 2, null=m, alternative="greater")

    def near(n, m):
        return paired_t_power(n, effect, sd, alpha, null=m, alternative="less")

    def within(n, m):
        far = paired_t_power(n, effect, sd, alpha, null=-np.asarray(m), alternative="greater")
        return np.maximum(np.asarray(near(n, m)) + far - 1, 0.0)
    return (beyond, beyond), (within, near)


def test_the_count_found_from_bounds_is_the_one_the_whole_block_gives():
    # NodePower.first_reaching rules counts out by bounds on their power and computes only the rest:
    # the count it returns must be the first that _margin_power (the definition) puts at or above
    # the target, in the first 8 of a block, in the rest of it, and for one count alone. Targets are
    # random, and also exactly a count's own power and the float just above it (the bounds must leave
    # those to the full computation).
    from harness.stats.power import margin as M, seeds_needed as P

    rng = np.random.default_rng(34)
    decided = 0
    for case in range(24):
        effect, sd, value = rng.uniform(0, 0.8), rng.uniform(0.1, 1.0), rng.uniform(0.1, 0.8)
        alpha, bound_alpha = rng.choice([0.05, 0.025, 0.0125]), rng.choice([0.025, 0.0125, 0.01])
        which = 1 if effect > value else 0
        power_with, upper_with = _claims(effect, sd, alpha)[1 - which]
        start = int(rng.integers(2, 200))
        ns = np.arange(start, start + 64)
        whole = np.asarray(M._margin_power(power_with, value, bound_alpha, ns, which))
        first = np.asarray(M._margin_power(power_with, value, bound_alpha, ns, which, rows=P._FIRST))
        j = int(rng.integers(0, 64))
        for target in (0.8, rng.uniform(0.05, 0.95), whole[j], np.nextafter(whole[j], 2.0)):
            node = M.NodePower(power_with, upper_with, value, bound_alpha, which)
            for rows, powers in ((range(P._FIRST), first), (range(P._FIRST, 64), whole[P._FIRST:])):
                hit = np.flatnonzero(powers >= target)
                expected = rows[hit[0]] if hit.size else None
                assert node.first_reaching(ns, target, rows) == expected, (case, target, rows)
                decided += expected is not None
            for i in (0, j, 63):
                alone = np.asarray(M._margin_power(power_with, value, bound_alpha, ns[i:i + 1], which))[0]
                assert node.first_reaching(ns[i:i + 1], target) == (0 if alone >= target else None)
    assert decided > 20


def test_seeds_needed_are_those_of_the_search_without_bounds(monkeypatch):
    # the whole search, with NodePower's bounds and without them (every node of every count, as
    # before issue 33's speed-up): the same counts, near the margin and far from it, on both sides
    from harness.stats.power import margin as M, seeds_needed as P

    rng = np.random.default_rng(35)
    cases = [(float(rng.uniform(0, 1.0)), float(rng.uniform(0.1, 0.6)), float(rng.uniform(0.2, 0.8)),
              int(rng.integers(3, 17)), int(rng.integers(1, 4))) for _ in range(10)]
    cases += [(0.3, 0.4, 0.36, 10, 1), (0.42, 0.3, 0.36, 10, 1), (0.1, 0.4, 0.36, 6, 2)]

    def margin(value, n):
        return Margin(value=value, source="auto", description="", low=value, high=value, df=n - 1, bound_alpha=0.025)
    fast = [P.seeds_needed_for(e, sd, margin(m, n), n=n, n_comparisons=k).to_dict() for e, sd, m, n, k in cases]
    monkeypatch.setattr(M.NodePower, "first_reaching", None)
    slow = [P.seeds_needed_for(e, sd, margin(m, n), n=n, n_comparisons=k).to_dict() for e, sd, m, n, k in cases]
    assert fast == slow
    assert any(s["to_settle_margin"] and s["to_settle_margin"] > 64 for s in slow)  # the bisection is among them


# The statistics' matrix products go through OpenBLAS, whose kernels for the CPU at hand add in their
# own order: last bits differ between an AVX2 and an AVX-512 host. The snapshot is taken in a process
# held to one kernel set that every x86-64 host with AVX2 runs, and one BLAS thread.
PINNED_BLAS = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_NUM_THREADS": "1"}


@pytest.mark.slow
def test_results_are_identical_to_before_the_speed_ups():
    env = {**os.environ, **PINNED_BLAS, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--json"], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout)
    assert set(got) == set(EXPECTED)
    for key in EXPECTED:
        assert got[key] == EXPECTED[key], key


if __name__ == "__main__" and sys.argv[1:] == ["--json"]:  # what the test reads
    print(json.dumps(_snapshot()))
elif __name__ == "__main__":
    import pprint
    print("EXPECTED = ", end="")
    pprint.pprint(_snapshot(), width=110, sort_dicts=True)
