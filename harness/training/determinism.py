"""Deterministic mode, thread pinning and the capture of everything that decides the bits.

No Hydra or wandb here: a plain script (a GPU check, a notebook) can call ``configure`` directly.
"""

from __future__ import annotations

import os
import platform
import re
import sys
from dataclasses import dataclass

import harness  # sets CUBLAS_WORKSPACE_CONFIG before torch is imported

# torch is imported inside the functions: importing this module (the CLI does, for spread_over_gpus)
# stays cheap, so a bad value is refused before torch's seconds of import.

from harness import HarnessError
from harness.training import math_modes
from harness.training.threads import choose_threads, is_auto, measure_load

MODES = ("strict", "warn", "off")


class DeterminismError(HarnessError):
    """Deterministic mode cannot be guaranteed, or an op has no deterministic implementation."""


@dataclass(frozen=True)
class Settings:
    mode: str = "strict"
    threads: int = 2
    fill_uninitialized_memory: bool = False  # see DeterminismConfig in config.py
    cudnn_benchmark: bool = False
    float32_matmul_precision: str = "highest"  # see harness/training/math_modes.py
    tf32_cudnn: bool = False


def settings_from(cfg) -> Settings:
    """The ``determinism`` node of a config (or any object with the same attributes) as Settings."""
    d = cfg.determinism
    threads = d.threads
    if is_auto(threads):  # a config no experiment resolved (a script, a tool): the rule, measured now
        threads = choose_threads(threads, measure_load()).threads
    precision = getattr(d, "float32_matmul_precision", "highest")  # absent in configs older than the key
    return Settings(
        mode=getattr(d.mode, "value", d.mode),
        threads=int(threads),
        fill_uninitialized_memory=bool(d.fill_uninitialized_memory),
        cudnn_benchmark=bool(d.cudnn_benchmark),
        float32_matmul_precision=str(getattr(precision, "value", precision)),
        tf32_cudnn=bool(getattr(d, "tf32_cudnn", False)),
    )


def resolve_device(name: str) -> torch.device:
    """auto -> cuda when available, else cpu. Asking for cuda without one is an error, not a fallback."""
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise DeterminismError(
            "device=cuda was requested but torch.cuda.is_available() is False "
            f"(torch {torch.__version__}, CUDA build {torch.version.cuda}). "
            "Use device=cpu or device=auto."
        )
    if name == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device(name)


def spread_over_gpus(job_num: int) -> None:
    """In a local pool on a machine with several GPUs, job k uses GPU k mod count."""
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() > 1:
        torch.cuda.set_device(job_num % torch.cuda.device_count())


def check_settings(settings: Settings, device=None) -> None:
    """Refuse settings that cannot be made deterministic (configure's checks, torch-free)."""
    if settings.mode not in MODES:
        raise DeterminismError(
            f"determinism.mode={settings.mode!r} is not one of {', '.join(MODES)}."
        )
    if settings.threads < 1:
        raise DeterminismError(
            f"determinism.threads={settings.threads} must be >= 1: the thread count decides the "
            "bits on CPU, so the harness always pins it."
        )
    if settings.cudnn_benchmark and settings.mode != "off":
        raise DeterminismError(
            f"determinism.cudnn_benchmark=true is not allowed with determinism.mode={settings.mode}: "
            "benchmark mode picks convolution algorithms by timing, which changes the bits. "
            "Use determinism.mode=off, or cudnn_benchmark=false."
        )
    if device is not None and device.type == "cuda" and settings.mode != "off":
        check_cublas_workspace()


def configure(settings: Settings, device: torch.device | None = None) -> None:
    """Switch PyTorch into the requested mode and pin the CPU thread count."""
    import torch

    check_settings(settings, device)
    torch.set_num_threads(settings.threads)
    if settings.mode == "off":
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.deterministic = False
        torch.backends.cudnn.benchmark = settings.cudnn_benchmark
    else:
        torch.use_deterministic_algorithms(True, warn_only=settings.mode == "warn")
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    torch.utils.deterministic.fill_uninitialized_memory = settings.fill_uninitialized_memory
    math_modes.pin(settings.float32_matmul_precision, settings.tf32_cudnn)


def check_cublas_workspace(torch_version: str | None = None) -> None:
    """Refuse a cuBLAS workspace setting only where it breaks determinism.

    Before torch 2.10, cuBLAS shared one workspace between streams unless CUBLAS_WORKSPACE_CONFIG
    was ':4096:8' or ':16:8' (read when CUDA creates its first handle; later is too late). Since
    (pytorch PR #161749) torch gives each handle and stream a workspace of its own, which cuBLAS
    documents as enough: any value is deterministic. The value still sizes the workspace, so it may
    choose other kernels: it is recorded in the identity (env.math_environment), not refused.
    """
    import torch

    version = torch_version or torch.__version__
    if tuple(int(p) for p in re.findall(r"\d+", version)[:2]) >= (2, 10):
        return
    value = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if value not in (":4096:8", ":16:8"):
        raise DeterminismError(
            f"CUBLAS_WORKSPACE_CONFIG is {value!r}; deterministic cuBLAS needs ':4096:8' or ':16:8'. "
            "Unset it (the harness then sets it) or export CUBLAS_WORKSPACE_CONFIG=:4096:8."
        )
    if harness.CUDA_INITIALIZED_FIRST and harness.CUBLAS_WORKSPACE_CONFIG_PRESET is None:
        raise DeterminismError(
            "CUDA was initialised before the harness could set CUBLAS_WORKSPACE_CONFIG, so cuBLAS "
            "may run with a nondeterministic workspace. Import harness before anything touches CUDA, "
            "or export CUBLAS_WORKSPACE_CONFIG=:4096:8 in the shell before starting Python."
        )


def explain_nondeterministic_op(error: BaseException) -> str | None:
    """Turn PyTorch's 'does not have a deterministic implementation' error into advice, else None."""
    text = str(error)
    if "deterministic implementation" not in text:
        return None
    match = re.match(r"\s*([\w.:]+) does not have a deterministic implementation", text)
    op = match.group(1) if match else "an op"
    return (
        f"{op} has no deterministic implementation, and determinism.mode=strict refuses to run it. "
        "Ways out: replace the op with a deterministic equivalent (python -m harness.audit lists "
        "every such op and the module that calls it); or determinism.mode=warn to run it anyway "
        "(results are then not bit-exact); or determinism.mode=off."
    )


def capture_environment(settings: Settings, device: torch.device, pinned: dict | None = None) -> dict:
    """Everything that decides the bits of a run, for result.json. ``pinned``: the math modes the
    unit was pinned to (math_modes.read() after configure); those in force now are added when a
    training function changed them."""
    import torch

    cuda = device.type == "cuda"
    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": _cpu_name(),
        "torch": torch.__version__,
        "numpy": _version("numpy"),
        "harness": harness.__version__,
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if cuda else _cpu_name(),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "threads": torch.get_num_threads(),
        # the CPU kernels in use (AVX2 vs AVX512 give other bits for the same run)
        "cpu_capability": _cpu_capability(),
        "interop_threads": torch.get_num_interop_threads(),
        "mode": settings.mode,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "fill_uninitialized_memory": torch.utils.deterministic.fill_uninitialized_memory,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "CUBLAS_WORKSPACE_CONFIG": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        "cublas_set_by_harness": harness.CUBLAS_WORKSPACE_CONFIG_PRESET is None,
        "cuda_initialized_before_harness": harness.CUDA_INITIALIZED_FIRST,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
    }
    now = math_modes.read()
    env["math_modes"] = pinned if pinned is not None else now
    if pinned is not None and now != pinned:
        env["math_modes_at_end"] = now  # the training function switched them: part of the identity too
    env["math_environment"] = math_modes.environment()
    return env


def cpu_capability_of_this_machine() -> str | None:
    """What torch.backends.cpu.get_cpu_capability() says on this machine, without importing torch, for
    the command's own torch process (its CPU kernels, hence its bits, follow it): ATen's rule on an x86
    Linux host (ATEN_CPU_CAPABILITY first; AVX512 with avx512vl/bw/dq and FMA, AVX2 with avx2 and FMA,
    else DEFAULT). None elsewhere: not recorded rather than guessed."""
    forced = os.environ.get("ATEN_CPU_CAPABILITY")
    if forced in ("default", "avx2", "avx512"):
        return forced.upper()
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        return None
    if not flags:
        return None
    if {"avx512vl", "avx512bw", "avx512dq", "fma"} <= flags:
        return "AVX512"
    return "AVX2" if {"avx2", "fma"} <= flags else "DEFAULT"


def installed_torch() -> dict:
    """torch.version's __version__ (with its build suffix), cuda and hip, read from its file without
    importing torch when it is not imported yet (an import costs seconds)."""
    import importlib.util

    version = sys.modules["torch"].version if "torch" in sys.modules else None
    if version is None:
        found = importlib.util.find_spec("torch")
        spec = importlib.util.spec_from_file_location(
            "_harness_torch_version", os.path.join(os.path.dirname(found.origin), "version.py"))
        version = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(version)  # a file of constants: torch itself is not imported
    return {"__version__": str(version.__version__), "cuda": getattr(version, "cuda", None),
            "hip": getattr(version, "hip", None)}


def _cpu_capability() -> str | None:
    import torch

    try:
        return torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):
        return None


def _version(module: str) -> str | None:
    mod = sys.modules.get(module)
    return getattr(mod, "__version__", None)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
