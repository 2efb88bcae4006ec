"""PromptBERT (Jiang et al. 2022, arXiv 2201.04337), unsupervised: each sentence is put into a prompt template and its
vector is the last hidden state at the template's [MASK]; the two views of a sentence are two different templates, and
InfoNCE pulls them together against the batch's other sentences.

Template denoising: the vector a template gives with an empty sentence slot carries the template's own bias, so it is
subtracted. As in kongds/Prompt-BERT (prompt_bert/models.py `get_delta`, evaluation.py `get_delta`), the template-only
input keeps the positions the template's tokens have around a sentence of the same token length: [CLS] and the prefix
at 0..len(head)-1, the suffix shifted by the sentence's length. The repository denoises in training (run.sh
'unsup-bert': --mask_embedding_sentence_delta) but not at test (its evaluation flags lack it); both are params here.

Positions of the [MASK] are computed from the token counts, not searched for, so a sentence that itself contains the
text "[MASK]" cannot move the pooled position.
"""
from __future__ import annotations

import numpy as np
import torch

from ...errors import UserError
from .base import ContrastiveObjective, info_nce, mlp_pooler

NAME = "promptbert"
INPUT = "sentences"
DEFAULTS = {
    "pooling": "mask",  # the [MASK] token's last hidden state (PromptBERT §4; models.py pools last_hidden[input_ids == mask])
    # kongds/Prompt-BERT run.sh, experiment 'unsup-bert': TEMPLATE is the first view and the one evaluation uses
    "template": 'This sentence of "[X]" means [MASK] .',
    # run.sh 'unsup-bert': TEMPLATE2 (--mask_embedding_sentence_different_template), the second view
    "template2": 'This sentence : "[X]" means [MASK] .',
    "temperature": 0.05,  # run.sh: --temp 0.05
    "denoise_train": True,  # run.sh 'unsup-bert' args: --mask_embedding_sentence_delta
    "denoise_test": False,  # run.sh 'unsup-bert' eargs: no --mask_embedding_sentence_delta
    "mlp_only_train": True,  # run.sh: --mlp_only_train (models.py MLPLayer: dense + tanh over the vector, training only)
    "add_period_at_test": True,  # evaluation.py batcher: '.' appended when a sentence ends in none of . ? " '
    # the recipe's learning rate (run.sh 'unsup-bert' LR=1e-5; BATCH=256, EPOCH=1, --max_seq_length 32): the training
    # loop takes lr from the budget, the family reads this key to plan a run at the recipe's lr
    "lr": 1e-5,
}


class Template:
    """A template's token ids around the sentence slot: head = [CLS] + prefix, tail = suffix (with [MASK]) + [SEP]."""

    def __init__(self, text: str, tokenizer):
        if text.count("[X]") != 1 or text.count("[MASK]") != 1 or text.index("[MASK]") < text.index("[X]"):
            raise UserError(f"PromptBERT template {text!r} needs one [X] (the sentence) followed by one [MASK]; "
                            "fix the 'template'/'template2' param")
        prefix, suffix = text.split("[X]")
        suffix = suffix.replace("[MASK]", tokenizer.mask_token)
        self.head = [tokenizer.cls_token_id] + tokenizer.encode(prefix.strip(), add_special_tokens=False)
        self.tail = tokenizer.encode(suffix.strip(), add_special_tokens=False) + [tokenizer.sep_token_id]
        self.mask_offset = self.tail.index(tokenizer.mask_token_id)

    def wrap(self, token_lists: list[list[int]], pad_id: int) -> dict:
        """Padded input ids for head + sentence + tail, and each row's [MASK] position and sentence length."""
        rows = [self.head + t + self.tail for t in token_lists]
        width = max(map(len, rows))
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        att = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = torch.tensor(r)
            att[i, :len(r)] = 1
        lengths = torch.tensor([len(t) for t in token_lists])
        return {"input_ids": ids, "attention_mask": att, "mask_pos": len(self.head) + lengths + self.mask_offset,
                "sentence_len": lengths}


class Objective(ContrastiveObjective):
    NAME = NAME
    DEFAULTS = DEFAULTS

    def __init__(self, model_path: str, params: dict | None, seed: int, random_weights: bool = False):
        super().__init__(model_path, params, seed, random_weights)
        if self.params["pooling"] != "mask":
            raise UserError(f"PromptBERT pools the template's [MASK] state; pooling {self.params['pooling']!r} is not "
                            "its method: drop the 'pooling' param")
        self.templates = [Template(self.params["template"], self.tokenizer), Template(self.params["template2"], self.tokenizer)]
        hidden = self.encoder.config.hidden_size
        self.mlp = mlp_pooler(hidden)  # models.py MLPLayer

    def _tokens(self, sentences: list[str], max_length: int) -> list[list[int]]:
        # train.py prepare_features: the sentence alone is cut to max_seq_length, the template comes on top
        return [ids[:max_length] for ids in self.tokenizer(list(sentences), add_special_tokens=False)["input_ids"]]

    def tokenize(self, sentences: list[str], max_length: int, template: int = 0) -> dict:
        """Test-time inputs (training batches come from make_batch): the sentence in the template."""
        if self.params["add_period_at_test"]:
            sentences = [s + "." if s and s[-1] not in ".?\"'" else s for s in sentences]
        return self.templates[template].wrap(self._tokens(sentences, max_length), self.tokenizer.pad_token_id)

    def template_vectors(self, template: int, lengths: list[int]) -> torch.Tensor:
        """The [MASK] state of the template with an empty slot, one row per sentence length in `lengths`, with the
        tail's positions shifted as if a sentence of that length sat in the slot (Prompt-BERT's get_delta)."""
        t = self.templates[template]
        n = len(lengths)
        ids = torch.tensor([t.head + t.tail] * n, device=self.device)
        pos = torch.arange(ids.shape[1], device=self.device).repeat(n, 1)
        pos[:, len(t.head):] += torch.tensor(lengths, device=self.device).unsqueeze(1)
        out = self.encoder(input_ids=ids, attention_mask=torch.ones_like(ids), position_ids=pos)
        return out.last_hidden_state[:, len(t.head) + t.mask_offset]

    def mask_states(self, batch: dict, template: int, denoise: bool) -> torch.Tensor:
        inputs = {k: batch[k].to(self.device) for k in ("input_ids", "attention_mask")}
        hidden = self.encoder(**inputs).last_hidden_state
        vec = hidden[torch.arange(len(hidden), device=self.device), batch["mask_pos"].to(self.device)]
        if denoise:
            lengths = batch["sentence_len"].tolist()
            uniq = sorted(set(lengths))
            delta = self.template_vectors(template, uniq)
            vec = vec - delta[torch.tensor([uniq.index(n) for n in lengths], device=self.device)]
        return vec

    def encode(self, batch: dict, pooling: str, **kwargs) -> torch.Tensor:
        vec = self.mask_states(batch, 0, self.params["denoise_test"])
        return vec if self.params["mlp_only_train"] else self.mlp(vec)

    def make_batch(self, examples: list, rng: np.random.Generator, max_length: int) -> dict:
        tokens = self._tokens(examples, max_length)  # the two views differ by template (and dropout), not by sampling
        pad = self.tokenizer.pad_token_id
        return {"view1": self.templates[0].wrap(tokens, pad), "view2": self.templates[1].wrap(tokens, pad)}

    def loss(self, batch: dict) -> torch.Tensor:
        denoise = self.params["denoise_train"]
        z1 = self.mlp(self.mask_states(batch["view1"], 0, denoise))
        z2 = self.mlp(self.mask_states(batch["view2"], 1, denoise))
        return info_nce(z1, z2, self.params["temperature"])
