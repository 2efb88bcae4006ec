"""Encoders and poolings.

One forward pass keeps, for every sentence, the attention-masked token mean of the hidden-state
layers that any pooling needs, plus the [CLS] vector before and after BERT's pooler. Poolings are
then cheap arithmetic on those cached per-layer means: averaging is linear, so the mean over tokens
of (h[a] + h[b]) / 2 equals the average of the two per-layer token means.

Pooling names follow the definitions actually used, not the papers' labels (see CATALOG.md):
- ``mean``: mean of the last layer's token vectors ([CLS] and [SEP] included, as in SimCSE's code);
- ``cls``: the [CLS] vector after BERT's pooler (dense + tanh);
- ``cls-before-pooler``: the last layer's [CLS] vector;
- ``first-last``: average of hidden_states[1] and hidden_states[-1] (the corrected definition);
- ``static-last``: average of hidden_states[0] (the input embeddings) and hidden_states[-1],
  which is what the SimCSE paper's "first-last avg" row really computed;
- ``last2avg``: average of the last two layers, hidden_states[-2] and hidden_states[-1];
- ``last-token``: a decoder's last token's last-layer vector (plmclaims.decoders writes it; its ``mean`` leaves the
  <bos> token out).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import UserError

POOLINGS = ("mean", "cls", "cls-before-pooler", "first-last", "static-last", "last2avg", "last-token")


def kept_layers(n_layers: int) -> list[int]:
    """hidden_states indices any pooling needs: embeddings, first, penultimate and last layer."""
    return sorted({0, 1, n_layers - 1, n_layers})


def pool(vectors: dict[str, np.ndarray], method: str) -> np.ndarray:
    """Sentence vectors for `method` from the cached output of `encode_layers`."""
    last = int(vectors["n_layers"])
    mean = lambda i: vectors[f"mean_{i}"]  # noqa: E731
    if method == "mean":
        return mean(last)
    if method == "cls":
        if "pooler" not in vectors:
            raise UserError("pooling 'cls' needs a pooler output, and this model has none; use 'cls-before-pooler'")
        return vectors["pooler"]
    if method == "cls-before-pooler":
        if "cls" not in vectors:
            raise UserError("pooling 'cls-before-pooler' needs a [CLS] token, and a decoder has none; its analogue is "
                            "'last-token'")
        return vectors["cls"]
    if method == "last-token":
        if "last" not in vectors:
            raise UserError("pooling 'last-token' is a decoder's (plmclaims.decoders); an encoder's analogue is "
                            "'cls-before-pooler'")
        return vectors["last"]
    if method == "first-last":
        return (mean(1) + mean(last)) / 2
    if method == "static-last":
        return (mean(0) + mean(last)) / 2
    if method == "last2avg":
        return (mean(last - 1) + mean(last)) / 2
    raise UserError(f"pooling {method!r} unknown; allowed values: {', '.join(POOLINGS)}")


def best_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_transformer(path: str | Path, seed: int = 0, random_weights: bool = False):
    """A Hugging Face encoder and its tokenizer, optionally re-initialised with random weights.

    The seed is set before loading so that parts the checkpoint lacks (an MLM-only BERT has no
    pooler) are initialised deterministically.
    """
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    torch.manual_seed(seed)
    hf_logging.set_verbosity_error()  # an MLM checkpoint loaded as an encoder warns about its unused head
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    if random_weights:
        config = AutoConfig.from_pretrained(str(path))
        model = AutoModel.from_config(config)
    else:
        model = AutoModel.from_pretrained(str(path))
    model.eval()
    return model, tokenizer


def encode_layers(model, tokenizer, sentences: list[str], batch_size: int = 64, max_length: int = 128,
                  device: str | None = None, progress: bool = True) -> dict[str, np.ndarray]:
    """One forward pass over `sentences`; returns per-layer token means, [CLS] and pooler output."""
    import torch
    from tqdm.auto import tqdm

    device = device or best_device()
    model.to(device)
    n_layers = model.config.num_hidden_layers
    layers = kept_layers(n_layers)
    # tokenised once, then batched in order of token count (stable): a batch pads to its own longest sentence, so
    # sorting by tokens rather than characters pads the union of the STS test sets 1% instead of 42%
    tokens = tokenizer(list(sentences), truncation=True, max_length=max_length)
    tokens = {k: v for k, v in tokens.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
    order = np.argsort([-len(ids) for ids in tokens["input_ids"]], kind="stable")
    out = {f"mean_{i}": np.zeros((len(sentences), model.config.hidden_size), np.float32) for i in layers}
    out["cls"] = np.zeros((len(sentences), model.config.hidden_size), np.float32)
    has_pooler = getattr(model, "pooler", None) is not None
    if has_pooler:
        out["pooler"] = np.zeros_like(out["cls"])
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device == "cuda" else torch.autocast("cpu", enabled=False)
    with torch.inference_mode(), autocast:
        for start in tqdm(range(0, len(sentences), batch_size), desc="encode", unit="batch", disable=not progress, mininterval=5):
            idx = order[start:start + batch_size]
            batch = tokenizer.pad({k: [v[i] for i in idx] for k, v in tokens.items()}, return_tensors="pt")
            batch = {k: v.to(device) for k, v in batch.items()}
            res = model(**batch, output_hidden_states=True)
            mask = batch["attention_mask"].unsqueeze(-1).float()
            denom = mask.sum(1).clamp(min=1)
            for i in layers:
                out[f"mean_{i}"][idx] = ((res.hidden_states[i].float() * mask).sum(1) / denom).cpu().numpy()
            out["cls"][idx] = res.hidden_states[-1][:, 0].float().cpu().numpy()
            if has_pooler:
                out["pooler"][idx] = res.pooler_output.float().cpu().numpy()
    out["n_layers"] = np.asarray(n_layers)
    return out


def encode_words(model, tokenizer, sentences: list[list[str]], batch_size: int = 64, max_length: int = 128,
                 device: str | None = None, progress: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Word vectors of every hidden-state layer (0 = embeddings ... L) for pre-split sentences (UD words): each word's
    vector is the mean of its sub-word token vectors, as probing studies align sub-words to words.

    Returns (vectors (L + 1, n_words, d) float32, rows in sentence order over the kept sentences; kept (n_sentences,)
    bool). A sentence is left out (kept False, no rows) when its sub-words with [CLS]/[SEP] exceed `max_length` or a
    word has no sub-word at all: truncating it would leave words without a vector."""
    import torch
    from tqdm.auto import tqdm

    device = device or best_device()
    model.to(device)
    max_length = min(max_length, getattr(model.config, "max_position_embeddings", max_length))
    word_ids = [tokenizer(words, is_split_into_words=True, truncation=False).word_ids() for words in sentences]
    kept = np.array([len(w) <= max_length and set(range(len(s))) <= {i for i in w if i is not None}
                     for s, w in zip(sentences, word_ids)], dtype=bool)
    idx_kept = np.flatnonzero(kept)
    starts = np.zeros(len(sentences) + 1, dtype=np.int64)
    starts[1:] = np.cumsum([len(s) if k else 0 for s, k in zip(sentences, kept)])
    n_layers, d = model.config.num_hidden_layers + 1, model.config.hidden_size
    out = np.zeros((n_layers, int(starts[-1]), d), np.float32)
    order = idx_kept[np.argsort([-len(word_ids[i]) for i in idx_kept], kind="stable")]  # length-sorted batches pad less
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device == "cuda" else torch.autocast("cpu", enabled=False)
    with torch.inference_mode(), autocast:
        for start in tqdm(range(0, len(order), batch_size), desc="encode words", unit="batch", disable=not progress, mininterval=5):
            idx = order[start:start + batch_size]
            batch = tokenizer([sentences[i] for i in idx], is_split_into_words=True, padding=True, return_tensors="pt")
            inputs = {k: v.to(device) for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
            hidden = torch.stack(model(**inputs, output_hidden_states=True).hidden_states).float()  # (L+1, B, T, d)
            for b, i in enumerate(idx):
                wid = np.array([-1 if w is None else w for w in batch.word_ids(b)])
                avg = np.zeros((len(sentences[i]), len(wid)), np.float32)  # word x token averaging matrix
                tok = np.flatnonzero(wid >= 0)
                avg[wid[tok], tok] = 1.0
                avg /= avg.sum(1, keepdims=True)
                vecs = torch.einsum("wt,ltd->lwd", torch.from_numpy(avg).to(device), hidden[:, b])
                out[:, starts[i]:starts[i] + len(sentences[i])] = vecs.cpu().numpy()
    return out, kept


@dataclass
class StaticVectors:
    """A word-vector table: GloVe from a package or a local folder, or a hub word-embedding model."""

    words: list[str]
    matrix: np.ndarray
    lowercase: bool = True

    def __post_init__(self):
        self.index = {w: i for i, w in enumerate(self.words)}

    TOKEN = re.compile(r"\w+(?:[-']\w+)*|[^\w\s]")

    def tokenize(self, sentence: str) -> list[str]:
        """Whitespace split, then punctuation split off: SentEval's tokenised text passes through intact."""
        text = sentence.lower() if self.lowercase else sentence
        return [t for piece in text.split() for t in self.TOKEN.findall(piece)]

    def encode(self, sentences: list[str]) -> tuple[np.ndarray, dict]:
        """Average of the in-vocabulary word vectors; zero vector if none is known."""
        out = np.zeros((len(sentences), self.matrix.shape[1]), np.float32)
        known = total = 0
        for row, s in enumerate(sentences):
            ids = [self.index[t] for t in self.tokenize(s) if t in self.index]
            total += len(self.tokenize(s))
            known += len(ids)
            if ids:
                out[row] = self.matrix[ids].mean(0)
        stats = {"tokenisation": "lower-cased; whitespace split, punctuation split off; OOV tokens skipped",
                 "tokens": total, "oov_rate": 1 - known / max(total, 1)}
        return out, stats


def load_static_vectors(spec: dict) -> StaticVectors:
    """Static vectors named by a tier asset: {'source': 'package', 'package': ...} or {'source': 'hub', 'id': ...}."""
    if spec["source"] == "package":
        import importlib

        import pandas as pd

        mod = importlib.import_module(spec["package"])
        root = Path(mod.ROOT)
        matrix = np.load(root / "glove_6B_50d_emb.npy")
        words = pd.read_parquet(root / "glove_6B_index.parquet")["index"].astype(str).tolist()
        return StaticVectors(words, matrix.astype(np.float32))
    if spec["source"] == "hub":
        from . import hub

        return load_word_embedding_model(hub.resolve(spec["id"], "model", revision=spec.get("revision")))
    raise UserError(f"static vectors source {spec['source']!r} unknown; allowed values: package, hub")


def load_word_embedding_model(name_or_path: str) -> StaticVectors:
    """A sentence-transformers word-embedding model (e.g. average_word_embeddings_glove.840B.300d)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import WordEmbeddings

    try:
        st = SentenceTransformer(name_or_path, device="cpu")
    except Exception as err:
        raise UserError(f"static vectors {name_or_path!r} could not be loaded: {type(err).__name__}; "
                        "run 'plmclaims prefetch' online first, or point the tier at a local copy") from None
    emb = next((m for m in st.modules() if isinstance(m, WordEmbeddings)), None)
    if emb is None:
        raise UserError(f"{name_or_path}: not a word-embedding model (no WordEmbeddings module)")
    vocab = list(emb.tokenizer.get_vocab())
    matrix = emb.emb_layer.weight.detach().cpu().numpy().astype(np.float32)
    return StaticVectors(vocab, matrix, lowercase=getattr(emb.tokenizer, "do_lower_case", True))
