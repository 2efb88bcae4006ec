"""Catalog families with no rule chain yet: their vocabulary only, so the catalog's claims validate and every
measurement plans as not-run with the reason. Building one moves it to its own package (see families/__init__)."""
from __future__ import annotations

from .family import Family

FAMILIES = (
    # table-to-text generation (prefix-tuning's E2E and DART BLEU, CATALOG T12) and language-model perplexity
    Family(name="generation", package=None, evaluators=("lm-eval",), metrics=("bleu", "perplexity"),
           methods=(), planned_methods=("full-finetuning", "prefix-tuning", "lora")),
    # BERT fine-tuned on protein, DNA and music sequence classification (Kao & Lee 2021, CATALOG T4): none of those
    # data sets is available offline or in the workflow's data root
    Family(name="cross-discipline", package=None, evaluators=("sequence-classification",), metrics=("accuracy",),
           methods=(), planned_methods=("full-finetuning",)),
)
