"""Unsupervised SimCSE (Gao et al. 2021): a sentence and itself, two dropout masks, the rest of the batch as negatives."""
from __future__ import annotations

import numpy as np
import torch

from .base import ContrastiveObjective, info_nce, mlp_pooler

NAME = "simcse"
INPUT = "sentences"
# SimCSE Table 5 / run_unsup_example.sh (CATALOG T8): wiki1m, batch 64, lr 3e-5, 1 epoch, length 32, temperature 0.05,
# MLP pooler over [CLS] at train time only, cls_before_pooler at test; batch, lr and length are the tier's budget.
DEFAULTS = {"temperature": 0.05, "pooling": "cls-before-pooler", "mlp_train": True}


class Objective(ContrastiveObjective):
    NAME = NAME
    DEFAULTS = DEFAULTS

    def __init__(self, model_path, params, seed, random_weights=False):
        super().__init__(model_path, params, seed, random_weights)
        h = self.encoder.config.hidden_size
        # SimCSE's MLPLayer (dense + tanh over [CLS]); it is not saved: the released models embed without it
        self.mlp = mlp_pooler(h)

    def make_batch(self, examples, rng: np.random.Generator, max_length: int) -> dict:
        batch = self.tokenize(examples, max_length)
        # each sentence twice in ONE forward pass (as SimCSE does): the two copies get different dropout masks
        return {k: v.repeat_interleave(2, dim=0) for k, v in batch.items()}

    def loss(self, batch: dict) -> torch.Tensor:
        cls = self.encode(batch, "cls-before-pooler")
        z = self.mlp(cls) if self.params["mlp_train"] else cls
        return info_nce(z[0::2], z[1::2], self.params["temperature"])
