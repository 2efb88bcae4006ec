"""Attention-head gates, head importance and physical head pruning for BERT-style encoders (P8, Michel et al. 2019).

transformers 5 removed ``head_mask`` and ``prune_heads``, so a head is gated by a forward pre-hook on its
attention block's output projection (``attention.output.dense``): the projection's input is the concatenation of
the heads' context vectors, and multiplying head h's slice by ξ_h is exactly the paper's gate on that head's
output. Physically pruning a head (``prune_heads_physically``) drops its rows of query/key/value and its columns
of the output projection; with the projection's bias kept, that equals a gate of 0 (the tests check both ways).
"""
from __future__ import annotations

from typing import Callable, Iterable

import torch

from ..errors import UserError


def attention_blocks(model) -> list[torch.nn.Module]:
    """The attention blocks (a ``.self`` with heads and an ``.output.dense``), in layer order."""
    blocks = [m for m in model.modules()
              if hasattr(getattr(m, "self", None), "num_attention_heads") and hasattr(getattr(m, "output", None), "dense")]
    if not blocks:
        raise UserError(f"{type(model).__name__}: no BERT-style attention blocks (attention.self + attention.output.dense) "
                        "to gate; head gates support BERT-style encoders only")
    return blocks


def gate_shape(model) -> tuple[int, int]:
    """(layers, heads) a gate tensor for `model` must have."""
    blocks = attention_blocks(model)
    heads = {b.self.num_attention_heads for b in blocks}
    if len(heads) != 1:
        raise UserError(f"layers have different head counts {sorted(heads)} (physically pruned?); gate an unpruned model")
    return len(blocks), heads.pop()


class HeadGates:
    """Hooks that scale each head's output by its gate; remove() (or leaving the `with` block) takes them off."""

    def __init__(self, handles: list):
        self.handles = handles

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def __enter__(self) -> "HeadGates":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def gate_heads(model, gates: torch.Tensor) -> HeadGates:
    """Multiply head h of layer l's output by ``gates[l, h]`` until the returned handle is removed.

    The gate tensor is used by reference, not copied, so gradients flow back into it when it requires grad.
    """
    blocks = attention_blocks(model)
    expected = gate_shape(model)
    if tuple(gates.shape) != expected:
        raise UserError(f"gates have shape {tuple(gates.shape)}; this model needs [layers, heads] = {list(expected)}")
    handles = []
    for layer, block in enumerate(blocks):
        def hook(module, args, layer=layer, heads=expected[1]):
            x = args[0]
            g = gates[layer].to(device=x.device, dtype=x.dtype)
            return (x.unflatten(-1, (heads, -1)) * g[:, None]).flatten(-2), *args[1:]

        handles.append(block.output.dense.register_forward_pre_hook(hook))
    return HeadGates(handles)


def head_importance(model, batches: Iterable, loss_fn: Callable) -> torch.Tensor:
    """Michel et al.'s importance: Σ over batches of |∂L/∂ξ| at ξ = 1, each layer divided by its L2 norm.

    ``loss_fn(model, batch)`` returns a scalar loss. The model's own parameters are left without gradients.
    """
    gates = torch.ones(gate_shape(model), requires_grad=True)
    total = torch.zeros(gates.shape)
    with gate_heads(model, gates):
        for batch in batches:
            loss = loss_fn(model, batch)
            (grad,) = torch.autograd.grad(loss, gates)
            total += grad.detach().abs()
    norm = total.norm(dim=-1, keepdim=True)
    return total / norm.clamp(min=1e-20)  # the paper's per-layer normalisation; a zero row stays zero


def mask_order(importance: torch.Tensor) -> list[tuple[int, int]]:
    """(layer, head) pairs from least to most important; ties keep layer-major order."""
    flat = importance.flatten()
    order = torch.sort(flat, stable=True).indices.tolist()
    heads = importance.shape[1]
    return [(i // heads, i % heads) for i in order]


def prune_heads_physically(model, heads: Iterable[tuple[int, int]]) -> None:
    """Remove the given (layer, head) pairs from `model` in place (unpruned model; at least one head per layer stays)."""
    from transformers.pytorch_utils import prune_linear_layer

    blocks = attention_blocks(model)
    n_layers, n_heads = gate_shape(model)
    by_layer: dict[int, set[int]] = {}
    for layer, head in heads:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise UserError(f"head ({layer}, {head}) out of range; this model has {n_layers} layers of {n_heads} heads")
        by_layer.setdefault(layer, set()).add(head)
    for layer, drop in by_layer.items():
        if len(drop) == n_heads:
            # a zero-width attention would break the reshape in BertSelfAttention.forward
            raise UserError(f"cannot prune all {n_heads} heads of layer {layer}; keep one, or mask the layer with gate_heads")
        attn = blocks[layer].self
        size = attn.attention_head_size
        keep = torch.tensor([h * size + i for h in range(n_heads) if h not in drop for i in range(size)])
        # prune_linear_layer builds its new Linear in the default dtype; keep the model's (float64, bfloat16, ...)
        cut = lambda lin, dim=0: prune_linear_layer(lin, keep, dim).to(lin.weight.dtype)  # noqa: E731
        attn.query, attn.key, attn.value = cut(attn.query), cut(attn.key), cut(attn.value)
        blocks[layer].output.dense = cut(blocks[layer].output.dense, dim=1)
        attn.num_attention_heads = n_heads - len(drop)
        attn.all_head_size = attn.num_attention_heads * size
