"""The training loss: cross-entropy, optionally with label smoothing, a focal term, a confidence
penalty and logit noise. Evaluation always uses plain cross-entropy, so arms compare on one scale."""

from __future__ import annotations

import torch
import torch.nn.functional as F


class LossError(ValueError):
    pass


def check(cfg) -> None:
    if not 0.0 <= cfg.label_smoothing < 1.0:
        raise LossError(f"loss.label_smoothing={cfg.label_smoothing} must be in [0, 1).")
    for key in ("focal_gamma", "confidence_penalty", "logit_noise"):
        if getattr(cfg, key) < 0:
            raise LossError(f"loss.{key}={getattr(cfg, key)} must be >= 0.")


def training_loss(cfg, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """cfg: the ``loss`` node. Random draws (logit_noise) come from the global, model-stream RNG."""
    logits = logits.float()
    if cfg.logit_noise > 0:
        logits = logits + cfg.logit_noise * torch.randn_like(logits)
    if cfg.focal_gamma == 0 and cfg.confidence_penalty == 0:
        # Plain or label-smoothed cross-entropy: PyTorch's fused op, the same formula as below.
        return F.cross_entropy(logits, target, label_smoothing=cfg.label_smoothing)
    log_p = F.log_softmax(logits, dim=1)
    per_example = F.nll_loss(log_p, target, reduction="none")
    if cfg.label_smoothing > 0:
        smooth = -log_p.mean(dim=1)
        per_example = (1 - cfg.label_smoothing) * per_example + cfg.label_smoothing * smooth
    if cfg.focal_gamma > 0:
        p_t = log_p.gather(1, target[:, None]).squeeze(1).exp()
        per_example = (1 - p_t).pow(cfg.focal_gamma) * per_example
    loss = per_example.mean()
    if cfg.confidence_penalty > 0:
        entropy = -(log_p.exp() * log_p).sum(dim=1).mean()
        loss = loss - cfg.confidence_penalty * entropy
    return loss


def eval_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Summed plain cross-entropy (divide by n for the mean)."""
    return F.cross_entropy(logits.float(), target, reduction="sum")
