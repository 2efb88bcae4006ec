"""Methods, one module each. Methods a well-kept library provides (peft, mteb) come from that library.

The fine-tuning family is registered by name: each module's `prepare(model, params)` returns the model
with exactly the parameters that method trains left trainable.
"""
from __future__ import annotations

from importlib import import_module

FINETUNING_METHODS = {
    "full-finetuning": "finetune",
    "bitfit": "bitfit",
    "lora": "lora",
    "adapter": "adapters",
    "prefix-tuning": "prefix_tuning",
    "prompt-tuning": "prompt_tuning",
}


def prepare(method: str, model, params: dict | None = None):
    """Make `model` ready to train with `method` (a claim's measurement method name)."""
    if method not in FINETUNING_METHODS:
        from ..errors import UserError

        raise UserError(f"fine-tuning method {method!r} unknown; allowed values: {', '.join(FINETUNING_METHODS)}")
    return import_module(f".{FINETUNING_METHODS[method]}", __name__).prepare(model, params or {})


def count_parameters(model) -> dict[str, int]:
    """Trained and total parameters (each tensor counted once, shared ones too)."""
    seen, trainable, total = set(), 0, 0
    for p in model.parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        total += p.numel()
        trainable += p.numel() if p.requires_grad else 0
    return {"trainable": trainable, "total": total, "fraction": trainable / total if total else 0.0}
