"""Geometry of contextual token vectors (Ethayarajh 2019, "How Contextual are Contextualized Word Representations?").

Every function takes one layer's token vectors, ``vectors`` (n, d), one row per token occurrence, plus integer ids
per row (``word_ids``: which word type the occurrence is; ``sentence_ids``: which sentence it is in). The paper's
measures, with its definitions:

- anisotropy: the mean cosine between two occurrences drawn uniformly at random (seeded);
- self-similarity of a word: the mean cosine between its occurrences, over all pairs of distinct occurrences;
  ``adjusted`` = self-similarity minus the layer's anisotropy (the paper's correction);
- intra-sentence similarity: the mean cosine between each token and its sentence's mean vector, averaged over
  sentences; adjusted likewise by the anisotropy;
- maximum explainable variance (MEV) of a word: sigma_1^2 / sum_i sigma_i^2 of the (uncentred, as in the paper)
  occurrence matrix, i.e. the share of the occurrences' second moment that the best single static vector explains.
"""
from __future__ import annotations

import numpy as np


def _unit(vectors: np.ndarray) -> np.ndarray:
    v = np.asarray(vectors, dtype=np.float64)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def _groups(ids: np.ndarray, min_count: int) -> list[np.ndarray]:
    """Row indices of each id that occurs at least min_count times, in id order."""
    ids = np.asarray(ids)
    if len(ids) == 0:
        return []
    order = np.argsort(ids, kind="stable")
    uniq, starts, counts = np.unique(ids[order], return_index=True, return_counts=True)
    return [order[s:s + c] for s, c in zip(starts, counts) if c >= min_count]


def anisotropy(vectors: np.ndarray, n_pairs: int = 1000, seed: int = 0) -> float:
    """Mean cosine between n_pairs random pairs of distinct occurrences (uniform, seeded)."""
    n = len(vectors)
    if n < 2:
        raise ValueError("anisotropy needs at least two token vectors")
    rng = np.random.default_rng(seed)
    i = rng.integers(n, size=n_pairs)
    j = rng.integers(n - 1, size=n_pairs)
    j = j + (j >= i)  # uniform over the other n - 1 rows, so a row is never paired with itself
    return float(np.mean(pair_cosines(vectors, i, j)))


def different_word_pairs(word_ids: np.ndarray, n_pairs: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """n_pairs (i, j) row pairs drawn uniformly among the pairs whose rows are occurrences of different words (seeded;
    rejection sampling, so two occurrences of one word are never a pair): the items of the anisotropy baseline."""
    ids = np.asarray(word_ids)
    if len(np.unique(ids)) < 2:
        raise ValueError("anisotropy over different words needs at least two distinct words")
    rng = np.random.default_rng(seed)
    i, j = np.empty(0, np.int64), np.empty(0, np.int64)
    while len(i) < n_pairs:
        a, b = rng.integers(len(ids), size=(2, 2 * n_pairs))
        keep = ids[a] != ids[b]
        i, j = np.concatenate([i, a[keep]]), np.concatenate([j, b[keep]])
    return i[:n_pairs], j[:n_pairs]


def pair_cosines(vectors: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """The cosine of each row pair (i[k], j[k])."""
    u = _unit(vectors)
    return np.sum(u[i] * u[j], axis=1)


def _mean_pair_cosine(unit: np.ndarray) -> float:
    # mean over i != j of u_i . u_j = (|sum u|^2 - n) / (n (n - 1)) for unit rows: O(n d), no n x n Gram matrix
    n = len(unit)
    s = unit.sum(axis=0)
    return float((s @ s - n) / (n * (n - 1)))


def self_similarity(vectors: np.ndarray, word_ids: np.ndarray, min_occurrences: int = 2) -> dict[int, float]:
    """Self-similarity of every word with at least min_occurrences occurrences (the paper uses >= 5 contexts)."""
    u = _unit(vectors)
    ids = np.asarray(word_ids)
    return {int(ids[g[0]]): _mean_pair_cosine(u[g]) for g in _groups(ids, max(min_occurrences, 2))}


def mean_self_similarity(vectors: np.ndarray, word_ids: np.ndarray, min_occurrences: int = 5,
                         adjust_by: float | None = None) -> float:
    """Mean self-similarity over words (each word counts once); minus `adjust_by` (the layer's anisotropy) if given."""
    values = list(self_similarity(vectors, word_ids, min_occurrences).values())
    if not values:
        raise ValueError(f"no word occurs at least {min_occurrences} times")
    return float(np.mean(values)) - (adjust_by or 0.0)


def adjusted_self_similarity(vectors: np.ndarray, word_ids: np.ndarray, anisotropy: float,
                             min_occurrences: int = 5) -> dict[int, float]:
    """Each word's self-similarity minus the layer's anisotropy (the paper's adjustment): 0 when its occurrences are
    no more alike than occurrences of different words, 1 - anisotropy when they are identical."""
    return {w: s - anisotropy for w, s in self_similarity(vectors, word_ids, min_occurrences).items()}


def adjusted_explainable_variance(vectors: np.ndarray, word_ids: np.ndarray, min_occurrences: int = 5,
                                  baseline_sets: int = 5, seed: int = 0) -> dict[int, tuple[float, float]]:
    """(MEV, baseline) of every word with at least min_occurrences occurrences; the adjusted MEV is MEV - baseline.

    The baseline is the mean MEV of `baseline_sets` seeded draws of as many occurrences of other words (without
    replacement where there are enough): the share a first principal component takes of any n vectors of this
    layer, which is at least 1/n and grows with the layer's anisotropy. The paper adjusts by the first component's
    share for uniformly sampled vectors; drawing the word's own count removes the 1/n floor too, so 0 means a
    static vector explains no more of the word's occurrences than of random ones."""
    ids = np.asarray(word_ids)
    raw = explainable_variance(vectors, ids, min_occurrences)
    v = np.asarray(vectors, dtype=np.float64)
    rng = np.random.default_rng(seed)
    out = {}
    for w, mev in raw.items():
        others = np.flatnonzero(ids != w)
        n = int(np.sum(ids == w))
        draws = [rng.choice(others, n, replace=len(others) < n) for _ in range(baseline_sets)]
        base = [explainable_variance(v[d], np.zeros(n, int), 2)[0] for d in draws]
        out[w] = (mev, float(np.mean(base)))
    return out


def intra_sentence_similarity(vectors: np.ndarray, sentence_ids: np.ndarray) -> float:
    """Mean over sentences of the mean cosine between each token and the sentence's mean token vector."""
    v = np.asarray(vectors, dtype=np.float64)
    values = []
    for g in _groups(sentence_ids, 1):
        centre = _unit(v[g].mean(axis=0, keepdims=True))[0]
        values.append(float(np.mean(_unit(v[g]) @ centre)))
    return float(np.mean(values))


def explainable_variance(vectors: np.ndarray, word_ids: np.ndarray, min_occurrences: int = 2) -> dict[int, float]:
    """Maximum explainable variance of every word with at least min_occurrences occurrences: the share of the
    squared singular values of its (uncentred) occurrence matrix taken by the first one."""
    v = np.asarray(vectors, dtype=np.float64)
    ids = np.asarray(word_ids)
    out = {}
    for g in _groups(ids, max(min_occurrences, 2)):
        s2 = np.linalg.svd(v[g], compute_uv=False) ** 2
        out[int(ids[g[0]])] = float(s2[0] / s2.sum()) if s2.sum() > 0 else float("nan")
    return out


def layer_summary(vectors: np.ndarray, word_ids: np.ndarray, sentence_ids: np.ndarray, min_occurrences: int = 5,
                  n_pairs: int = 1000, seed: int = 0) -> dict[str, float]:
    """All of the paper's per-layer numbers for one layer (means over words with >= min_occurrences occurrences)."""
    aniso = anisotropy(vectors, n_pairs, seed)
    selfsim = mean_self_similarity(vectors, word_ids, min_occurrences)
    mev = list(explainable_variance(vectors, word_ids, min_occurrences).values())
    intra = intra_sentence_similarity(vectors, sentence_ids)
    return {"anisotropy": aniso, "self_similarity": selfsim, "adjusted_self_similarity": selfsim - aniso,
            "intra_sentence_similarity": intra,
            "adjusted_intra_sentence_similarity": intra - aniso,
            "max_explainable_variance": float(np.nanmean(mev))}
