"""DeCLUTR (Giorgi et al. 2021): spans of one document as positives, an MLM loss on the anchors, mean pooling."""
from __future__ import annotations

import numpy as np
import torch

from .base import ContrastiveObjective, mask_tokens, masked_mean, nt_xent

NAME = "declutr"
INPUT = "documents"
# DeCLUTR paper + training_config/declutr_base.jsonnet (CATALOG T8): spans of 32-512 tokens, anchor length ~ Beta(4, 2),
# positive length ~ Beta(2, 4), positives overlapping / adjacent to / inside the anchor, 2 positives averaged, NT-Xent
# temperature 0.05 plus the MLM loss (15% masking) on the anchors, mean pooling at train and test. The recipe samples 2
# anchors per document; 1 keeps an equal-budget step at batch_size anchors like every other objective's batch_size
# sentences. Span lengths are scaled to the tier's max_length with the recipe's 32/512 ratio (see span_bounds).
DEFAULTS = {"temperature": 0.05, "pooling": "mean", "min_span": 32, "max_span": 512, "num_anchors": 1,
            "num_positives": 2, "mlm_probability": 0.15}


def span_bounds(min_span: int, max_span: int, max_length: int) -> tuple[int, int]:
    """(min, max) span tokens within `max_length` ([CLS]/[SEP] included) keeping the recipe's min/max ratio."""
    hi = min(max_span, max_length - 2)
    return max(1, round(min_span * hi / max_span)), hi


def sample_spans(n_tokens: int, rng: np.random.Generator, min_len: int, max_len: int,
                 n_positives: int) -> tuple[tuple[int, int], list[tuple[int, int]]]:
    """One anchor and its positives as [start, end) token offsets inside a document of n_tokens, as DeCLUTR's
    sample_anchor_positive_pairs draws them: longer anchors (Beta(4, 2)) are more representative of their document,
    shorter positives (Beta(2, 4)) overlap it less; a positive starts anywhere from `length` tokens before the anchor to
    its end, so it overlaps, is adjacent to or lies inside the anchor."""
    max_len = min(max_len, n_tokens)
    min_len = min(min_len, max_len)
    length = int(rng.beta(4, 2) * (max_len - min_len) + min_len)
    start = int(rng.integers(0, n_tokens - length + 1))
    end = start + length
    positives = []
    for _ in range(n_positives):
        plen = int(rng.beta(2, 4) * (max_len - min_len) + min_len)
        pstart = int(rng.integers(max(0, start - plen), min(end, n_tokens - plen) + 1))
        positives.append((pstart, pstart + plen))
    return (start, end), positives


class Objective(ContrastiveObjective):
    NAME = NAME
    DEFAULTS = DEFAULTS
    MLM = True  # the MLM loss needs the pre-trained head

    def __init__(self, model_path, params, seed, random_weights=False):
        super().__init__(model_path, params, seed, random_weights)
        self._doc_ids: dict[str, list[int]] = {}  # each document tokenised once, then reused by every batch

    def document_ids(self, document: list[str]) -> list[int]:
        text = " ".join(document)
        if text not in self._doc_ids:
            self._doc_ids[text] = self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        return self._doc_ids[text]

    def _pad(self, spans: list[list[int]]) -> dict:
        # [CLS] span [SEP] (RoBERTa: <s> span </s>, its cls/sep tokens); transformers 5 tokenizers have no
        # build_inputs_with_special_tokens any more
        tok = self.tokenizer
        return tok.pad({"input_ids": [[tok.cls_token_id, *s, tok.sep_token_id] for s in spans]}, return_tensors="pt")

    def make_batch(self, examples, rng: np.random.Generator, max_length: int) -> dict:
        p = self.params
        lo, hi = span_bounds(p["min_span"], p["max_span"], max_length)
        anchors, positives = [], []
        for document in examples:
            ids = self.document_ids(document)
            for _ in range(p["num_anchors"]):
                (a0, a1), pos = sample_spans(len(ids), rng, lo, hi, p["num_positives"])
                anchors.append(ids[a0:a1])
                positives += [ids[s:e] for s, e in pos]
        a, b = self._pad(anchors), self._pad(positives)
        special = torch.isin(a["input_ids"], torch.tensor(self.tokenizer.all_special_ids))
        masked, labels = mask_tokens(a["input_ids"], special, self.tokenizer, rng, p["mlm_probability"])
        return {"anchor_input_ids": masked, "anchor_attention_mask": a["attention_mask"], "mlm_labels": labels,
                "positive_input_ids": b["input_ids"], "positive_attention_mask": b["attention_mask"]}

    def mlm_head(self) -> torch.nn.Module:
        """The MLM head on top of the encoder (BERT's `cls`, RoBERTa's `lm_head`): the one child that is not the encoder."""
        (head,) = [m for m in self.mlm.children() if m is not self.encoder]
        return head

    def loss(self, batch: dict) -> torch.Tensor:
        # as in DeCLUTR, the masked anchors' one forward pass gives both the MLM loss and the anchor vectors
        att, labels = batch["anchor_attention_mask"], batch["mlm_labels"]
        hidden = self.encoder(input_ids=batch["anchor_input_ids"], attention_mask=att).last_hidden_state
        anchor = masked_mean(hidden, att)
        pos = {"input_ids": batch["positive_input_ids"], "attention_mask": batch["positive_attention_mask"]}
        positive = self.encode(pos, "mean").view(len(anchor), self.params["num_positives"], -1).mean(1)  # averaged
        loss = nt_xent(anchor, positive, self.params["temperature"])
        chosen = labels != -100
        if bool(chosen.any()):
            # the head only at the masked tokens: the same loss as the model's own (labels=...), without vocabulary
            # logits for the 85% of tokens that predict nothing (the head costs as much as the encoder at micro)
            logits = self.mlm_head()(hidden[chosen]).float()
            loss = loss + torch.nn.functional.cross_entropy(logits, labels[chosen])
        return loss
