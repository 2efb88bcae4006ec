"""Contrastive sentence-embedding objectives (issue 10, CATALOG T8), one module each, all on one training loop (train.py).

Each module defines NAME, INPUT ('sentences' or 'documents'), DEFAULTS (its recipe, cited) and `Objective`
(a base.ContrastiveObjective); notes/contrastive-api.md is the contract.
"""
from __future__ import annotations

from importlib import import_module

# the claim's method name -> module in this package
OBJECTIVES = {
    "simcse": "simcse",
    "declutr": "declutr",
    "consert": "consert",
    "bsl": "bsl",
    "diffcse": "diffcse",
    "promptbert": "promptbert",
    "rankencoder": "rankencoder",
}


def get(name: str):
    """The objective's module, imported on demand so that one broken or missing module does not stop the others."""
    if name not in OBJECTIVES:
        raise KeyError(f"contrastive objective {name!r} unknown; allowed: {', '.join(OBJECTIVES)}")
    return import_module(f"{__name__}.{OBJECTIVES[name]}")
