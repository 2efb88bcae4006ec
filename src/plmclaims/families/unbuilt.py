"""Catalog families with no rule chain yet: their vocabulary only, so the catalog's claims validate and every
measurement plans as not-run with the reason. Building one moves it to its own package (see families/__init__)."""
from __future__ import annotations

from .family import Family

FAMILIES = (
    Family(name="probing", package=None, evaluators=("probe",), metrics=("accuracy", "uuas", "dspr"),
           methods=(), planned_methods=("probe-linear", "structural-probe")),
    Family(name="intrinsic", package=None, evaluators=("intrinsic",), metrics=("cosine",),
           methods=(), planned_methods=("self-similarity", "anisotropy")),
    Family(name="pruning", package=None, evaluators=("senteval", "mteb", "glue-dev", "lm-eval"),
           metrics=("spearman", "pearson", "accuracy", "f1", "matthews", "perplexity", "bleu"),
           methods=(), planned_methods=("head-pruning", "magnitude-pruning", "distillation", "quantisation")),
)
