"""DiffCSE (Chuang et al. 2022, arXiv 2204.10298): SimCSE's loss plus lambda x conditional replaced-token detection.

A frozen MLM generator fills 30% masked tokens of the sentence; a discriminator, whose [CLS] input embedding is
replaced by the sentence vector, predicts for every token whether it was replaced. The sentence vector must carry what
the edit changed, which makes it sensitive to the difference (the "equivariant" half) while SimCSE's dropout views
make it insensitive to noise.

As in voidism/DiffCSE (diffcse/models.py, train.py, run_diffcse.sh): the sentence vector is [CLS] through a projection
MLP with batch norm (--batchnorm) at training only, and the discriminator gets the projected vector; the
discriminator starts from the same pre-trained weights as the encoder; a 2-way linear head scores each token; the
generator's token is its argmax. Two places differ on purpose: the generator's token replaces only the masked
positions (the repository writes its prediction over every position, so a mispredicted unmasked token or [SEP] also
counts as "replaced"), and padding is excluded from the detection loss. The paper's generator is
distilbert-base-uncased (a tier names it as an asset, `contrastive.methods.diffcse.generator`, and the run hands this
module its folder); at micro it is the micro-BERT's own MLM head loaded from the same folder (param 'generator': '' =
the encoder's folder). With random_weights the generator is random too, so the control learns nothing from
pre-training through it.

The generator reads the encoder tokenizer's ids and its argmax ids go into the discriminator (the repository does the
same: one tokenizer, bert-base-uncased's, whose WordPiece vocabulary distilbert-base-uncased shares), so a generator
with another vocabulary size is refused rather than fed ids that mean other words.
"""
from __future__ import annotations

import numpy as np
import torch

from ...errors import UserError
from .base import ContrastiveObjective, info_nce, load_mlm, mask_tokens

NAME = "diffcse"
INPUT = "sentences"
DEFAULTS = {
    "pooling": "cls-before-pooler",  # run_diffcse.sh: --pooler_type cls --mlp_only_train ([CLS] without MLP at test)
    "temperature": 0.05,  # run_diffcse.sh: --temp 0.05
    "lambda_weight": 0.005,  # run_diffcse.sh: LAMBDA=0.005 (DiffCSE Table 1's BERT-base STS model)
    "masking_ratio": 0.30,  # run_diffcse.sh: MASK=0.30
    # a folder; '' = the encoder's folder (micro); the repository's is distilbert-base-uncased (run_diffcse.sh
    # --generator_name, models.py cl_init), which a tier names as an asset (contrastive.methods.diffcse.generator)
    "generator": "",
    # the recipe's learning rate (run_diffcse.sh LR=7e-6; batch 64, --max_seq_length 32, 1 epoch, CATALOG T8 says 2):
    # the training loop takes lr from the budget, the family reads this key to plan a run at the recipe's lr
    "lr": 7e-6,
}


class ProjectionMLP(torch.nn.Module):
    """diffcse/models.py ProjectionMLP: Linear(h, 2h) - BatchNorm - ReLU - Linear(2h, h) - BatchNorm without affine."""

    def __init__(self, hidden: int):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(hidden, 2 * hidden, bias=False), torch.nn.BatchNorm1d(2 * hidden), torch.nn.ReLU(),
            torch.nn.Linear(2 * hidden, hidden, bias=False), torch.nn.BatchNorm1d(hidden, affine=False))

    def forward(self, x):
        return self.net(x)


def replace_tokens(input_ids: torch.Tensor, chosen: torch.Tensor, generated: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The discriminator's input (the generator's token at the masked positions, the original elsewhere) and its labels:
    1 exactly where that input differs from the original sentence (a generator that restores the token is no edit)."""
    edited = torch.where(chosen, generated, input_ids)
    return edited, (edited != input_ids).long()


class Objective(ContrastiveObjective):
    NAME = NAME
    DEFAULTS = DEFAULTS

    def __init__(self, model_path: str, params: dict | None, seed: int, random_weights: bool = False):
        super().__init__(model_path, params, seed, random_weights)
        from transformers import AutoConfig, AutoModel

        hidden = self.encoder.config.hidden_size
        self.projector = ProjectionMLP(hidden)
        if random_weights:
            self.discriminator = AutoModel.from_config(AutoConfig.from_pretrained(model_path))
        else:
            self.discriminator = AutoModel.from_pretrained(model_path)  # train.py: discriminator <- pre-trained BERT
        self.rtd_head = torch.nn.Linear(hidden, 2)  # train.py: electra_head = Linear(768, 2)
        self.generator, _ = load_mlm(self.params["generator"] or model_path, seed, random_weights, require_head=True)
        self.generator.requires_grad_(False)
        rows, ours = self.generator.get_input_embeddings().num_embeddings, self.encoder.get_input_embeddings().num_embeddings
        if rows != ours:
            raise UserError(f"DiffCSE generator {self.params['generator']!r}: vocabulary of {rows} tokens, but the encoder "
                            f"{model_path!r} has {ours}; the generator reads the encoder tokenizer's ids, so it needs the "
                            "same vocabulary (e.g. distilbert-base-uncased for a bert-base-uncased encoder)")
        self._cls_input = None
        # the conditioning: the discriminator's embedding output at [CLS] is the sentence vector (DiffCSE's
        # modeling_bert.py, cls_input), set by loss() just before the discriminator runs
        self.discriminator.embeddings.register_forward_hook(self._condition)

    def _condition(self, module, args, output):
        if self._cls_input is None:
            return output
        return torch.cat([self._cls_input.unsqueeze(1).to(output.dtype), output[:, 1:]], dim=1)

    def train(self, mode: bool = True):
        super().train(mode)
        self.generator.eval()  # frozen: no dropout in the generator
        return self

    def make_batch(self, examples: list, rng: np.random.Generator, max_length: int) -> dict:
        batch = self.tokenize(examples, max_length)
        special = torch.from_numpy(np.isin(batch["input_ids"].numpy(), self.tokenizer.all_special_ids))
        for view in (1, 2):  # each dropout view gets its own edit, as the repository masks the flattened pair
            ids, labels = mask_tokens(batch["input_ids"], special, self.tokenizer, rng, self.params["masking_ratio"])
            batch[f"mlm_ids{view}"], batch[f"chosen{view}"] = ids, labels != -100
        return batch

    def loss(self, batch: dict) -> torch.Tensor:
        batch = {k: v.to(self.device) for k, v in batch.items()}
        keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch]
        pair = {k: torch.cat([batch[k], batch[k]]) for k in keys}  # two dropout views in one pass
        z = self.projector(self.encoder(**pair).last_hidden_state[:, 0])
        z1, z2 = z.chunk(2)
        loss = info_nce(z1, z2, self.params["temperature"])

        att = pair["attention_mask"]
        with torch.no_grad():
            generated = self.generator(input_ids=torch.cat([batch["mlm_ids1"], batch["mlm_ids2"]]), attention_mask=att).logits.argmax(-1)
        edited, labels = replace_tokens(pair["input_ids"], torch.cat([batch["chosen1"], batch["chosen2"]]), generated)
        self._cls_input = z
        try:
            hidden = self.discriminator(**(pair | {"input_ids": edited})).last_hidden_state
        finally:
            self._cls_input = None
        real = att.bool()
        rtd = torch.nn.functional.cross_entropy(self.rtd_head(hidden)[real], labels[real])
        return loss + self.params["lambda_weight"] * rtd
