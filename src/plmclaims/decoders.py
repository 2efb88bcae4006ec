"""Sentence and word vectors from a decoder-only language model (a causal LM: Gemma-3-270M, GPT-2, SmolLM2).

The model's body is loaded without its output layer (AutoModel: for Gemma the 262k-word output layer is most of a
full forward pass, and no measurement here reads logits). Every forward pass keeps each layer's hidden states; the
outputs have the layout of plmclaims.encoders, so its `pool` and every family that reads encoder vectors read these.

Poolings (the decoder's analogues of BERT's, see docs/real-models.md):
- ``mean``: the mean of the last layer's token vectors over the sentence's own tokens: the special tokens the
  tokenizer adds (Gemma's <bos>) are left out. A causal model's first position sees only itself, so its vector is
  the same for every sentence, and it is the attention sink, with a norm far above the rest's;
- ``last-token``: the last layer's vector of the sentence's last token, the only one that has seen the whole sentence:
  the decoder's analogue of [CLS] (an analogue, not the same thing: nothing trained it to summarise);
- ``first-last``, ``static-last``, ``last2avg``: as for encoders, on the same per-layer means.

Batches are tokenised once, sorted by length and padded on the right: a causal model's tokens never attend to
positions after them, so padding changes no real token's vector, and absolute positions (GPT-2) start at 0 for every
sentence. Precision: 'float32', or 'bf16' (autocast: matrix products in bfloat16, outputs kept in float32), the
asset's `precision` in the tier, which is part of every run key that encodes; unset, CPU runs in float32 and a GPU
in bf16 autocast, as the encoders do.
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from .encoders import best_device, kept_layers
from .errors import UserError

POOLINGS = ("mean", "last-token", "first-last", "static-last", "last2avg")
PRECISIONS = ("float32", "bf16")


def load_decoder(path: str | Path, seed: int = 0, random_weights: bool = False, attention: str | None = None):
    """A causal LM's body (no output layer) and its tokenizer, ready for right-padded batches. With random_weights the
    same configuration with weights drawn from `seed` (a random-weights twin: its folder may hold no weights at all).
    `attention`: an attention implementation to load with ('eager' returns attention weights)."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # a causal LM's checkpoint loaded as its body reports the unused output layer
    kwargs = {"attn_implementation": attention} if attention else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        torch.manual_seed(seed)
        if random_weights:
            model = AutoModel.from_config(AutoConfig.from_pretrained(str(path)), **kwargs)
        else:
            model = AutoModel.from_pretrained(str(path), dtype=torch.float32, **kwargs)
    except OSError as err:
        raise UserError(f"causal LM {str(path)!r} could not be loaded ({str(err).splitlines()[0]}); with "
                        "HF_HUB_OFFLINE=1 it must be prefetched first, and a workflow-built one materialised "
                        "(rule lm_model)") from None
    return model.eval(), prepare_tokenizer(tokenizer)


def prepare_tokenizer(tokenizer):
    """Right padding, and a pad token where the tokenizer has none (GPT-2: its end-of-text token, always masked)."""
    tokenizer.padding_side = "right"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def autocast(device: str, precision: str | None):
    """The forward passes' precision context: bf16 autocast, or none for float32 (see the module docstring)."""
    import torch

    if precision not in (None, *PRECISIONS):
        raise UserError(f"asset field 'precision': got {precision!r}; allowed values: {', '.join(PRECISIONS)}")
    if precision == "bf16" or (precision is None and device == "cuda"):
        return torch.autocast("cuda" if device == "cuda" else "cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _padded(tokenizer, enc: dict, idx, device: str) -> dict:
    """Rows `idx` of a tokenised list, right-padded to their longest, as tensors on `device`."""
    keys = [k for k in ("input_ids", "attention_mask", "special_tokens_mask") if k in enc]
    batch = tokenizer.pad({k: [enc[k][i] for i in idx] for k in keys}, padding=True, return_tensors="pt")
    return {k: v.to(device) for k, v in batch.items()}


def encode_layers(model, tokenizer, sentences: list[str], batch_size: int = 64, max_length: int = 128,
                  device: str | None = None, progress: bool = True,
                  precision: str | None = None) -> dict[str, np.ndarray]:
    """One forward pass over `sentences`: per kept layer the mean over each sentence's own tokens (special tokens left
    out), and the last token's last-layer vector (`last`); the layout of encoders.encode_layers."""
    import torch
    from tqdm.auto import tqdm

    device = device or best_device()
    model.to(device)
    n_layers, d = model.config.num_hidden_layers, model.config.hidden_size
    layers = kept_layers(n_layers)
    enc = tokenizer(sentences, truncation=True, max_length=max_length, return_special_tokens_mask=True)
    order = np.argsort([-len(x) for x in enc["input_ids"]], kind="stable")  # length-sorted batches pad less
    out = {f"mean_{i}": np.zeros((len(sentences), d), np.float32) for i in layers}
    out["last"] = np.zeros((len(sentences), d), np.float32)
    with torch.inference_mode(), autocast(device, precision):
        for start in tqdm(range(0, len(sentences), batch_size), desc="encode", unit="batch", disable=not progress,
                          mininterval=5):
            idx = order[start:start + batch_size]
            batch = _padded(tokenizer, enc, idx, device)
            hidden = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                           output_hidden_states=True).hidden_states
            own = (batch["attention_mask"] * (1 - batch["special_tokens_mask"])).unsqueeze(-1).float()
            denom = own.sum(1).clamp(min=1)
            for i in layers:
                out[f"mean_{i}"][idx] = ((hidden[i].float() * own).sum(1) / denom).cpu().numpy()
            last = batch["attention_mask"].sum(1) - 1  # right padding: the last real token
            out["last"][idx] = hidden[-1][torch.arange(len(idx), device=device), last].float().cpu().numpy()
    out["n_layers"] = np.asarray(n_layers)
    return out


def word_alignment(tokenizer, words: list[str]) -> tuple[list[int], np.ndarray]:
    """The ids of a pre-split sentence as the model reads running text (the words joined by single spaces, special
    tokens added as the tokenizer adds them), and each token's word (-1: a special token, or a token of spaces only).
    A token is its last non-space character's word: sub-word pieces carry the space before them (Gemma's '▁the',
    GPT-2's 'Ġthe')."""
    text = " ".join(words)
    char_word = np.full(len(text), -1, np.int64)
    pos = 0
    for w, word in enumerate(words):
        char_word[pos:pos + len(word)] = w
        pos += len(word) + 1
    enc = tokenizer(text, return_offsets_mapping=True, return_special_tokens_mask=True)
    word_of = np.full(len(enc["input_ids"]), -1, np.int64)
    for t, ((a, b), special) in enumerate(zip(enc["offset_mapping"], enc["special_tokens_mask"])):
        inside = char_word[a:b][char_word[a:b] >= 0]
        if not special and len(inside):
            word_of[t] = inside[-1]
    return list(enc["input_ids"]), word_of


def encode_words(model, tokenizer, sentences: list[list[str]], batch_size: int = 64, max_length: int = 128,
                 device: str | None = None, progress: bool = True,
                 precision: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Word vectors of every hidden-state layer for pre-split sentences, each word the mean of its tokens' vectors
    (special tokens belong to no word); the layout of encoders.encode_words. A sentence is left out (kept False)
    when its tokens exceed `max_length` or a word has no token of its own."""
    import torch
    from tqdm.auto import tqdm

    device = device or best_device()
    model.to(device)
    aligned = [word_alignment(tokenizer, words) for words in sentences]
    kept = np.array([len(ids) <= max_length and set(range(len(s))) <= set(w[w >= 0].tolist())
                     for s, (ids, w) in zip(sentences, aligned)], dtype=bool)
    idx_kept = np.flatnonzero(kept)
    starts = np.zeros(len(sentences) + 1, dtype=np.int64)
    starts[1:] = np.cumsum([len(s) if k else 0 for s, k in zip(sentences, kept)])
    n_layers, d = model.config.num_hidden_layers + 1, model.config.hidden_size
    out = np.zeros((n_layers, int(starts[-1]), d), np.float32)
    order = idx_kept[np.argsort([-len(aligned[i][0]) for i in idx_kept], kind="stable")]
    enc = {"input_ids": [a[0] for a in aligned], "attention_mask": [[1] * len(a[0]) for a in aligned]}
    with torch.inference_mode(), autocast(device, precision):
        for start in tqdm(range(0, len(order), batch_size), desc="encode words", unit="batch", disable=not progress,
                          mininterval=5):
            idx = order[start:start + batch_size]
            batch = _padded(tokenizer, enc, idx, device)
            hidden = torch.stack(model(**batch, output_hidden_states=True).hidden_states).float()  # (L+1, B, T, d)
            for b, i in enumerate(idx):
                wid = aligned[i][1]
                avg = np.zeros((len(sentences[i]), len(wid)), np.float32)  # word x token averaging matrix
                tok = np.flatnonzero(wid >= 0)
                avg[wid[tok], tok] = 1.0
                avg /= avg.sum(1, keepdims=True)
                vecs = torch.einsum("wt,ltd->lwd", torch.from_numpy(avg).to(device), hidden[:, b, :len(wid)])
                out[:, starts[i]:starts[i] + len(sentences[i])] = vecs.float().cpu().numpy()  # autocast: bf16
    return out, kept
