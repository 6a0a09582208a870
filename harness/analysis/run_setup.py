"""The setup a reader needs to judge the numbers: the distinct determinism modes, devices,
precisions and thread counts across the analysed runs (analysis.json's ``setup``)."""

from __future__ import annotations


UNKNOWN = "unknown"


def setup(usable) -> dict:
    """Distinct values across the analysed runs of what decides their bits and speed."""
    found: dict[str, set] = {"determinism": set(), "device": set(), "precision": set(), "threads": set()}
    seen = set()  # the identity dicts (run_identity.identity) already read: their results share env and precision
    for run in usable.values():
        r = run["result"]
        env = r.get("env") or {}
        ident = r.get("_identity")
        if ident is not None and "mode" in env:  # its config's determinism.mode is not read: env's decides
            if id(ident) in seen:
                continue
            seen.add(id(ident))
        config = r.get("config") or {}
        # a command that did not report them (command_env.py) records its mode and device as null:
        # unknown, never the mode its config asked for, which nothing applied in the script
        mode = (env["mode"] or UNKNOWN) if "mode" in env else (config.get("determinism") or {}).get("mode")
        device = (env["device"] or UNKNOWN) if "device" in env else None
        if env.get("device_name"):
            device = f"{device} ({env['device_name']})"
        for key, value in (("determinism", mode), ("device", device), ("precision", _precision(config, env)),
                           ("threads", env.get("threads"))):
            if value is not None:
                found[key].add(str(value))
    return {key: sorted(values) for key, values in found.items()}


def _precision(config, env):
    """The precision as a reader should take it: "fp32" only when float32 math was float32
    (env.math_modes, harness/training/math_modes.py), else what was allowed inside it."""
    if "precision" in env and env["precision"] is None:  # a command that did not report it (command_env.py)
        return UNKNOWN
    precision, modes = config.get("precision"), env.get("math_modes") or {}
    cuda = str(env.get("device", "")).startswith("cuda")
    inside = [what for what, on in (
        ("TF32 in matmul", cuda and modes.get("cuda_matmul") == "tf32"),
        ("TF32 in cuDNN", cuda and "tf32" in (modes.get("cudnn_conv"), modes.get("cudnn_rnn"))),
        (f"{modes.get('mkldnn_matmul')} allowed in oneDNN matmul", not cuda and modes.get("mkldnn_matmul") in ("tf32", "bf16")),
    ) if on]
    return f"{precision} ({', '.join(inside)})" if precision is not None and inside else precision
