"""Which results may be compared: one identity per comparison, one run per (seed, arm).

A run's identity is what decides its numbers apart from the seed and the factor (run_identity.py
reads it from a result):

- the config outside the factor: ``base_hash``, recomputed from the result's own ``config``
  block (results.config_digest), so a file without hashes, or whose recorded hash disagrees with
  its config, cannot slip past (a disagreement is itself reported);
- the code: ``code_version`` (the harness's and the user's code, as experiment/runner.py records it);
- the environment that decides the bits (``env``): device type, torch version, CPU capability,
  threads, determinism mode, precision (and the GPU model on CUDA). A key the factor itself
  changes (e.g. factor ``determinism.threads``) may differ between arms.

The rule: the analysis compares only results of ONE identity. Otherwise it refuses (exit 2 from
``harness.analyze``) with a paragraph that names, per differing part, the values, the arms and
seeds that have each, and files; ``--allow-mixed-identity`` compares anyway and records what
differs, per comparison, in analysis.json (``identity``); ``--grid`` analyses each identity on
its own (a sweep over settings around an A/B, see grid.py).

The same (seed, arm) found in several files, and the digest of the runs an analysis used, are
copies.py's (one_per_run and inputs_digest).

Pure functions over result dicts (no Hydra, no torch): analysis.py calls them.
"""

from __future__ import annotations

from harness.analysis.identity.differing_values import apart
from harness.analysis.identity.run_identity import (
    PARTS, IdentityError, _canonical, _hashable, _short, _under, factor_of, hashes, identity, where)
from harness.results import NOT_IN_IDENTITY, flatten

_LABELS = {
    "base_hash": "config outside the factor (base_hash)",
    "code_version": "code (code_version)",
    "env.device_type": "device type (env.device)",
    "env.gpu": "GPU model (env.device_name)",
    "env.torch": "torch version (env.torch)",
    "env.cpu_capability": "CPU capability (env.cpu_capability)",
    "env.threads": "threads (env.threads)",
    "env.determinism_mode": "determinism mode (env.mode)",
    "env.precision": "precision",
    "env.math_modes": "math modes: TF32 and float32 matmul precision (env.math_modes)",
    "env.math_environment": "math environment: TF32/cuBLAS variables, cuDNN and cuBLAS versions (env.math_environment)",
    "env.world": "processes per run: world size and backend (env.world)",
}


def _agrees(a: dict, b: dict) -> bool:
    return all(_hashable(a[p]) == _hashable(b[p]) for p in PARTS if p in a and p in b)


def group(results) -> list[list[dict]]:
    """The results split by identity, completed runs deciding the identities; a failed run joins
    the first identity it agrees with on every part it recorded (or makes its own)."""
    exact: dict[tuple, list] = {}
    keys: dict[int, tuple] = {}
    for r in results:
        if r.get("status") == "completed":
            ident = identity(r)
            key = keys.get(id(ident))  # results that share an identity dict share its key
            if key is None:
                key = keys[id(ident)] = tuple((p, _hashable(v)) for p, v in ident.items())
            exact.setdefault(key, []).append(r)
    groups = [(identity(members[0]), members) for members in exact.values()]
    for r in results:
        if r.get("status") == "completed":
            continue
        ident = identity(r)
        for head, members in groups:
            if _agrees(head, ident):
                members.append(r)
                break
        else:
            groups.append((ident, [r]))
    return [members for _, members in groups]


def config_differences(groups) -> dict:
    """config key -> one value per group, for the keys outside the factor where groups differ."""
    flats = []
    for g in groups:
        r = g[0]
        config = {k: v for k, v in (r.get("config") or {}).items() if k not in NOT_IN_IDENTITY}
        factor = factor_of(r)
        flat = {k: v for k, v in flatten(config).items() if not (factor and _under(k, factor))}
        flats.append(flat)
    keys = sorted({k for f in flats for k in f})
    missing = object()
    out = {}
    for k in keys:
        values = [f.get(k, missing) for f in flats]
        if any(_canonical(v) != _canonical(values[0]) for v in values if v is not missing) or missing in values:
            out[k] = [None if v is missing else v for v in values]
    return out


def _seeds(rs) -> str:
    seeds = sorted({r.get("seed") for r in rs}, key=lambda s: (0, s) if isinstance(s, int) else (1, str(s)))
    return ", ".join(str(s) for s in seeds)


def _files(rs, limit: int = 2) -> str:
    """' (path, path and N more)' for results read from files, '' for bare dicts."""
    paths = sorted(r["_path"] for r in rs if r.get("_path"))
    if not paths:
        return ""
    shown = ", ".join(paths[:limit])
    return " (" + shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "") + ")"


def check(results, *, baseline: str, others, allow_mixed: bool = False) -> dict:
    """The ``identity`` block of analysis.json; IdentityError when identities differ (unless allowed).

    Also refuses results whose recorded hashes disagree with their config block.
    """
    problems = [(r, hashes(r)[2]) for r in results]
    problems = [(r, p) for r, p in problems if p]
    groups = group(results)
    differences = []
    if len(groups) > 1:
        idents = [identity(g[0]) for g in groups]
        for part in PARTS:
            values = [ident.get(part) for ident in idents]
            if all(part in ident for ident in idents) and len({_canonical(v) for v in values}) > 1:
                differences.append(part)
    by_comparison = {}
    for arm in others:
        sub = group([r for r in results if str(r.get("arm")) in (baseline, arm)]) if len(groups) > 1 else [results]
        parts = []
        if len(sub) > 1:
            idents = [identity(g[0]) for g in sub]
            parts = [p for p in PARTS if all(p in i for i in idents) and len({_canonical(i.get(p)) for i in idents}) > 1]
        by_comparison[arm] = parts
    block = {
        "consistent": len(groups) == 1 and not problems,
        "allowed_mixed": bool(allow_mixed and (len(groups) > 1 or problems)),
        "parts": list(PARTS),
        "differs": differences,
        "comparisons": {arm: {"baseline": baseline, "differs": parts} for arm, parts in by_comparison.items()},
        "groups": [_group_summary(g, files=len(groups) > 1) for g in groups],
        "hash_disagreements": [{"path": where(r), "seed": r.get("seed"), "arm": r.get("arm"), "problem": p}
                               for r, p in problems],
    }
    if block["consistent"] or allow_mixed:
        return block
    within = {arm: h for arm, h in configs_by_arm(results).items() if len(h) > 1}
    raise IdentityError(describe(groups, differences, by_comparison, problems, baseline, within))


def configs_by_arm(results) -> dict:
    """arm -> config_hash -> the seeds of that arm's runs with it (hashes recomputed from each result's
    config block, in the results' order). The config_hash holds the factor's value, so it differs
    between arms by design; within one arm more than one means runs of other settings are mixed in,
    which no flag makes comparable."""
    by_arm: dict[str, dict] = {}
    for r in results:  # one pass
        config_hash = hashes(r)[0]
        if config_hash is not None:
            by_arm.setdefault(str(r.get("arm")), {}).setdefault(str(config_hash), []).append(r.get("seed"))
    return by_arm


def _group_summary(g, files: bool) -> dict:
    """A group's identity, size and seeds per arm; with ``files`` (more than one group), its first files."""
    seeds: dict[str, list] = {}
    for r in g:  # one pass: a group may hold 10,000 results
        seeds.setdefault(str(r.get("arm")), []).append(r.get("seed"))
    summary = {"identity": identity(g[0]), "n_results": len(g), "arms": {arm: seeds[arm] for arm in sorted(seeds)}}
    if files:
        summary["files"] = sorted(where(r) for r in g)[:4]
    return summary


def describe(groups, differences, by_comparison, problems, baseline, within=None) -> str:
    """The refusal in words; ``within``: arm -> config_hash -> seeds for arms whose own runs differ in
    config, where --allow-mixed-identity would be refused again and so is not offered."""
    parts = []
    if len(groups) > 1:
        lines = []
        idents = [identity(g[0]) for g in groups]
        for part in differences:
            shown = "; ".join(
                f"{'1 process' if part == 'env.world' and ident.get(part) is None else _short(ident.get(part))} for "
                + ", ".join(f"arm {arm} seeds {_seeds([r for r in g if str(r.get('arm')) == arm])}"
                            for arm in sorted({str(r.get('arm')) for r in g}))
                + _files(g)
                for ident, g in zip(idents, groups)
            )
            lines.append(f"{_LABELS[part]}: {shown}")
        config = config_differences(groups) if "base_hash" in differences else {}
        if config:
            lines.append("The configs differ at " + "; ".join(
                f"{k}: {apart(vals)}" for k, vals in list(config.items())[:8]))
        per = "; ".join(f"{arm} vs {baseline}: {', '.join(_LABELS[p].split(' (')[0] for p in ps) or 'nothing'}"
                        for arm, ps in by_comparison.items())
        parts.append(
            f"These results have {len(groups)} different identities, so a difference between arms would "
            f"mix the factor with other changes. " + ". ".join(lines) + "."
            + (f" Per comparison, what differs: {per}." if per else "")
        )
    if problems:
        parts.append("Results whose recorded hash disagrees with their own config block: " + "; ".join(
            f"{where(r)} {p}" for r, p in problems[:6]) + (f" and {len(problems) - 6} more" if len(problems) > 6 else "")
            + ".")
    fixes = ("Compare only results of one identity: point the analysis at a folder that holds one, rerun "
             "the odd runs (resume reruns a run whose config or code changed), analyse each configuration "
             "on its own with --grid")
    if within:
        arms = "; ".join(f"arm {arm}: " + ", ".join(f"{h} for seeds {', '.join(map(str, seeds))}"
                                                    for h, seeds in sorted(by_hash.items()))
                         for arm, by_hash in within.items())
        parts.append(f"{fixes}. Runs of one arm hold different configurations ({arms}), which no flag makes "
                     "comparable (--allow-mixed-identity compares arms of different identities, never the "
                     "runs within one arm).")
    else:
        parts.append(f"{fixes}, or compare anyway with --allow-mixed-identity (recorded in analysis.json).")
    return " ".join(parts)


__all__ = ["check", "config_differences", "configs_by_arm", "describe", "group"]
