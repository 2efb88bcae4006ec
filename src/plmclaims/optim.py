"""The learning-rate schedule every training run here uses."""
from __future__ import annotations


def linear_warmup_decay(opt, warmup: int, steps: int):
    """Linear warm-up to the peak learning rate over `warmup` steps, then linear decay to zero at `steps`."""
    import torch

    warmup = max(1, warmup)
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup))))
