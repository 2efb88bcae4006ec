"""Data loaders, one module per benchmark family."""
from __future__ import annotations

import numpy as np


def seeded_subset(n: int, k: int | None, seed: int) -> np.ndarray | None:
    """Sorted indices of a seeded sample of k of n items, or None when no sampling is asked for (or k >= n).

    Every budget-driven subsample (STS pairs in test budgets, GLUE train and dev splits) draws through this
    one function, so the same (n, k, seed) always selects the same items."""
    if not k or n <= k:
        return None
    return np.sort(np.random.default_rng(seed).choice(n, k, replace=False))
