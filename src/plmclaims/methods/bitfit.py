"""BitFit (Ben Zaken et al. 2022, arXiv 2106.10199): train only the bias terms, plus the task head."""
from __future__ import annotations

from .heads import head_names


def prepare(model, params: dict):
    heads = head_names(model)
    for name, p in model.named_parameters():
        p.requires_grad = name.endswith(".bias") or any(name.startswith(h) for h in heads)
    return model
