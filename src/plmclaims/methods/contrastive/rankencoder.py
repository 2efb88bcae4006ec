"""RankEncoder (Seonwoo et al. 2023, "Ranking-Enhanced Unsupervised Sentence Representation Learning", ACL).

A sentence's rank vector is the ranking of a reference corpus by similarity to it; two sentences whose rank vectors
agree (Spearman) are close. Training is SimCSE's plus 0.05 x the MSE between the batch's cosine similarities and the
Spearman correlations of a frozen base encoder's rank vectors; at test, the similarity of two sentences is
0.9 cos + 0.1 Spearman of their rank vectors.

THE TEST-TIME SCORE IS NOT PLAIN COSINE: a scorer must call `Objective.similarity(a_vecs, b_vecs)` on the vectors
`embed` returns (plain cosine over those vectors is the checkpoint-selection metric the training loop uses, as the
repository's trainer selects on plain-cosine STS).

As in yeonsw/RankEncoder (code/SimCSE_RankEncoder: run_simcse_rank_encoder.sh, simcse_rank_encoder/models.py and
trainers.py, simcse_rank_encoder_inference.py): the base encoder's [CLS] vectors (L2-normalised) give the rank vectors;
the batch's similarities are the InfoNCE matrix (cos(z1_i, z2_j) of the MLP outputs); only pairs whose base Spearman
lies in [0.5, 0.9999] enter the MSE; ranks are argsort ranks; at test the rank vectors come from the trained model's own
vectors of the reference corpus. The repository's base encoder is a trained unsupervised SimCSE checkpoint; param
'base_encoder' names such a folder, '' takes the starting weights (frozen), which is all a run without a SimCSE
checkpoint has. The reference corpus is sampled from the training corpus: `prepare(corpus)` (or `set_reference`) must
run before training.
"""
from __future__ import annotations

import copy

import numpy as np
import torch

from ...evaluation.senteval import cosine
from .base import ContrastiveObjective, info_nce, mlp_pooler

NAME = "rankencoder"
INPUT = "sentences"
DEFAULTS = {
    "pooling": "cls-before-pooler",  # run_simcse_rank_encoder.sh: --pooler_type cls --mlp_only_train
    "temperature": 0.05,  # run_simcse_rank_encoder.sh: --temp 0.05
    "rank_weight": 0.05,  # run_simcse_rank_encoder.sh: --baseE_lmb 0.05 --loss_type weighted_sum
    "rank_low": 0.5,  # run_simcse_rank_encoder.sh: --baseE_sim_thresh_low 0.5
    "rank_high": 0.9999,  # run_simcse_rank_encoder.sh: --baseE_sim_thresh_upp 0.9999
    # README.md: "Please use 100,000 sentences to replicate our experimental results" (its scripts sample 10,000 for
    # speed: file_utils/random_sampling_sentences.sh --n_sentences 10000); a tier sets fewer where the budget is small
    "corpus_size": 100000,
    "cos_weight": 0.9,  # simcse_rank_encoder_inference.sh: LMB=0.9 (score = 0.9 cos + 0.1 rank Spearman)
    "base_encoder": "",  # --baseE_model_name_or_path (a trained SimCSE); '' = the starting weights, frozen
    # the recipe's learning rate (run_simcse_rank_encoder.sh --learning_rate 3e-5; batch 64, --max_seq_length 32,
    # 1 epoch): the training loop takes lr from the budget, the family reads this key to plan a run at the recipe's lr
    "lr": 3e-5,
}


def _ranks(x: torch.Tensor) -> torch.Tensor:
    """Row-wise ranks 0..m-1 (argsort ranks, as the repository's _get_ranks; ties do not occur in float similarities)."""
    ranks = torch.empty_like(x)
    ranks.scatter_(1, x.argsort(dim=1), torch.arange(x.shape[1], dtype=x.dtype, device=x.device).expand_as(x).contiguous())
    return ranks


def _standardised(r: torch.Tensor) -> torch.Tensor:
    r = r - r.mean(1, keepdim=True)
    return r / r.norm(dim=1, keepdim=True).clamp(min=1e-12)


def rank_correlation_matrix(sims_a: torch.Tensor, sims_b: torch.Tensor) -> torch.Tensor:
    """Spearman between every row of sims_a and every row of sims_b (each row: one sentence's similarities to the
    reference corpus) = Pearson of their rank vectors."""
    return _standardised(_ranks(sims_a)) @ _standardised(_ranks(sims_b)).T


def rank_similarity(a_vecs: np.ndarray, b_vecs: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Per pair i: Spearman between a_i's and b_i's cosine similarities to the reference vectors."""
    a, b, ref = (torch.nn.functional.normalize(torch.as_tensor(np.asarray(v, np.float64)), dim=1) for v in (a_vecs, b_vecs, reference))
    ra, rb = _standardised(_ranks(a @ ref.T)), _standardised(_ranks(b @ ref.T))
    return (ra * rb).sum(1).numpy()


class Objective(ContrastiveObjective):
    NAME = NAME
    DEFAULTS = DEFAULTS

    def __init__(self, model_path: str, params: dict | None, seed: int, random_weights: bool = False):
        super().__init__(model_path, params, seed, random_weights)
        from ...encoders import load_transformer

        h = self.encoder.config.hidden_size
        self.mlp = mlp_pooler(h)  # SimCSE's MLPLayer, training only
        if self.params["base_encoder"]:
            base, _ = load_transformer(self.params["base_encoder"], seed)
        else:
            base = copy.deepcopy(self.encoder)
        self.base = base.eval().requires_grad_(False)
        self.reference: list[str] | None = None
        self._base_ref: torch.Tensor | None = None  # the base encoder's reference vectors (fixed)
        self._own_ref: np.ndarray | None = None  # this model's reference vectors (test time), dropped when weights move
        self._max_length = 32

    # --- the reference corpus
    def set_reference(self, sentences: list[str]) -> None:
        """A seeded sample of `corpus_size` sentences (all when fewer), as the repository samples its corpus."""
        n = min(len(sentences), self.params["corpus_size"])
        idx = np.sort(np.random.default_rng(self.seed).choice(len(sentences), n, replace=False))
        self.reference = [sentences[i] for i in idx]
        self._base_ref = self._own_ref = None

    def prepare(self, corpus) -> None:
        self.set_reference(corpus.sentences)

    def _need_reference(self) -> list[str]:
        if not self.reference:
            raise RuntimeError("RankEncoder needs its reference corpus: call prepare(corpus) or set_reference(sentences) first")
        return self.reference

    @torch.no_grad()
    def _base_vectors(self, batch: dict) -> torch.Tensor:
        return torch.nn.functional.normalize(self.base(**batch).last_hidden_state[:, 0].float(), dim=1)

    def base_reference(self, batch_size: int = 256, max_length: int = 32) -> torch.Tensor:
        if self._base_ref is None:
            sents = self._need_reference()
            self._base_ref = torch.cat([
                self._base_vectors({k: v.to(self.device) for k, v in self.tokenize(sents[i:i + batch_size], max_length).items()})
                for i in range(0, len(sents), batch_size)])
        return self._base_ref

    # --- training
    def train(self, mode: bool = True):
        super().train(mode)
        self.base.eval()  # frozen teacher: no dropout
        if mode:
            self._own_ref = None
        return self

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        self._own_ref = None
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def after_step(self) -> None:
        self._own_ref = None

    def make_batch(self, examples: list, rng: np.random.Generator, max_length: int) -> dict:
        self._max_length = max_length  # the reference corpus is cut as the training sentences are
        return self.tokenize(examples, max_length)

    def loss(self, batch: dict) -> torch.Tensor:
        batch = {k: v.to(self.device) for k, v in batch.items()}
        ref = self.base_reference(max_length=self._max_length)
        pair = {k: torch.cat([v, v]) for k, v in batch.items()}  # two dropout views in one pass
        z1, z2 = self.mlp(self.encoder(**pair).last_hidden_state[:, 0]).chunk(2)
        loss = info_nce(z1, z2, self.params["temperature"])
        dist = self._base_vectors(batch) @ ref.T
        target = rank_correlation_matrix(dist, dist)
        keep = ((target >= self.params["rank_low"]) & (target <= self.params["rank_high"])).float()
        cos = torch.nn.functional.normalize(z1.float(), dim=1) @ torch.nn.functional.normalize(z2.float(), dim=1).T
        mse = ((cos - target) ** 2 * keep).sum() / (keep.sum() + 1e-8)
        return loss + self.params["rank_weight"] * mse

    # --- test time
    SCORE = "cos_weight x cosine + (1 - cos_weight) x Spearman of the rank vectors over the reference corpus"

    def similarity(self, a_vecs: np.ndarray, b_vecs: np.ndarray, batch_size: int = 256, max_length: int | None = None) -> np.ndarray:
        """RankEncoder's score of pairs (a_i, b_i) of `embed` vectors: cos_weight x cosine + (1 - cos_weight) x the
        Spearman of their rank vectors over the reference corpus, embedded by this model (cut at the training length
        unless `max_length` says otherwise). Not plain cosine."""
        if self._own_ref is None:
            self._own_ref = self.embed(self._need_reference(), batch_size, max_length or self._max_length)
        w = self.params["cos_weight"]
        return w * cosine(a_vecs, b_vecs) + (1 - w) * rank_similarity(a_vecs, b_vecs, self._own_ref)

    def save(self, out_dir) -> None:
        """The encoder and tokenizer, and the reference sentences the test-time score ranks against."""
        super().save(out_dir)
        from pathlib import Path

        (Path(out_dir) / "reference.txt").write_text("".join(s.replace("\n", " ") + "\n" for s in self._need_reference()))
