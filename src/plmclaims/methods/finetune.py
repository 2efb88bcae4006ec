"""Full fine-tuning: every parameter is trained (the baseline the PEFT claims compare against)."""
from __future__ import annotations


def prepare(model, params: dict):
    for p in model.parameters():
        p.requires_grad = True
    return model
