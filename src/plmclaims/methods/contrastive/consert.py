"""ConSERT (Yan et al. 2021): two augmented views of a sentence, feature cutoff and token shuffle, NT-Xent."""
from __future__ import annotations

import numpy as np
import torch

from .base import ContrastiveObjective, nt_xent

NAME = "consert"
INPUT = "sentences"
# yym6472/ConSERT README, unsupervised STS runs (CATALOG T8): views feature cutoff (rate 0.2) and token shuffle,
# NT-Xent temperature 0.1, batch 96, length 64. Its README (note 3) scores the average of the last two layers'
# token means; its training script (main.py, scripts/unsup-consert-base.sh) trains the last layer's token mean
# (models.Pooling's mean) with BERT's dropout off (--no_dropout): `train_pooling` and `dropout` say so, and their
# defaults (the test pooling; dropout on) keep the runs planned before they existed as they were.
# lr 5e-7 is the recipe's learning rate: the training loop takes its lr from the budget, so the family reads this key
# when it plans a run "with the recipe's lr"; the objective itself does not use it.
# transductive: ConSERT trains on the unlabelled sentences of the STS test sets themselves; the family plans that as
# a flagged variant (its corpus is the STS sentences), never as the default; the objective itself does not use it.
DEFAULTS = {"temperature": 0.1, "pooling": "last-two-avg", "cutoff_rate": 0.2, "lr": 5e-7, "transductive": False,
            "train_pooling": "", "dropout": True}

ROBERTA_LIKE = ("roberta", "xlm-roberta", "camembert")  # position ids start after the padding index


def shuffled_positions(attention_mask: torch.Tensor, rng: np.random.Generator, offset: int = 0) -> torch.Tensor:
    """Position ids with each sentence's real tokens' positions permuted (padding keeps its own): the tokens stay in
    place, so the encoder sees the same token multiset in a shuffled order."""
    n, length = attention_mask.shape
    pos = np.tile(np.arange(length) + offset, (n, 1))
    for i, real in enumerate(attention_mask.sum(1).tolist()):
        pos[i, :real] = offset + rng.permutation(real)
    return torch.from_numpy(pos)


def cutoff_plan(n: int, hidden: int, rate: float, rng: np.random.Generator) -> torch.Tensor:
    """(n, hidden) multipliers: 0 on round(rate * hidden) distinct features per sentence (all its tokens), 1 elsewhere."""
    keep = np.ones((n, hidden), np.float32)
    k = round(rate * hidden)
    for i in range(n):
        keep[i, rng.choice(hidden, k, replace=False)] = 0.0
    return torch.from_numpy(keep)


class Objective(ContrastiveObjective):
    NAME = NAME
    DEFAULTS = DEFAULTS

    def __init__(self, model_path, params, seed, random_weights=False):
        super().__init__(model_path, params, seed, random_weights)
        self._cutoff = None
        # ConSERT cuts features of the embedding layer's output (after positions are added); a forward hook does that
        # on the stock transformers encoder instead of a patched copy of its code
        self.encoder.embeddings.register_forward_hook(self._apply_cutoff)
        config = self.encoder.config
        self.position_offset = config.pad_token_id + 1 if config.model_type in ROBERTA_LIKE else 0
        if not self.params["dropout"]:  # the views are the two augmentations alone
            for module in self.encoder.modules():
                if isinstance(module, torch.nn.Dropout):
                    module.p = 0.0

    def _apply_cutoff(self, module, inputs, output):
        return None if self._cutoff is None else output * self._cutoff.to(output.dtype)[:, None, :]

    def make_batch(self, examples, rng: np.random.Generator, max_length: int) -> dict:
        batch = self.tokenize(examples, max_length)
        batch["shuffled_position_ids"] = shuffled_positions(batch["attention_mask"], rng, self.position_offset)
        batch["cutoff"] = cutoff_plan(len(examples), self.encoder.config.hidden_size, self.params["cutoff_rate"], rng)
        return batch

    def loss(self, batch: dict) -> torch.Tensor:
        inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}
        pooling = self.params["train_pooling"] or self.params["pooling"]
        self._cutoff = batch["cutoff"]
        try:
            cut = self.encode(inputs, pooling)
        finally:
            self._cutoff = None
        shuffled = self.encode(inputs, pooling, position_ids=batch["shuffled_position_ids"])
        return nt_xent(cut, shuffled, self.params["temperature"])
