"""The built-in training loss: cross-entropy, optionally with label smoothing, a focal term, a
confidence penalty and logit noise. A loss ``_target_`` (conf/loss/*.yaml); a researcher's own loss
term is any callable ``loss(logits, target) -> scalar tensor`` built the same way. Evaluation always
uses plain cross-entropy (``eval_loss``), so arms compare on one scale."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from harness import HarnessError


class LossError(ValueError, HarnessError):
    pass


class ClassificationLoss:
    """Cross-entropy reshaped by optional terms; the values are checked when it is built."""

    def __init__(self, label_smoothing: float = 0.0, focal_gamma: float = 0.0, confidence_penalty: float = 0.0,
                 logit_noise: float = 0.0):
        for key, value in (("label_smoothing", label_smoothing), ("focal_gamma", focal_gamma),
                           ("confidence_penalty", confidence_penalty), ("logit_noise", logit_noise)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise LossError(f"loss.{key}={value!r} must be a number.")
        if not 0.0 <= label_smoothing < 1.0:
            raise LossError(f"loss.label_smoothing={label_smoothing} must be in [0, 1).")
        for key, value in (("focal_gamma", focal_gamma), ("confidence_penalty", confidence_penalty),
                           ("logit_noise", logit_noise)):
            if value < 0:
                raise LossError(f"loss.{key}={value} must be >= 0.")
        self.label_smoothing = float(label_smoothing)
        self.focal_gamma = float(focal_gamma)
        self.confidence_penalty = float(confidence_penalty)
        self.logit_noise = float(logit_noise)

    def __call__(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Random draws (logit_noise) come from the global RNG: the run's model stream."""
        logits = logits.float()
        if self.logit_noise > 0:
            logits = logits + self.logit_noise * torch.randn_like(logits)
        if self.focal_gamma == 0 and self.confidence_penalty == 0:
            # Plain or label-smoothed cross-entropy: PyTorch's fused op, the same formula as below.
            return F.cross_entropy(logits, target, label_smoothing=self.label_smoothing)
        log_p = F.log_softmax(logits, dim=1)
        per_example = F.nll_loss(log_p, target, reduction="none")
        if self.label_smoothing > 0:
            smooth = -log_p.mean(dim=1)
            per_example = (1 - self.label_smoothing) * per_example + self.label_smoothing * smooth
        if self.focal_gamma > 0:
            p_t = log_p.gather(1, target[:, None]).squeeze(1).exp()
            per_example = (1 - p_t).pow(self.focal_gamma) * per_example
        loss = per_example.mean()
        if self.confidence_penalty > 0:
            entropy = -(log_p.exp() * log_p).sum(dim=1).mean()
            loss = loss - self.confidence_penalty * entropy
        return loss


def eval_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Summed plain cross-entropy (divide by n for the mean)."""
    return F.cross_entropy(logits.float(), target, reduction="sum")
