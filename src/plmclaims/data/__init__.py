"""Data loaders, one module per benchmark family."""
from __future__ import annotations

from pathlib import Path

import numpy as np

DEFAULT_DATA_ROOT = "data"  # config/config.yaml's default, where SentEval's download script puts the files


def resolve_root(template: str, data_root: str | Path | None) -> Path:
    """A tier's local source folder ('{data_root}/senteval') for a data root; None means the config default.

    The loaders and the checksum verification both go through this, so they always name the same files."""
    return Path(str(template).format(data_root=DEFAULT_DATA_ROOT if data_root is None else data_root))


def seeded_subset(n: int, k: int | None, seed: int) -> np.ndarray | None:
    """Sorted indices of a seeded sample of k of n items, or None when no sampling is asked for (or k >= n).

    Every budget-driven subsample (STS pairs in test budgets, GLUE train and dev splits) draws through this
    one function, so the same (n, k, seed) always selects the same items."""
    if not k or n <= k:
        return None
    return np.sort(np.random.default_rng(seed).choice(n, k, replace=False))
