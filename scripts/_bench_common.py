"""What bench_determinism.py and replicate_divergence.py share: the modes, the model, the synthetic
batches, one training step, and the header that says where the numbers come from.

Only torch, torchvision, numpy and the harness modules that import neither Hydra nor wandb
(determinism, models, data, fingerprint, rng): these scripts must run on a bare GPU machine.
"""

from __future__ import annotations

import os
import shlex
import sys
from datetime import datetime, timezone

# A script in scripts/ sees scripts/ on sys.path, not the repo root. Put the checkout's root first so
# `python scripts/x.py` uses this checkout's harness, installed or not (gpu_check.sh also sets
# PYTHONPATH, which leads to the same place).
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

import harness  # noqa: E402  (sets CUBLAS_WORKSPACE_CONFIG; must come before torch)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from harness.builtin import data, models  # noqa: E402
from harness.training.determinism import Settings, capture_environment  # noqa: E402
from harness.training.rng import Streams  # noqa: E402

# The four modes of the reference table, by the key used on the command line and in the JSON.
# "default" is PyTorch's own default; the harness calls this determinism.mode=off.
MODE_LABELS = {
    "benchmark": "default, cudnn.benchmark on",
    "default": "default, cudnn.benchmark off",
    "deterministic": "deterministic, fill_uninitialized_memory on",
    "deterministic_nofill": "deterministic, fill_uninitialized_memory off",
}


def mode_settings(mode: str, threads: int) -> Settings:
    """harness.training.determinism.Settings for one of MODE_LABELS' keys."""
    if mode == "benchmark":
        return Settings(mode="off", threads=threads, cudnn_benchmark=True)
    if mode == "default":
        return Settings(mode="off", threads=threads, cudnn_benchmark=False)
    if mode == "deterministic":
        return Settings(mode="strict", threads=threads, fill_uninitialized_memory=True)
    if mode == "deterministic_nofill":
        return Settings(mode="strict", threads=threads, fill_uninitialized_memory=False)
    raise ValueError(f"mode {mode!r} is not one of {', '.join(MODE_LABELS)}")


def add_common_args(parser) -> None:
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--model", default="resnet18", choices=["resnet18", "small_cnn"])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--channels", type=int, default=3, help="3 for CIFAR-shaped, 1 for digits-shaped")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (the harness default is 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="folder for the markdown, JSON (and PNG) output")


def build_model(args, device: torch.device) -> torch.nn.Module:
    """The model, initialised from the harness's init stream: the same seed gives the same weights."""
    Streams.from_seed(args.seed).seed_init()
    if args.model == "resnet18":
        return models.resnet18_cifar(args.channels, args.classes).to(device)
    return models.SmallCNN(args.channels, args.classes, args.image_size, width=32, dropout=0.0).to(device)


def make_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    """conf/optim/sgd.yaml's optimizer: what a harness run would train with."""
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)


def make_batches(args, n_batches: int, device: torch.device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """n_batches fixed batches of the harness's synthetic data (class template + noise), on device.

    The data comes from a fixed generator, so every run and every mode sees exactly these batches.
    """
    # the test split is drawn after the training one: one test example leaves the batches as they were
    ds = data.synthetic(num_train=n_batches * args.batch, num_test=1, num_classes=args.classes,
                        channels=args.channels, image_size=args.image_size)
    xs = ds.train_x.to(device).split(args.batch)
    ys = ds.train_y.to(device).split(args.batch)
    return list(zip(xs, ys))


def train_step(model, optimizer, x: torch.Tensor, y: torch.Tensor, bf16: bool) -> torch.Tensor:
    """One optimizer step as the built-in loop takes it: autocast forward, fp32 loss, SGD update."""
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=bf16):
        logits = model(x)
    loss = F.cross_entropy(logits.float(), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.detach()


def header(args, device: torch.device, settings: Settings) -> dict:
    """Where and how the numbers were made; threads and library versions decide them."""
    env = capture_environment(settings, device)
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "device": str(device),
        "device_name": env["device_name"],
        "torch": env["torch"],
        "cuda": env["cuda"],
        "cudnn": env["cudnn"],
        "threads": env["threads"],
        "CUBLAS_WORKSPACE_CONFIG": env["CUBLAS_WORKSPACE_CONFIG"],
        # Other work on the machine slows a CPU run down, and unevenly: say how busy it was.
        "load_average_1min": os.getloadavg()[0],
        "cpu_count": os.cpu_count(),
        "model": args.model,
        "batch": args.batch,
        "input": f"{args.channels}x{args.image_size}x{args.image_size}",
        "command": " ".join(shlex.quote(a) for a in ["python"] + sys.argv),
        "env": env,
    }


def header_lines(h: dict) -> list[str]:
    """The header as markdown lines (also printed to the terminal)."""
    device = h["device_name"] if h["device"] == "cpu" else f"{h['device_name']} (CUDA {h['cuda']}, cuDNN {h['cudnn']})"
    return [
        f"- date: {h['date']}",
        f"- device: {h['device']} — {device}",
        f"- torch: {h['torch']}, threads: {h['threads']} (of {h['cpu_count']} CPUs; "
        f"load average {h['load_average_1min']:.1f} at the start)",
        f"- model: {h['model']}, batch {h['batch']}, input {h['input']} (synthetic)",
        f"- command: `{h['command']}`",
    ]


def out_dir(path: str | None) -> str | None:
    if path is not None:
        os.makedirs(path, exist_ok=True)
    return path
