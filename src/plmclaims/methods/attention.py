"""Attention to special tokens (Clark et al. 2019, "What Does BERT Look At?", section 3, Figs. 2 and 3).

One sequence at a time: ``attn`` and ``grad`` are (layers, heads, T, T) arrays, row q of a head's map being query
token q's attention over the T keys (it sums to 1); ``keys`` is a (T,) bool mask of the key tokens of one type
([SEP], [CLS], periods and commas). The paper's measures, averaged over every head and every query token:

- the share of attention that goes to the marked tokens (Fig. 2);
- the share uniform attention would give them, |marked| / T: the chance level (in a causal model, whose query q sees
  keys 0..q only, the mean over queries of the marked share of keys 0..q: causal_uniform_share);
- the magnitude of the gradient of the masked-LM loss with respect to the attention weights on the marked tokens
  (Fig. 3: where attention to [SEP] is a no-op, changing it changes the loss little).
"""
from __future__ import annotations

import numpy as np


def attention_share(attn: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Per layer, the share of each query's attention on the marked keys, averaged over heads and queries."""
    return np.asarray(attn)[..., np.asarray(keys, bool)].sum(-1).mean(axis=(-2, -1))


def uniform_share(keys: np.ndarray) -> float:
    """The share uniform attention (every key weighted 1/T) puts on the marked keys."""
    return float(np.mean(np.asarray(keys, bool)))


def causal_uniform_share(keys: np.ndarray) -> float:
    """The share uniform attention puts on the marked keys in a causal model, where query q sees keys 0..q only (each
    weighted 1/(q + 1)), averaged over queries: the first token gets mean(1/(q + 1)), far above |marked| / T."""
    keys = np.asarray(keys, bool)
    seen = np.cumsum(keys) / np.arange(1, len(keys) + 1)
    return float(seen.mean())


def gradient_magnitude(grad: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Per layer, the mean |d loss / d attention weight| over heads, queries and the marked keys (NaN: none marked)."""
    keys = np.asarray(keys, bool)
    if not keys.any():
        return np.full(np.shape(grad)[0], np.nan)
    return np.abs(np.asarray(grad)[..., keys]).mean(axis=(-3, -2, -1))


def mask_positions(candidates: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    """The positions to mask for the MLM loss: round(rate * n) of the candidates (at least one), drawn without
    replacement, sorted."""
    candidates = np.asarray(candidates)
    k = min(len(candidates), max(1, int(round(rate * len(candidates)))))
    return np.sort(rng.choice(candidates, size=k, replace=False))


def forward(model, sequences: list[np.ndarray], masked: list[np.ndarray] | None = None, mask_id: int | None = None,
            pad_id: int = 0):
    """Sequences of token ids through a BERT loaded with eager attention (the default sdpa kernels return no weights),
    in one padded batch; padded keys get no attention, so each sequence's maps are those of it alone.

    Returns (per sequence, the attention (layers, heads, T, T) of the unmasked input; per sequence, the gradient of its
    MLM loss (mean cross-entropy over its masked positions) with respect to the attention weights of the input with
    `masked` positions replaced by `mask_id`, or None when `masked` is None). Sequences share no attention, so the
    gradient of the summed losses on one sequence's weights is that of its own loss."""
    import torch
    import torch.nn.functional as F

    lengths = [len(s) for s in sequences]
    ids = torch.full((len(sequences), max(lengths)), pad_id, dtype=torch.long)
    keep = torch.zeros_like(ids)
    for i, s in enumerate(sequences):
        ids[i, :len(s)] = torch.as_tensor(np.asarray(s), dtype=torch.long)
        keep[i, :len(s)] = 1
    ids, keep = ids.to(model.device), keep.to(model.device)

    def per_sequence(maps) -> list[np.ndarray]:
        stacked = torch.stack(maps, 1).float().cpu().numpy()  # (batch, layers, heads, T, T)
        return [stacked[i, :, :, :t, :t] for i, t in enumerate(lengths)]

    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=keep, output_attentions=True)
    if not out.attentions or out.attentions[0] is None:  # sdpa gives none (an empty tuple, or Nones)
        raise ValueError("the model returned no attention weights; load it with attn_implementation='eager'")
    attn = per_sequence(out.attentions)
    if masked is None:
        return attn, None
    labels = torch.full_like(ids, -100)
    inputs = ids.clone()
    for i, m in enumerate(masked):
        labels[i, m] = ids[i, m]
        inputs[i, m] = mask_id
    out = model(input_ids=inputs, attention_mask=keep, output_attentions=True)
    losses = F.cross_entropy(out.logits.float().transpose(1, 2), labels, ignore_index=-100, reduction="none")
    loss = (losses.sum(1) / (labels != -100).sum(1)).sum()
    return attn, per_sequence(torch.autograd.grad(loss, out.attentions))
