"""BSL (Zhang et al. 2021, "Bootstrapped Unsupervised Sentence Representation Learning", ACL): BYOL for sentences.

The online network (encoder + mean pooling, then a predictor) predicts the target network's vector of the other view;
the target is an exponential moving average of the online encoder and gets no gradient. The loss is 2 - 2 cos between
the online prediction and the target's vector, summed over both directions; there are no negatives.

As in yanzhangnlp/BSL (sentence_transformers/losses/BYOLoss.py, training/unsupervised_tuning.py): the target's
"projection" is its pooled sentence vector (no separate projector), the predictor is three MLP blocks in sequence
(Linear - BatchNorm - ReLU - Linear - ReLU - Linear, hidden 10 x dim; the repository sends view two through block 2
twice, an evident slip, here both views go through blocks 1-3). The paper's two views are a sentence and its
back-translation; offline there is no translation model, so the views are two dropout passes (SimCSE's augmentation).
"""
from __future__ import annotations

import copy

import numpy as np
import torch

from .base import ContrastiveObjective, pool

NAME = "bsl"
INPUT = "sentences"
DEFAULTS = {
    "pooling": "mean",  # unsupervised_tuning.py: models.Pooling(dim), whose default is mean pooling
    "ema_decay": 0.999,  # unsupervised_tuning.py: moving_average_decay = 0.999
    "predictor_blocks": 3,  # BYOLoss.py: online_predictor_1, _2, _3 applied in sequence
    "predictor_hidden_mult": 10,  # BYOLoss.py: MLP(dim, dim, 10 * dim)
    # the recipe's learning rate (unsupervised_tuning.py optimizer_params lr 1e-4; batch 64, max_seq_length 64, 1 epoch,
    # 10% warm-up): the training loop takes lr from the budget, the family reads this key to plan a run at the recipe's lr
    "lr": 1e-4,
}


def bsl_loss(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over the batch of 2 - 2 cos(prediction, target): 0 when they point the same way, 4 when opposite."""
    p = torch.nn.functional.normalize(prediction, dim=-1)
    t = torch.nn.functional.normalize(target, dim=-1)
    return (2 - 2 * (p * t).sum(-1)).mean()


def predictor_block(dim: int, hidden: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.BatchNorm1d(hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, dim))


@torch.no_grad()
def ema_update(target: torch.nn.Module, online: torch.nn.Module, decay: float) -> None:
    """target <- decay * target + (1 - decay) * online, parameter by parameter (moves each by (1 - decay) of the gap)."""
    for t, o in zip(target.parameters(), online.parameters(), strict=True):
        t.lerp_(o, 1 - decay)


class Objective(ContrastiveObjective):
    NAME = NAME
    DEFAULTS = DEFAULTS

    def __init__(self, model_path: str, params: dict | None, seed: int, random_weights: bool = False):
        super().__init__(model_path, params, seed, random_weights)
        dim = self.encoder.config.hidden_size
        hidden = self.params["predictor_hidden_mult"] * dim
        self.predictor = torch.nn.Sequential(*[predictor_block(dim, hidden) for _ in range(self.params["predictor_blocks"])])
        self.target = copy.deepcopy(self.encoder).requires_grad_(False)  # starts equal to the online encoder

    def make_batch(self, examples: list, rng: np.random.Generator, max_length: int) -> dict:
        return self.tokenize(examples, max_length)  # the views are two dropout passes of the same tokens

    def _vectors(self, model, batch: dict) -> torch.Tensor:
        """The test-time pooling, for the online encoder and the target alike."""
        method = self.params["pooling"]
        return pool(model(**batch, output_hidden_states=method not in ("cls", "cls-before-pooler")), batch, method)

    def loss(self, batch: dict) -> torch.Tensor:
        batch = {k: v.to(self.device) for k, v in batch.items()}
        pair = {k: torch.cat([v, v]) for k, v in batch.items()}
        v1, v2 = self._vectors(self.encoder, pair).chunk(2)
        p1, p2 = self.predictor(v1), self.predictor(v2)  # one view per call: batch norm sees each view alone, as in BYOLoss.py
        with torch.no_grad():  # the target keeps dropout on, as in the repository (a copy inside the trained module)
            t1, t2 = self._vectors(self.target, pair).chunk(2)
        return bsl_loss(p1, t2) + bsl_loss(p2, t1)

    def after_step(self) -> None:
        ema_update(self.target, self.encoder, self.params["ema_decay"])
