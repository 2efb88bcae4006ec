"""The Frozen Pretrained Transformer (Lu et al. 2021): a language model's self-attention and feed-forward weights
frozen, with only a new input layer, a new output head, the position embeddings and the LayerNorms trained on a
non-language task. The same wrapper around the same architecture with random weights is the control.

`freeze` names exactly which parameters train (so a test can check it); `train_and_score` fits one task and returns
the scored items' predictions in the score-run layout.
"""
from __future__ import annotations

import logging

import numpy as np

log = logging.getLogger("plmclaims")

# names of position-embedding tables: BERT/RoBERTa, GPT-2, OPT/BART-style, T5 has none (relative positions)
POSITION_NAMES = ("position_embeddings", "wpe", "embed_positions")
GROUPS = ("input", "output", "positions", "layernorm")  # the parameter groups that train; the rest is frozen


def _is_norm(module) -> bool:
    """A LayerNorm, or the RMSNorm of Llama/Gemma-style decoders (their own classes, named *RMSNorm)."""
    import torch.nn as nn

    return isinstance(module, (nn.LayerNorm, nn.RMSNorm)) or type(module).__name__.endswith("RMSNorm")


def rotary(body) -> bool:
    """Whether the body places tokens by rotary position embeddings (Gemma, Llama): no table to train."""
    return any("Rotary" in type(m).__name__ for m in body.modules())


def freeze(body) -> dict[str, list[str]]:
    """Freeze every parameter of the pre-trained `body` except its position embeddings and its norms (LayerNorm,
    or a decoder's RMSNorm, q/k norms included). Returns group -> parameter names that train ('positions',
    'layernorm'). A body with rotary positions (Gemma, Llama) has no position table: its 'positions' group is empty,
    as its attention itself tells places apart. Raises ValueError if the body has neither (nothing could then tell
    the new input layer's tokens apart by place)."""
    norms = {id(p) for m in body.modules() if _is_norm(m) for p in m.parameters(recurse=False)}
    groups: dict[str, list[str]] = {"positions": [], "layernorm": []}
    for name, p in body.named_parameters():
        group = "layernorm" if id(p) in norms else "positions" if any(k in name for k in POSITION_NAMES) else None
        p.requires_grad_(group is not None)
        if group:
            groups[group].append(name)
    if not groups["positions"] and not rotary(body):
        raise ValueError(f"{type(body).__name__} has no learned position embeddings ({', '.join(POSITION_NAMES)}) "
                         "and no rotary ones; the frozen-transformer transfer trains those")
    return groups


def _module():
    import torch
    import torch.nn as nn

    class FrozenTransfer(nn.Module):
        """input layer -> frozen body (inputs_embeds) -> output head at the task's read-out tokens."""

        def __init__(self, body, input_layer: nn.Module, head: nn.Linear, out_pos, per_token: int, classes: int):
            super().__init__()
            self.body, self.input, self.head = body, input_layer, head
            self.register_buffer("out_pos", torch.as_tensor(out_pos, dtype=torch.long), persistent=False)
            self.per_token, self.classes = per_token, classes

        def forward(self, x, mask):
            h = self.body(inputs_embeds=self.input(x), attention_mask=mask).last_hidden_state
            logits = self.head(h[:, self.out_pos])  # (n, positions, per_token * classes)
            return logits.reshape(len(x), -1, self.classes)  # (n, K items, classes)

    return FrozenTransfer


def build(body, train, seed: int):
    """The FPT around `body` for the task of `train` (a data.synthetic.TaskData): the new layers are initialised from
    `seed`. Returns (model, groups: group -> trainable parameter names)."""
    import torch
    import torch.nn as nn

    groups = freeze(body)
    hidden = body.config.hidden_size
    torch.manual_seed(seed)
    input_layer = nn.Embedding(int(train.x.max()) + 1, hidden) if train.tokens else nn.Linear(train.x.shape[-1], hidden)
    head = nn.Linear(hidden, train.per_token * train.classes)
    model = _module()(body, input_layer, head, train.out_pos, train.per_token, train.classes)
    groups["input"] = [f"input.{n}" for n, _ in input_layer.named_parameters()]
    groups["output"] = [f"head.{n}" for n, _ in head.named_parameters()]
    groups = {g: [n if g in ("input", "output") else f"body.{n}" for n in groups[g]] for g in GROUPS}
    return model, groups


def parameter_counts(model, groups: dict[str, list[str]]) -> dict:
    """Trainable and total parameters, and the trainable ones per group."""
    params = dict(model.named_parameters())
    per = {g: sum(params[n].numel() for n in names) for g, names in groups.items()}
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    assert trainable == sum(per.values()), f"trainable parameters outside the named groups: {trainable} vs {per}"
    return {"trainable": trainable, "total": total, "fraction": trainable / total, "groups": per}


def _tensors(data, idx):
    import torch

    x = torch.as_tensor(data.x[idx])
    return x, torch.as_tensor(data.mask[idx]), torch.as_tensor(data.y[idx])


def train_and_score(body, train, test, budget: dict, lr: float, seed: int, autocast=None,
                    resume=None) -> tuple[dict, dict]:
    """Fit the FPT on `train` for budget['steps'] Adam steps of budget['batch_size'] examples (drawn with `seed`),
    then predict `test`. `autocast`: a context factory the forward passes run in (a decoder's bf16 autocast:
    decoders.autocast); the loss, the gradients and the trained weights stay float32. Returns (values: accuracy on the
    scored items, parameter counts, losses; arrays: pred and gold of the scored items, in item order). `resume` (a
    checkpoint.Resume): a stopped run continues from its saved state."""
    import contextlib

    import torch
    import torch.nn.functional as F

    from .. import checkpoint

    autocast = autocast or contextlib.nullcontext
    model, groups = build(body, train, seed)
    model.eval()  # no dropout: the frozen body computes what it was trained to; only the named groups move
    counts = parameter_counts(model, groups)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    rng = np.random.default_rng(seed)
    steps, batch = int(budget["steps"]), int(budget["batch_size"])
    resume = resume or checkpoint.Resume(None, "", "")
    restored = resume.attach(model, opt, rngs={"batches": rng})
    start, losses = (restored.step, list(restored.loop["losses"])) if restored else (0, [])
    for step in range(start, steps):
        x, mask, y = _tensors(train, rng.integers(0, len(train), size=batch))
        with autocast():
            logits = model(x, mask)
        loss = F.cross_entropy(logits.float().reshape(-1, train.classes), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        resume.step(step + 1, lambda: ({"losses": losses}, {}))
    resume.detach()
    preds = []
    with torch.inference_mode():
        for start in range(0, len(test), 256):
            x, mask, _ = _tensors(test, np.arange(start, min(start + 256, len(test))))
            with autocast():
                preds.append(model(x, mask).float().argmax(-1).numpy())
    pred = np.concatenate(preds)[test.scored]
    gold = test.y[test.scored]
    k = max(1, min(20, len(losses) // 4))
    values = {"accuracy": float((pred == gold).mean()), "items": int(len(gold)), "examples": len(test),
              "parameters": counts, "loss_first": float(np.mean(losses[:k])), "loss_last": float(np.mean(losses[-k:])),
              "steps": steps}
    return values, {"pred": pred, "gold": gold, "losses": np.array(losses)}
