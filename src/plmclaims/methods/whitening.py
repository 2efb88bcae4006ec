"""BERT-whitening (Su et al. 2021, arXiv 2103.15316): x -> (x - mu) W, W from the SVD of the covariance.

mu and W are fitted on a set of sentence vectors: the target STS sentences themselves ("target")
or another corpus such as NLI sentences ("nli"). Keeping only the first k columns of W reduces the
dimension, as in the paper's whitening-k variants.
"""
from __future__ import annotations

import numpy as np


def fit(vectors: np.ndarray, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    mu = vectors.mean(axis=0, keepdims=True)
    cov = np.cov((vectors - mu).T)
    # the covariance is symmetric, so its SVD is its eigendecomposition (the paper's U, Lambda); the symmetric solver
    # always converges, where LAPACK's SVD can fail on a rank-deficient covariance (fewer sentences than dimensions,
    # as on a small sample's own sentences). Largest variance first, as the SVD orders them (whitening-k keeps those)
    s, u = np.linalg.eigh(cov)
    s, u = s[::-1], u[:, ::-1]
    w = u @ np.diag(1.0 / np.sqrt(np.maximum(s, 1e-12)))
    return mu, (w[:, :k] if k else w)


def apply(vectors: np.ndarray, mu: np.ndarray, w: np.ndarray) -> np.ndarray:
    return (vectors - mu) @ w
