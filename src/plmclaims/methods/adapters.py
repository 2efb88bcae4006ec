"""Houlsby bottleneck adapters (Houlsby et al. 2019, arXiv 1902.00751), as a small module of our own.

The `adapters` package would be the library to use, but adapters 1.3 pins transformers~=4.57 and
this stack runs transformers 5, so the two cannot be installed together.

Placement follows the paper: one adapter after the attention block's output projection and one after
the feed-forward block's output projection, each applied before the residual connection and layer
norm. An adapter is down-projection (h -> m), non-linearity, up-projection (m -> h) plus a skip
connection, with the up-projection initialised to zero so training starts from the pre-trained
function. Adapters, layer norms and the task head are trained; everything else is frozen.
"""
from __future__ import annotations

import torch
from torch import nn

from .heads import head_names


class Adapter(nn.Module):
    def __init__(self, hidden: int, bottleneck: int):
        super().__init__()
        self.down = nn.Linear(hidden, bottleneck)
        self.up = nn.Linear(bottleneck, hidden)
        nn.init.normal_(self.down.weight, std=1e-3)
        nn.init.zeros_(self.down.bias)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.up(nn.functional.gelu(self.down(h)))


def _after(adapter: Adapter):
    """A forward hook that passes a projection's output through the adapter."""
    return lambda module, inputs, output: adapter(output)


def prepare(model, params: dict):
    size = int(params.get("size", 64))
    encoder = getattr(model, model.base_model_prefix).encoder
    for p in model.parameters():
        p.requires_grad = False
    for layer in encoder.layer:
        for name, proj in (("adapter_attention", layer.attention.output.dense), ("adapter_ffn", layer.output.dense)):
            adapter = Adapter(proj.out_features, size)
            layer.add_module(name, adapter)  # registered, so it is saved, moved and counted with the model
            proj.register_forward_hook(_after(adapter))
    heads = head_names(model)
    for name, p in model.named_parameters():
        if ".adapter_" in name or "LayerNorm" in name or any(name.startswith(h) for h in heads):
            p.requires_grad = True
    return model
