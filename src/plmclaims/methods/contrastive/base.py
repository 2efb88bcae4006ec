"""What every contrastive objective shares: loading, tokenising, pooling by name, the test-time embedding, saving.

An objective subclasses `ContrastiveObjective`, sets DEFAULTS (its recipe) and writes `make_batch` and `loss`; the
training loop (train.py) and the evaluation only see this interface (notes/contrastive-api.md).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from ...encoders import load_transformer
from ...errors import UserError

POOLINGS = ("cls", "cls-before-pooler", "mean", "first-last-avg", "last-two-avg", "mask")


def resolve_params(defaults: dict, params: dict | None) -> dict:
    """The recipe with the tier's/claim's overrides; a key the recipe does not have is a typo, not a new knob."""
    params = dict(params or {})
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise KeyError(f"unknown parameters {unknown}; allowed: {sorted(defaults)}")
    return {**defaults, **params}


def load_mlm(path: str | Path, seed: int = 0, random_weights: bool = False, require_head: bool = False):
    """`load_transformer`'s twin for objectives that need the MLM head (DeCLUTR, DiffCSE's generator). With
    `require_head`, a checkpoint without the head's weights is refused: transformers would draw them at random (and,
    with its logging quietened, say nothing), which DeCLUTR trains away but a frozen generator never would."""
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    torch.manual_seed(seed)
    hf_logging.set_verbosity_error()
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    if random_weights:
        model = AutoModelForMaskedLM.from_config(AutoConfig.from_pretrained(str(path)))
    else:
        model, info = AutoModelForMaskedLM.from_pretrained(str(path), output_loading_info=True)
        missing = sorted(info.get("missing_keys") or [])
        if require_head and missing:
            raise UserError(f"{path}: no masked-LM head in the checkpoint ({len(missing)} weights missing, e.g. "
                            f"{missing[0]}); a frozen generator must be a released masked LM such as "
                            "distilbert/distilbert-base-uncased, not an encoder saved without its head")
    return model, tokenizer


def masked_mean(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)


def pool(output, batch: dict, method: str, mask_token_id: int | None = None) -> torch.Tensor:
    """Sentence vectors of one forward pass (`output_hidden_states=True` for the layer averages).

    first-last-avg averages the first transformer layer (hidden_states[1]) with the last: the corrected SimCSE
    pooling; SimCSE's own Table-5 row used hidden_states[0] (static + last), which the STS family covers."""
    att = batch["attention_mask"]
    if method == "cls":
        if getattr(output, "pooler_output", None) is None:
            raise UserError("pooling 'cls' needs a pooler output, and this model has none; use 'cls-before-pooler'")
        return output.pooler_output
    if method == "cls-before-pooler":
        return output.last_hidden_state[:, 0] if hasattr(output, "last_hidden_state") else output.hidden_states[-1][:, 0]
    hs = output.hidden_states
    if method == "mean":
        return masked_mean(hs[-1], att)
    if method == "first-last-avg":
        return (masked_mean(hs[1], att) + masked_mean(hs[-1], att)) / 2
    if method == "last-two-avg":
        return (masked_mean(hs[-2], att) + masked_mean(hs[-1], att)) / 2
    if method == "mask":  # PromptBERT: the last hidden state at the (first) [MASK] of the template
        is_mask = batch["input_ids"] == mask_token_id
        if not bool(is_mask.any(1).all()):
            raise ValueError("pooling 'mask' needs a [MASK] token in every input (a template that kept its [MASK])")
        return hs[-1][torch.arange(len(att), device=att.device), is_mask.float().argmax(1)]
    raise UserError(f"pooling {method!r} unknown; allowed: {', '.join(POOLINGS)}")


def info_nce(a: torch.Tensor, b: torch.Tensor, temperature: float) -> torch.Tensor:
    """SimCSE's loss = sentence-transformers' MultipleNegativesRankingLoss with scale 1/temperature: row i of a must
    pick b[i] among all of b (the other rows are the in-batch negatives)."""
    from sentence_transformers.util import cos_sim

    scores = cos_sim(a, b) / temperature
    return torch.nn.functional.cross_entropy(scores, torch.arange(len(a), device=a.device))


def nt_xent(a: torch.Tensor, b: torch.Tensor, temperature: float) -> torch.Tensor:
    """SimCLR's NT-Xent (DeCLUTR, ConSERT): both views of all pairs are candidates, so a view's negatives include the
    other views of its own side, unlike MNRL's a-vs-b matrix; no library loss installed here computes it."""
    from sentence_transformers.util import cos_sim

    z = torch.cat([a, b])
    scores = cos_sim(z, z) / temperature
    scores = scores.masked_fill(torch.eye(len(z), dtype=torch.bool, device=z.device), float("-inf"))  # self is no candidate
    n = len(a)
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)]).to(z.device)
    return torch.nn.functional.cross_entropy(scores, target)


def mask_tokens(input_ids: torch.Tensor, special: torch.Tensor, tokenizer, rng: np.random.Generator,
                prob: float = 0.15) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking (80% [MASK], 10% random, 10% kept) drawn from the numpy generator so batches are reproducible;
    returns (masked ids, labels with -100 where nothing is predicted)."""
    shape = tuple(input_ids.shape)
    chosen = (rng.random(shape) < prob) & ~special.numpy()
    labels = torch.where(torch.from_numpy(chosen), input_ids, torch.full_like(input_ids, -100))
    ids = input_ids.clone()
    roll = rng.random(shape)
    ids[torch.from_numpy(chosen & (roll < 0.8))] = tokenizer.mask_token_id
    rand = torch.from_numpy(chosen & (roll >= 0.8) & (roll < 0.9))
    ids[rand] = torch.from_numpy(rng.integers(len(tokenizer), size=shape))[rand]
    return ids, labels


def mlp_pooler(hidden: int):
    """SimCSE's MLPLayer (Linear + tanh over [CLS]), used at training time only by SimCSE and the methods built on it
    (PromptBERT, RankEncoder)."""
    import torch

    return torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.Tanh())


class ContrastiveObjective(torch.nn.Module):
    """Base of every objective: `self.encoder` (a transformers encoder), `self.tokenizer`, `self.params`.

    Subclasses set DEFAULTS with a 'pooling' key (the test-time pooling) and MLM = True when they need the MLM head
    (then `self.mlm` is the AutoModelForMaskedLM and `self.encoder` its base model)."""

    NAME = ""
    DEFAULTS: dict = {"pooling": "cls-before-pooler"}
    MLM = False

    def __init__(self, model_path: str, params: dict | None, seed: int, random_weights: bool = False):
        super().__init__()
        self.params = resolve_params(self.DEFAULTS, params)
        self.seed = seed
        self.model_path = str(model_path)
        if self.MLM:
            self.mlm, self.tokenizer = load_mlm(model_path, seed, random_weights)
            self.encoder = self.mlm.base_model
        else:
            self.encoder, self.tokenizer = load_transformer(model_path, seed, random_weights)
        self.encoder.train()

    # --- batches
    def tokenize(self, sentences: list[str], max_length: int) -> dict:
        """Tokenised, padded tensors; PromptBERT overrides this to wrap the sentences in its template."""
        enc = self.tokenizer(list(sentences), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        return {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")}

    def encode(self, batch: dict, pooling: str, **kwargs) -> torch.Tensor:
        out = self.encoder(**batch, output_hidden_states=pooling not in ("cls", "cls-before-pooler"), **kwargs)
        return pool(out, batch, pooling, self.tokenizer.mask_token_id)

    def make_batch(self, examples: list, rng: np.random.Generator, max_length: int) -> dict:
        raise NotImplementedError

    def loss(self, batch: dict) -> torch.Tensor:
        raise NotImplementedError

    def prepare(self, corpus) -> None:
        """Called once with the training corpus before the first step (RankEncoder's reference sentences); nothing by
        default."""

    def after_step(self) -> None:
        """Called after each optimiser step (BSL's EMA target update); nothing by default."""

    @property
    def device(self) -> torch.device:
        return next(self.encoder.parameters()).device

    # --- test time
    @torch.no_grad()
    def embed(self, sentences: list[str], batch_size: int, max_length: int) -> np.ndarray:
        """Test-time vectors (DEFAULTS['pooling']), eval mode, one forward pass per batch, length-sorted batches (they
        pad less); float32 rows in the order of `sentences`. The module's train/eval mode is restored afterwards."""
        was_training = self.training
        self.eval()
        order = np.argsort([-len(s) for s in sentences], kind="stable")
        out = None
        cuda = self.device.type == "cuda"
        try:
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
                for start in range(0, len(sentences), batch_size):
                    idx = order[start:start + batch_size]
                    batch = {k: v.to(self.device) for k, v in self.tokenize([sentences[i] for i in idx], max_length).items()}
                    vec = self.encode(batch, self.params["pooling"]).float().cpu().numpy()
                    if out is None:
                        out = np.zeros((len(sentences), vec.shape[1]), np.float32)
                    out[idx] = vec
        finally:
            self.train(was_training)
        return out if out is not None else np.zeros((0, self.encoder.config.hidden_size), np.float32)

    # What a pair of test-time vectors scores with; an objective whose paper scores otherwise (RankEncoder) overrides
    # both, and the family records SCORE beside the STS results.
    SCORE = "cosine"

    def similarity(self, a_vecs: np.ndarray, b_vecs: np.ndarray) -> np.ndarray:
        """The test-time score of pairs (a_i, b_i) of `embed` vectors: plain cosine, as SentEval's STS tasks."""
        from ...evaluation.senteval import cosine

        return cosine(a_vecs, b_vecs)

    def save(self, out_dir) -> None:
        """The encoder and tokenizer test-time embedding needs, plus contrastive.json naming the pooling (loading a
        SimCSE encoder with a generic sentence encoder silently builds mean pooling)."""
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        self.encoder.save_pretrained(out_dir)
        self.tokenizer.save_pretrained(out_dir)
        (out_dir / "contrastive.json").write_text(json.dumps(
            {"objective": self.NAME, "pooling": self.params["pooling"], "params": self.params}, indent=1, sort_keys=True) + "\n")
