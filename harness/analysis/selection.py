"""Which runs count: one experiment, one run per (seed, arm), usable values, paired arms.

The checks analysis.py runs before any statistics. Each refusal is an AnalysisError whose message
names what and what is allowed; an excluded run is named with its reason.
"""

from __future__ import annotations

import math

from harness import HarnessError
from harness.analysis.identity import comparability, copies, run_identity
from harness.results import diverged, digests_version, metric_value
from harness.training.fingerprint_coverage import BLACK_BOX, EMPTY_DIGESTS, missing_reason, uncovered

PAIRED_FINGERPRINTS = ("init", "data_order")


class AnalysisError(ValueError, HarnessError):
    """The results cannot be analysed as asked; the message says what and what is allowed."""


def _check_options(metric, alpha, bootstrap_resamples) -> None:
    if not isinstance(metric, str) or not metric:
        raise AnalysisError(f"metric must be the name of a key of result.json's metrics, got {metric!r}.")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 0.5:
        raise AnalysisError(f"alpha must be a number between 0 and 0.5 (e.g. 0.05), got {alpha!r}.")
    if isinstance(bootstrap_resamples, bool) or not isinstance(bootstrap_resamples, int) or bootstrap_resamples < 100:
        raise AnalysisError(f"bootstrap_resamples must be an integer >= 100, got {bootstrap_resamples!r}.")


def _one_experiment(results) -> tuple:
    counts: dict[tuple, int] = {}
    for r in results:
        key = (r.get("experiment"), r.get("factor"))
        counts[key] = counts.get(key, 0) + 1
    if len(counts) > 1:
        listed = "; ".join(
            f"experiment {e!r} with factor {f!r} ({n} results)" for (e, f), n in sorted(counts.items(), key=str)
        )
        raise AnalysisError(
            f"Results of {len(counts)} different experiments are mixed here: {listed}. One analysis "
            f"compares the arms of one experiment; point it at a narrower folder that holds one of them."
        )
    return next(iter(counts))


def _arm_order(results) -> list[str]:
    """Arms in the order the config lists them; arms only seen in results follow, sorted."""
    order: list[str] = []
    for r in results:
        configured = ((r.get("config") or {}).get("ab") or {}).get("arms") or {}
        for arm in configured:
            if arm not in order:
                order.append(str(arm))
    present = {str(r.get("arm")) for r in results}
    return [a for a in order if a in present] + sorted(present - set(order))


def _check_duplicates(results) -> tuple[list, list]:
    """One result per (seed, arm): bit-identical copies merged (and listed), conflicts refused."""
    try:
        return copies.one_per_run(results)
    except run_identity.IdentityError as e:
        raise AnalysisError(str(e)) from None


def _check_one_configuration_per_arm(results, arms) -> None:
    # config_hash leaves out seed and arm but includes the factor's value: it differs between
    # arms by design, and within an arm it must be one value.
    by_arm = comparability.configs_by_arm(results)
    mixed = []
    for arm in arms:
        hashes = by_arm.get(arm, {})
        if len(hashes) > 1:
            parts = ", ".join(f"{h} for seeds {_names(_seed_sorted(s))}" for h, s in sorted(hashes.items()))
            mixed.append(f"arm {arm}: {parts}")
    if mixed:
        raise AnalysisError(
            f"Results of different configurations are mixed within an arm ({'; '.join(mixed)}). "
            f"Runs of one arm must share their config_hash; point the analysis at a folder that "
            f"holds one configuration."
        )


def _check_metric_exists(results, metric) -> None:
    completed = [r for r in results if r.get("status") == "completed"]
    if not completed:
        failures = "; ".join(f"seed {r.get('seed')} arm {r.get('arm')}: {_failure(r)}" for r in results)
        raise AnalysisError(f"None of the {len(results)} runs completed: {failures}.")
    available = sorted({k for r in results for k in (r.get("metrics") or {})})
    if metric not in available:
        raise AnalysisError(
            f"The metric {metric!r} is in none of the {len(results)} results; the available metric "
            f"keys are: {', '.join(available) or 'none'}."
        )


def _failure(r) -> str:
    if r.get("status") != "failed":
        return f"status is {r.get('status')!r}, not 'completed'"
    error = r.get("error") or {}
    text = f"failed: {error.get('type', 'error')}: {error.get('message', 'no message')}"
    if error.get("step") is not None:
        if f"step {error['step']}" not in text:
            text += f" (at step {error['step']})"
    return text


def _usable_runs(results, spec):
    """(seed, arm) -> {"value", "result"} for completed runs with a finite metric; the rest named.

    ``spec``: the primary metric's declaration (harness.config.metric_spec.MetricSpec). A metric declared
    as the mean of per-example outcomes (examples: true) must agree with the run's own record of
    them up to float32 rounding (example_records.agrees): a run whose metric its record contradicts (a
    hand-edited result.json, a loop that recorded another test set) is excluded, named with both
    values. A usable run with such a record also carries "n_examples", its size, and "record":
    (the record, example_records.record_mean of it)."""
    from harness.analysis import example_records

    metric = spec.name
    usable = {}
    excluded = []
    for r in results:
        seed, arm = r.get("seed"), str(r.get("arm"))
        if r.get("status") != "completed":
            excluded.append({"seed": seed, "arm": arm, "reason": _failure(r),
                             **({"diverged": True} if diverged(r, metric) else {})})
            continue
        value = metric_value(r, metric)  # a NaN written to result.json comes back as NaN: a divergence
        record = example_records.record_of(r, spec) if spec.examples else None
        if value is None:
            reason = f"metric {metric} is missing"
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            reason = f"metric {metric} is not a number ({value!r})"
        elif not math.isfinite(value):
            excluded.append({"seed": seed, "arm": arm, "reason": f"metric {metric} is {value}",
                             **({"diverged": True} if diverged(r, metric) else {})})
            continue
        elif record is not None and not example_records.agrees(value, given := example_records.record_mean(record, spec)):
            shown_value, shown_given = example_records.two_numbers(value, given)
            reason = (f"{metric} {shown_value} disagrees with its per-example record ({shown_given} from "
                      f"{record['n']} examples): excluded")
        else:
            usable[(seed, arm)] = {"value": float(value), "result": r}
            if record is not None:  # read once: example_records.examples uses it again
                usable[(seed, arm)].update(n_examples=record["n"], record=(record, given))
            continue
        excluded.append({"seed": seed, "arm": arm, "reason": reason})
    return usable, excluded


def _check_pairing(usable) -> tuple[list[str], dict]:
    """Raise when arms of one seed differ in a fingerprint they must share. Returns (verified, pairing):
    the fingerprints that prove the pairing (empty unless every required one covered something and
    was equal in every seed), and analysis.json's pairing block: each fingerprint compared wherever
    the arms recorded it, reported as what it is (equal; different, as the factor allows; missing)."""
    by_seed: dict = {}
    for (seed, arm), run in usable.items():
        by_seed.setdefault(seed, {})[arm] = run["result"]
    # each seed with two or more arms, in seed order, with each arm's fingerprints and pairing read once
    paired = [(seed, {arm: (r.get("fingerprints") or {}, r.get("pairing") or {}) for arm, r in runs.items()})
              for seed, runs in ((s, by_seed[s]) for s in _seed_sorted(by_seed)) if len(runs) >= 2]
    violations = []
    checks = {}
    for key in PAIRED_FINGERPRINTS:
        required, seeds, equal, differ, missing, partial, batches = False, 0, 0, 0, [], [], set()
        empty = EMPTY_DIGESTS.get(key)
        for seed, runs in paired:
            seeds += 1
            need, why, prints, short = False, {}, {}, None
            for arm, (fp, pairing) in runs.items():  # one pass per seed: 5,000 seeds in a big sweep
                need = need or bool(pairing.get(key))
                value = fp.get(key)
                # the usual case, without the call: recorded, nothing marked missing, not the empty digest
                reason = (None if value is not None and not fp.get("missing") and not empty == value
                          else missing_reason(key, fp))
                why[arm] = reason
                prints[arm] = value if not reason else None
                if key == "data_order":  # what it covers: the batches, within the steps the trainer took
                    batches.add(fp.get("batches"))
                    gap = uncovered(fp)
                    short = short or (gap and (arm, *gap))
            required = required or need
            if all(why.values()):  # nothing to compare: not equal, not different, missing
                missing.append((seed, next(iter(why.values()))))
                continue
            if len(set(prints.values())) == 1 and short:  # equal, over a record closed before training ended
                partial.append((seed, *short))
            elif len(set(prints.values())) == 1:
                equal += 1
            elif key == "data_order" and len({digests_version(fp) for fp, _ in runs.values()}) > 1:
                # hashed in two digest versions (a result an older harness wrote): not comparable, so missing
                missing.append((seed, "recorded in different digest versions (training/host_digest.py)"))
            elif need:
                shown = ", ".join(f"{arm}={fp if fp is not None else 'missing'}" for arm, fp in prints.items())
                violations.append(f"seed {seed}, arms {', '.join(prints)}: fingerprints.{key} differs ({shown})")
            else:
                differ += 1
        if seeds:
            checks[key] = _pairing_check(key, required, seeds, equal, differ, missing, partial, batches)
    if violations:
        raise AnalysisError(
            f"Pairing violated: {'; '.join(violations)}. The results' pairing says arms of one seed "
            f"must share these fingerprints (same initialization, same batches in the same order); "
            f"without that the difference mixes the factor with seed noise. Re-run the affected seeds "
            f"with the harness, which draws init and data order from their own seeded streams."
        )
    black_box = bool(usable) and all((run["result"].get("fingerprints") or {}).get("black_box") for run in usable.values())
    needed = [key for key, c in checks.items() if c["required"]]
    if not needed and _code_factor(usable):  # ab.factor=code: another revision may change them, and where
        needed = [key for key, c in checks.items() if c["state"] == "equal"]  # they are equal they prove it
    # a missing or partial proof unproves the pairing, even one ab.factor would have allowed to differ
    whole = not any(c["state"] in ("missing", "partial") for c in checks.values())
    proven = bool(needed) and not black_box and whole and all(checks[key]["state"] == "equal" for key in needed)
    block = {"proven": proven, "basis": BLACK_BOX if black_box else "fingerprints", "checks": checks}
    return (needed if proven else []), block


def _code_factor(usable) -> bool:
    return bool(usable) and all(run["result"].get("factor") == "code" for run in usable.values())


def _pairing_check(key, required, seeds, equal, differ, missing, partial=(), batches=()) -> dict:
    """One fingerprint's state across the seeds, and the sentence the report prints for it, with
    what it covers (data_order: the batches of each run)."""
    if missing:
        state = "missing"
        line = (f"{key} MISSING in {len(missing)} of {seeds} seed(s), so not compared: {missing[0][1]}")
    elif partial:
        seed, arm, recorded, trained = partial[0]
        state = "partial"
        line = (f"{key} PARTIAL in {len(partial)} of {seeds} seed(s): equal across arms, but the records stop "
                f"before training did (seed {seed} arm {arm}'s covers only {recorded} of the {trained} steps the "
                f"trainer took), so not verified")
    elif differ:
        state = "differs"
        line = (f"{key} differs across arms in {differ} of {seeds} seed(s), as expected: ab.factor changes it"
                + (f" (equal in {equal})" if equal else ""))
    else:
        state = "equal"
        notes = [_batches_words(batches)] if key == "data_order" else []
        notes += [] if required else ["not required: ab.factor may change it"]
        line = f"{key} equal across arms in every seed" + (f" ({'; '.join(notes)})" if notes else "")
    return {"state": state, "required": required, "seeds": seeds, "line": line}


def _batches_words(batches) -> str:
    """How many batches each compared run's data_order digest covers."""
    counts = sorted({b for b in batches if isinstance(b, int) and not isinstance(b, bool)})
    if not counts or len(counts) < len(set(batches)):
        return "batches not counted in some runs" if counts else "batches not counted"
    return f"{counts[0]} batches each" if len(counts) == 1 else f"{counts[0]} to {counts[-1]} batches per run"


def _drop_unpaired(usable, baseline, others):
    """Drop runs that have no partner of the same seed: a baseline run needs one in some arm."""
    seeds = {arm: {s for (s, a) in usable if a == arm} for arm in [baseline, *others]}
    kept = dict(usable)
    dropped = []
    for arm in others:
        for seed in seeds[arm] - seeds[baseline]:
            del kept[(seed, arm)]
            dropped.append({"seed": seed, "arm": arm,
                            "reason": f"unpaired: the baseline arm {baseline} has no usable result for this seed"})
    for seed in seeds[baseline]:
        if not any(seed in seeds[arm] for arm in others):
            del kept[(seed, baseline)]
            dropped.append({"seed": seed, "arm": baseline,
                            "reason": "unpaired: no other arm has a usable result for this seed"})
    return kept, dropped


def _common_n_test(usable) -> int | None:
    """The number of test examples every usable run's metric is the mean of: the size of its own
    per-example record (n_examples, from _usable_runs), else (no record) its n_test metric."""
    sizes = {run.get("n_examples", (run["result"].get("metrics") or {}).get("n_test")) for run in usable.values()}
    if len(sizes) == 1:
        (size,) = sizes
        if isinstance(size, int) and not isinstance(size, bool) and size > 0:
            return size
    return None


# -- small helpers ------------------------------------------------------------------------------


def _seed_key(seed):
    """Integer seeds in numeric order, anything else after them as text."""
    return (0, seed) if isinstance(seed, int) else (1, str(seed))


def _seed_sorted(seeds) -> list:
    return sorted(seeds, key=_seed_key)


def _sorted_entries(entries, arms) -> list[dict]:
    rank = {arm: i for i, arm in enumerate(arms)}
    return sorted(entries, key=lambda e: (_seed_key(e["seed"]), rank.get(e["arm"], len(rank)), e["arm"]))


def _describe_excluded(excluded) -> str:
    return "; ".join(f"seed {e['seed']} arm {e['arm']} ({e['reason']})" for e in excluded)


def _names(items, limit: int = 12) -> str:
    items = [str(i) for i in items]
    if len(items) > limit:
        return ", ".join(items[:limit]) + f" and {len(items) - limit} more"
    return ", ".join(items)
