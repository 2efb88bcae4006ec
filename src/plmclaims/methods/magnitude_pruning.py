"""Global magnitude pruning of an encoder's linear weights (P9, Gordon et al. 2020).

The pruned set is every ``nn.Linear`` weight inside the transformer layers (``base_model.encoder``): attention
projections and feed-forward layers. Embeddings and the pooler stay dense, as in Gordon et al., who prune the
encoder's matrices; biases stay too (they are a tiny share of the weights). torch's ``global_unstructured`` ranks
all those weights together by |w|, so layers lose different fractions, and ``prune.remove`` bakes the zeros in.
"""
from __future__ import annotations

import torch
from torch.nn.utils import prune

from ..errors import UserError


def encoder_linears(model) -> list[tuple[str, torch.nn.Linear]]:
    """(name, module) of every Linear in the encoder's layers, not the embeddings, the pooler or a task head."""
    encoder = getattr(model.base_model, "encoder", None)
    if encoder is None:
        raise UserError(f"{type(model).__name__}: no base_model.encoder; magnitude pruning supports BERT-style encoders")
    found = [(name, m) for name, m in encoder.named_modules() if isinstance(m, torch.nn.Linear)]
    if not found:
        raise UserError(f"{type(model).__name__}: its encoder has no Linear layers to prune")
    return found


def sparsity(model) -> float:
    """Fraction of exact zeros over the encoder's Linear weights."""
    weights = [m.weight for _, m in encoder_linears(model)]
    return sum(int((w == 0).sum()) for w in weights) / sum(w.numel() for w in weights)


def magnitude_prune(model, fraction: float) -> float:
    """Zero the `fraction` of smallest-|w| encoder Linear weights, globally, in place; returns the achieved sparsity."""
    if not 0.0 <= fraction < 1.0:
        raise UserError(f"pruning fraction {fraction!r} out of range; allowed values: 0 <= fraction < 1")
    params = [(m, "weight") for _, m in encoder_linears(model)]
    if fraction > 0:
        prune.global_unstructured(params, pruning_method=prune.L1Unstructured, amount=float(fraction))
        for module, name in params:
            prune.remove(module, name)  # make it permanent: plain weights again, no mask or forward hook left
    return sparsity(model)
