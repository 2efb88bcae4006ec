"""Contrastive sentence-embedding objectives (issue 10, CATALOG T8), one module each, all on one training loop (train.py).

Each module defines:

- NAME, the claim's `method`; INPUT, 'sentences' (a batch is a list of str) or 'documents' (DeCLUTR: a list of
  documents, each a list of sentences);
- DEFAULTS, its recipe with the source of every value (a claim or tier overrides only these keys);
- `Objective(model_path, params, seed, random_weights=False)`, a base.ContrastiveObjective: `make_batch(examples,
  rng, max_length)` collates and augments, `loss(batch)` is the training loss, `after_step()` updates what is not
  trained by gradient (BSL's EMA target), `embed(sentences, batch_size, max_length)` gives the test-time vectors in
  one forward pass per batch, `save(out_dir)` writes what `embed` needs.

train.train runs every objective through the same loop, budget and STS-B dev checkpoint selection.
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
