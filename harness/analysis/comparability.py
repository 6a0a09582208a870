"""Which results may be compared: one identity per comparison, one run per (seed, arm).

A run's identity is what decides its numbers apart from the seed and the factor:

- the config outside the factor: ``base_hash``, recomputed here from the result's own ``config``
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

The same (seed, arm) found in several files is one run when the copies are bit-identical (same
identity, fingerprints, status and metrics: e.g. a sweep folder analysed together with an older
copy of itself); copies that differ are named with their paths and refused. A completed run whose
final fingerprint equals that of another seed is a copy relabelled as a new seed: refused, named.

Pure functions over result dicts (no Hydra, no torch): analysis.py calls them.
"""

from __future__ import annotations

import hashlib
import json

from harness.analysis.shown_apart import apart

from harness.analysis.math_identity import MATH_PARTS, math_part
from harness.results import NOT_IN_IDENTITY, config_digest, flatten, key_bytes

_DIGESTS: dict = {}  # (config without seed/arm, factor) -> (config_hash, base_hash): configs repeat
_IDENTITIES: dict = {}  # what identity() reads, as bytes -> its identity dict

# identity part -> the config path that, when it is (under) the factor, lets arms differ in it
ENV_PARTS = {
    "env.device_type": "device",
    "env.gpu": "device",
    "env.torch": None,
    "env.cpu_capability": None,
    "env.threads": "determinism.threads",
    "env.determinism_mode": "determinism.mode",
    "env.precision": "precision",
    "env.math_modes": "determinism.float32_matmul_precision|determinism.tf32_cudnn",  # either lets arms differ
    "env.math_environment": None,
}
PARTS = ("base_hash", "code_version", *ENV_PARTS)
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
}


class IdentityError(ValueError):
    """Results of different identities, or conflicting copies of one run; the message names them."""


def _under(key: str, path: str) -> bool:
    return key == path or key.startswith(path + ".")


def _canonical(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def where(r) -> str:
    """How to name a result in a message: its file when it came from one."""
    return str(r.get("_path") or f"(result of seed {r.get('seed')} arm {r.get('arm')})")


def factor_of(r) -> str | None:
    factor = r.get("factor")
    if not factor:
        factor = ((r.get("config") or {}).get("ab") or {}).get("factor")
    return factor


def hashes(r) -> tuple:
    """(config_hash, base_hash, problem): recomputed from the config block when it has one.

    ``problem`` says when a recorded hash disagrees with the config block (the file was edited, or
    written under another hashing rule): such a result does not vouch for its own identity.
    """
    cached = r.get("_hashes")
    if cached is not None:
        return cached
    config = r.get("config")
    recorded = (r.get("config_hash"), r.get("base_hash"))
    if not isinstance(config, dict):
        out = (recorded[0], recorded[1], None)
    else:
        factor = factor_of(r)
        key = (key_bytes({k: v for k, v in config.items() if k not in NOT_IN_IDENTITY}, sort_keys=False), factor)
        computed = _DIGESTS.get(key)
        if computed is None:
            if len(_DIGESTS) > 10_000:
                _DIGESTS.clear()
            computed = _DIGESTS[key] = (config_digest(config), config_digest(config, exclude_factor=factor))
        wrong = [f"{name} {old} (its config block gives {new})"
                 for name, old, new in zip(("config_hash", "base_hash"), recorded, computed)
                 if old is not None and old != new]
        out = (computed[0], computed[1], ("records " + " and ".join(wrong)) if wrong else None)
    r["_hashes"] = out  # a private key, like _path: never written back
    return out


def _env_part(r, part):
    env = r.get("env") or {}
    if part == "env.device_type":
        device = env.get("device")
        return None if device is None else str(device).split(":")[0]
    if part == "env.gpu":
        return env.get("device_name") if str(env.get("device", "")).startswith("cuda") else None
    if part == "env.determinism_mode":
        return env.get("mode")
    if part == "env.precision":
        return env.get("precision", (r.get("config") or {}).get("precision"))
    if part in MATH_PARTS:
        return math_part(env, part)
    return env.get(part[len("env."):])


def identity(r) -> dict:
    """part -> value for one result; env parts the factor may change are left out, and so are the
    env parts a failed run never recorded (it may have failed before the environment was read)."""
    cached = r.get("_identity")
    if cached is not None:
        return cached
    factor = factor_of(r)
    # what the parts are read from: a sweep's results share it, so each distinct one is read once
    key = key_bytes([factor, hashes(r)[1], r.get("code_version"), r.get("env"), r.get("status") == "completed",
                     (r.get("config") or {}).get("precision") if isinstance(r.get("config"), dict) else None],
                    sort_keys=False)
    out = _IDENTITIES.get(key)
    if out is None:
        out = {"base_hash": hashes(r)[1], "code_version": _canonical(r.get("code_version"))}
        for part, path in ENV_PARTS.items():
            if path is not None and factor and any(_under(p, factor) or _under(factor, p) for p in path.split("|")):
                continue
            value = _env_part(r, part)
            if value is None and r.get("status") != "completed":
                continue
            out[part] = value
        if len(_IDENTITIES) > 10_000:
            _IDENTITIES.clear()
        _IDENTITIES[key] = out
    r["_identity"] = out  # shared by the results it describes: read, never changed
    return out


def _hashable(value):
    return value if isinstance(value, (str, int, float, bool, type(None))) else key_bytes(value)


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
        "groups": [_group_summary(g) for g in groups],
        "hash_disagreements": [{"path": where(r), "seed": r.get("seed"), "arm": r.get("arm"), "problem": p}
                               for r, p in problems],
    }
    if len(groups) == 1:
        block["groups"][0].pop("files", None)
    if block["consistent"] or allow_mixed:
        return block
    raise IdentityError(describe(groups, differences, by_comparison, problems, baseline))


def _group_summary(g) -> dict:
    ident = identity(g[0])
    arms = sorted({str(r.get("arm")) for r in g})
    return {
        "identity": ident,
        "n_results": len(g),
        "arms": {arm: [r.get("seed") for r in g if str(r.get("arm")) == arm] for arm in arms},
        "files": sorted(where(r) for r in g)[:4],
    }


def describe(groups, differences, by_comparison, problems, baseline) -> str:
    parts = []
    if len(groups) > 1:
        lines = []
        idents = [identity(g[0]) for g in groups]
        for part in differences:
            shown = "; ".join(
                f"{_short(ident.get(part))} for "
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
    parts.append(
        "Compare only results of one identity: point the analysis at a folder that holds one, rerun "
        "the odd runs (resume reruns a run whose config or code changed), analyse each configuration "
        "on its own with --grid, or compare anyway with --allow-mixed-identity (recorded in analysis.json)."
    )
    return " ".join(parts)


def _short(value) -> str:
    if value is None:
        return "missing"
    text = _canonical(value) if not isinstance(value, (int, float)) or isinstance(value, bool) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- one run per (seed, arm) ----------------------------------------------------------------------


def _bits(r) -> str:
    fingerprints = r.get("fingerprints") or {}
    return _canonical({
        "identity": identity(r), "config_hash": hashes(r)[0], "status": r.get("status"),
        "metrics": r.get("metrics"), "error": r.get("error"),
        "fingerprints": {k: fingerprints.get(k) for k in ("init", "data_order", "final")},
    })


def one_per_run(results) -> tuple[list[dict], list[dict]]:
    """(results with bit-identical copies of a (seed, arm) merged, the merged copies named).

    IdentityError when copies of a (seed, arm) differ, or a completed run's final fingerprint
    appears under another seed (a copy relabelled as a new seed).
    """
    by_run: dict[tuple, list] = {}
    for r in results:
        by_run.setdefault((r.get("seed"), str(r.get("arm"))), []).append(r)
    kept, copies, conflicts = [], [], []
    for (seed, arm), rs in by_run.items():
        if len(rs) == 1:
            kept.append(rs[0])
            continue
        rs = sorted(rs, key=where)
        kept.append(rs[0])
        if len({_bits(r) for r in rs}) == 1:
            copies.append({"seed": seed, "arm": arm, "kept": where(rs[0]), "copies": [where(r) for r in rs[1:]]})
        else:
            shown = "; ".join(f"{where(r)}: {_what(r)}" for r in rs)
            conflicts.append(f"seed {seed} arm {arm} in {len(rs)} files that differ ({shown})")
    finals: dict[str, list] = {}
    for r in kept:
        final = (r.get("fingerprints") or {}).get("final")
        if final and r.get("status") == "completed":
            finals.setdefault(final, []).append(r)
    relabelled = [rs for rs in finals.values() if len(rs) > 1 and len({r.get("seed") for r in rs}) > 1]
    if conflicts or relabelled:
        parts = []
        if conflicts:
            parts.append("The same (seed, arm) has conflicting results: " + "; ".join(conflicts) + ". A run "
                         "is one result: copies count once only when they are bit-identical. Remove or "
                         "move aside the copy that is not current (its folder is named above).")
        for rs in relabelled:
            parts.append(
                "Identical final weights under different seeds (a copy relabelled as a new seed): "
                + ", ".join(f"seed {r.get('seed')} arm {r.get('arm')}" + (f" ({r['_path']})" if r.get("_path") else "")
                            for r in rs)
                + f", final fingerprint {(rs[0].get('fingerprints') or {}).get('final')}. Different seeds "
                "cannot end at the same bits; remove the copy and rerun that seed."
            )
        raise IdentityError(" ".join(parts))
    return kept, copies


def _what(r) -> str:
    fingerprints = r.get("fingerprints") or {}
    return (f"config_hash {hashes(r)[0]}, code {_short(r.get('code_version'))}, status {r.get('status')}, "
            f"final {fingerprints.get('final')}")


def inputs_digest(results) -> str:
    """A digest of which runs an analysis used: an old analysis.json with another one is stale.
    (Not of where the files are: the same runs in another folder layout give the same analysis.)"""
    rows = sorted(key_bytes([r.get("seed"), str(r.get("arm")), hashes(r)[0],
                              (r.get("fingerprints") or {}).get("final"), r.get("status"), r.get("metrics")])
                  for r in results)
    return hashlib.sha256(b"\n".join(rows)).hexdigest()[:16]


__all__ = ["IdentityError", "PARTS", "check", "config_differences", "group", "hashes",
           "identity", "inputs_digest", "one_per_run"]
