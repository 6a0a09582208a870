#!/usr/bin/env bash
# One command on one GPU: what deterministic mode costs (scripts/bench_determinism.py), whether
# two same-seed runs part ways (scripts/replicate_divergence.py), ResNet18 on CIFAR-shaped batches,
# and 20 units side by side on the one GPU against one alone (scripts/gpu_side_by_side.py: the
# default experiment's small CNN, then ResNet18; goal <= 3x, the same bits as alone).
#
#   scripts/gpu_check.sh OUTDIR
#
# Needs torch, torchvision, numpy, scipy, matplotlib (for the figure) and this checkout, which need
# not be pip-installed (PYTHONPATH points at it). No Hydra, no wandb: checked before anything runs.
# Sized for under 8 minutes on an H200: about 4,400 + 1,200 ResNet18 steps at batch 128, a couple of
# minutes at the reference's ~15-20 ms/step; and the two parts are cut off at 300 s and 150 s, so a
# hang cannot run past 8 minutes either. OUTDIR gets (flat, 7 files):
#   env.txt                    date, nvidia-smi, torch version
#   gpu_check.log              everything printed
#   determinism_cost.md/.json  the cost table (4 modes x fp32, bf16)
#   divergence.md/.json/.png   the same-seed pairs: first divergent step, max |dw|, curves
#   side_by_side.txt           20 units at once vs one alone, small CNN and ResNet18 (about 90 s more)
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
out=$1
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
export PYTHONPATH="$repo"
export PYTHONUNBUFFERED=1  # the log shows progress as it happens, and what ran before a timeout
py=${PYTHON:-$(command -v python || command -v python3)}
mkdir -p "$out"
log="$out/gpu_check.log"
: >"$log"

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "python: $py"
  nvidia-smi || echo "nvidia-smi failed with exit status $?"
  echo "\$ python -c 'import torch; print(torch.__version__)'"
  "$py" -c 'import torch; print(torch.__version__)'
} 2>&1 | tee "$out/env.txt" >>"$log"
cat "$out/env.txt"

# Fail in seconds, not after the runs: the GPU path must import neither Hydra nor wandb, and a GPU
# must be there (resolve_device would refuse later anyway, with less context).
"$py" - <<'EOF' 2>&1 | tee -a "$log"
import sys

sys.path.insert(0, "scripts")
import bench_determinism, replicate_divergence, gpu_side_by_side  # noqa: E401,F401  (imports harness too)

bad = sorted({m.split(".")[0] for m in sys.modules} & {"hydra", "omegaconf", "wandb"})
if bad:
    sys.exit(f"the GPU path imported {', '.join(bad)}; it must run with torch, numpy and scipy alone")
import torch

if not torch.cuda.is_available():
    sys.exit(f"torch {torch.__version__} sees no CUDA device: this check needs a GPU")
print(f"imports ok (no hydra, omegaconf, wandb); GPU: {torch.cuda.get_device_name()}")
EOF

# Cost: 8 cells x 10 rounds x (5 warm-up + 50 timed) steps, about 4,400 ResNet18 steps.
timeout 300 "$py" scripts/bench_determinism.py --device cuda --model resnet18 --batch 128 \
  --steps 50 --warmup 5 --repeats 10 --out "$out" 2>&1 | tee -a "$log"

# Divergence: 3 pairs x 2 runs x 200 ResNet18 steps, with a fingerprint after every step.
timeout 150 "$py" scripts/replicate_divergence.py --device cuda --model resnet18 --batch 128 \
  --steps 200 --out "$out" 2>&1 | tee -a "$log"

# Side by side: 20 processes x 330 steps of the default experiment's CNN (digits-shaped, batch 64),
# then 20 x 100 ResNet18 steps (CIFAR-shaped, batch 128), each against one unit alone.
{
  timeout 120 "$py" scripts/gpu_side_by_side.py --device cuda --units 20 --model small_cnn --channels 1 \
    --image-size 8 --batch 64 --steps 330 --threads 1
  timeout 180 "$py" scripts/gpu_side_by_side.py --device cuda --units 20 --model resnet18 --batch 128 \
    --steps 100 --threads 1
} 2>&1 | tee "$out/side_by_side.txt" | tee -a "$log"

echo "gpu_check done: $out" | tee -a "$log"
