"""Probes over per-layer representations (issue 11: T2, T3, P1).

(a) Classifier probes. ``layerwise_accuracy`` fits one standardised, seeded logistic regression per layer and
returns dev accuracy per layer. Tenney et al. (2019, "BERT Rediscovers the Classical NLP Pipeline") summarise a
task by where its information arrives: ``expected_layer`` (E_Delta, from cumulative scores; see its docstring) and
``centre_of_gravity`` (from the softmax weights of a scalar mix over all layers). ``cumulative_scores`` produces
both from scalar-mix probes (a linear classifier on a learned softmax-weighted sum of standardised layers 0..l).

(b) Hewitt & Manning's (2019) structural probe: a rank-k matrix B such that ||B(h_i - h_j)||^2 fits the tree
distance between words i and j, trained with their loss (L1, each sentence's sum normalised by its length
squared, averaged over sentences; Adam). Scored as in their reporter: UUAS of the minimum spanning tree of the
predicted distances against the gold tree, punctuation left out; distance Spearman (DSpr.) as the mean over
sentence lengths 5-50 of the mean per-word Spearman correlation between predicted and gold distance rows.
Vectors are one per word; aligning sub-word tokens to words belongs to the encoder.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from scipy.sparse.csgraph import minimum_spanning_tree, shortest_path
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import LabelEncoder, StandardScaler

from ..data.ud import HM_PUNCT_XPOS
from ..stats import rankdata


# ---------------------------------------------------------------- (a) classifier probes

def linear_probe(x_train: np.ndarray, y_train, x_dev: np.ndarray, y_dev, seed: int = 0, c: float = 1.0,
                 max_iter: int = 1000) -> float:
    """Dev accuracy of a logistic regression on standardised features (scaler fitted on train)."""
    model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=max_iter, random_state=seed))
    model.fit(x_train, np.asarray(y_train))
    return float(np.mean(model.predict(x_dev) == np.asarray(y_dev)))


def layerwise_accuracy(train_layers: Sequence[np.ndarray], y_train, dev_layers: Sequence[np.ndarray], y_dev,
                       seed: int = 0, **kwargs) -> np.ndarray:
    """Dev accuracy of linear_probe at each layer; train_layers[l] is (n_train, d), dev_layers[l] (n_dev, d)."""
    if len(train_layers) != len(dev_layers):
        raise ValueError(f"{len(train_layers)} train layers but {len(dev_layers)} dev layers")
    return np.array([linear_probe(a, y_train, b, y_dev, seed, **kwargs) for a, b in zip(train_layers, dev_layers)])


def majority_baseline(y_train, y_dev) -> float:
    """Dev accuracy of always predicting the most frequent train label: the floor a probe must beat."""
    labels, counts = np.unique(np.asarray(y_train), return_counts=True)
    return float(np.mean(np.asarray(y_dev) == labels[np.argmax(counts)]))


def best_layer(scores: Sequence[float]) -> int:
    """The layer with the highest score (the lowest such layer on a tie)."""
    return int(np.argmax(np.asarray(scores)))


def expected_layer(cumulative: Sequence[float]) -> float:
    """Tenney et al.'s expected layer E_Delta[l] = sum_{l=1..L} l * Delta_l / sum_{l=1..L} Delta_l.

    ``cumulative[l]`` is S(l), the score of a probe that sees layers 0..l together (a scalar mix of them), so
    Delta_l = S(l) - S(l-1) is what layer l adds to the layers below it; layer 0 is the baseline and has no Delta.
    Deltas are used as they are, negative ones included, as in the paper. A task whose information is all in
    layer 0 has sum Delta = 0 and no expected layer: nan."""
    s = np.asarray(cumulative, dtype=np.float64)
    delta = np.diff(s)
    total = delta.sum()
    if len(delta) == 0 or np.isclose(total, 0.0):
        return float("nan")
    return float(np.sum(np.arange(1, len(s)) * delta) / total)


def centre_of_gravity(weights: Sequence[float]) -> float:
    """Tenney et al.'s E_s[l] = sum_l l * s_l for softmax scalar-mix weights s over layers 0..L."""
    w = np.asarray(weights, dtype=np.float64)
    return float(np.sum(np.arange(len(w)) * w) / w.sum())


def scalar_mix_probe(train_layers: Sequence[np.ndarray], y_train, dev_layers: Sequence[np.ndarray], y_dev,
                     seed: int = 0, epochs: int = 20, lr: float = 1e-2, batch_size: int = 128,
                     weight_decay: float = 1e-4) -> tuple[float, np.ndarray]:
    """A linear classifier on gamma * sum_l softmax(w)_l * z_l, z_l layer l standardised with train statistics
    (so that a layer's weight is not its norm); trained with Adam on cross-entropy. Returns dev accuracy and the
    softmax weights. Deterministic per seed (seeded init and batch order)."""
    import torch

    enc = LabelEncoder().fit(np.concatenate([np.asarray(y_train), np.asarray(y_dev)]))
    scalers = [StandardScaler().fit(a) for a in train_layers]

    def stack(layers):
        return torch.tensor(np.stack([s.transform(a) for s, a in zip(scalers, layers)], axis=1), dtype=torch.float32)

    xt, xd = stack(train_layers), stack(dev_layers)  # (n, layers, d)
    yt, yd = torch.tensor(enc.transform(np.asarray(y_train))), torch.tensor(enc.transform(np.asarray(y_dev)))
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    mix = torch.nn.Parameter(torch.zeros(xt.shape[1]))
    gamma = torch.nn.Parameter(torch.ones(()))
    head = torch.nn.Linear(xt.shape[2], len(enc.classes_))
    params = [mix, gamma, *head.parameters()]
    opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)

    def forward(x):
        return head(gamma * torch.einsum("nld,l->nd", x, torch.softmax(mix, 0)))

    for _ in range(epochs):
        for batch in torch.randperm(len(xt), generator=gen).split(batch_size):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(forward(xt[batch]), yt[batch]).backward()
            opt.step()
    with torch.no_grad():
        acc = float((forward(xd).argmax(1) == yd).float().mean())
        return acc, torch.softmax(mix, 0).numpy().astype(np.float64)


def cumulative_scores(train_layers: Sequence[np.ndarray], y_train, dev_layers: Sequence[np.ndarray], y_dev,
                      seed: int = 0, **kwargs) -> tuple[np.ndarray, np.ndarray]:
    """S(l) for l = 0..L, each from a scalar_mix_probe over layers 0..l, and the mix weights of the full probe
    (l = L), for expected_layer and centre_of_gravity."""
    scores, weights = [], None
    for l in range(len(train_layers)):
        acc, weights = scalar_mix_probe(train_layers[: l + 1], y_train, dev_layers[: l + 1], y_dev, seed, **kwargs)
        scores.append(acc)
    return np.array(scores), weights


# ---------------------------------------------------------------- (b) structural probe

def tree_distances(heads: np.ndarray) -> np.ndarray:
    """Path lengths between all words of a dependency tree given its CoNLL-U heads (1-based, 0 = root)."""
    heads = np.asarray(heads)
    n = len(heads)
    adj = np.zeros((n, n))
    for i, h in enumerate(heads):
        if h:
            adj[i, h - 1] = adj[h - 1, i] = 1
    dist = shortest_path(adj, directed=False, unweighted=True)
    if np.isinf(dist).any():
        raise ValueError(f"heads {heads.tolist()} do not form one tree")
    return dist


def punctuation_mask(xpos: Sequence[str]) -> np.ndarray:
    """True for the words UUAS scores: all but Hewitt & Manning's punctuation tags ('' , . : `` -LRB- -RRB-)."""
    return ~np.isin(np.asarray(xpos, dtype=object), list(HM_PUNCT_XPOS))


def fit_structural_probe(vectors: Sequence[np.ndarray], distances: Sequence[np.ndarray], rank: int = 64,
                         epochs: int = 10, lr: float = 1e-3, batch_size: int = 20, seed: int = 0) -> np.ndarray:
    """B (rank, d) minimising mean over sentences of sum_ij |d_B(i, j) - d(i, j)| / n^2, with
    d_B(i, j) = ||B (h_i - h_j)||^2; B starts uniform in [-0.05, 0.05] as in the authors' code. Deterministic per
    seed. vectors[s] is (n_s, d) for sentence s, distances[s] its (n_s, n_s) gold tree distances."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    b = torch.nn.Parameter(torch.empty(rank, vectors[0].shape[1]).uniform_(-0.05, 0.05, generator=gen))
    opt = torch.optim.Adam([b], lr=lr)
    order = [i for i in range(len(vectors)) if len(vectors[i]) > 1]
    for _ in range(epochs):
        for batch in torch.randperm(len(order), generator=gen).split(batch_size):
            h, gold, mask, lengths = _pad([vectors[order[i]] for i in batch], [distances[order[i]] for i in batch])
            opt.zero_grad()
            loss = ((_squared_distances(h @ b.T) - gold).abs() * mask).sum((1, 2)) / lengths ** 2
            loss.mean().backward()
            opt.step()
    return b.detach().numpy().astype(np.float64)


def _pad(vectors, distances):
    import torch

    n = max(len(v) for v in vectors)
    h = torch.zeros(len(vectors), n, vectors[0].shape[1])
    gold, mask = torch.zeros(len(vectors), n, n), torch.zeros(len(vectors), n, n)
    for s, (v, d) in enumerate(zip(vectors, distances)):
        k = len(v)
        h[s, :k] = torch.as_tensor(np.asarray(v), dtype=torch.float32)
        gold[s, :k, :k] = torch.as_tensor(np.asarray(d), dtype=torch.float32)
        mask[s, :k, :k] = 1
    return h, gold, mask, torch.tensor([float(len(v)) for v in vectors])


def _squared_distances(t):
    diff = t.unsqueeze(-2) - t.unsqueeze(-3)
    return (diff ** 2).sum(-1)


def predict_distances(b: np.ndarray, vectors: Sequence[np.ndarray]) -> list[np.ndarray]:
    """||B (h_i - h_j)||^2 for every pair of words of every sentence."""
    out = []
    for v in vectors:
        t = np.asarray(v, dtype=np.float64) @ b.T
        sq = (t ** 2).sum(1)
        out.append(np.maximum(sq[:, None] + sq[None, :] - 2 * t @ t.T, 0.0))
    return out


def mst_edges(distances: np.ndarray, keep: np.ndarray | None = None) -> set[tuple[int, int]]:
    """Undirected edges (i < j, original word positions) of a minimum spanning tree over the kept words."""
    idx = np.arange(len(distances)) if keep is None else np.flatnonzero(keep)
    if len(idx) < 2:
        return set()
    m = np.asarray(distances, dtype=np.float64)[np.ix_(idx, idx)]
    m = (m + m.T) / 2
    # csgraph reads a zero entry as "no edge": shift every weight to >= 1 (a constant shift keeps the same MST,
    # since every spanning tree has the same number of edges)
    m = np.triu(m - m.min() + 1.0, 1)
    tree = minimum_spanning_tree(m).tocoo()
    return {(int(min(idx[i], idx[j])), int(max(idx[i], idx[j]))) for i, j in zip(tree.row, tree.col)}


def uuas(predicted: Sequence[np.ndarray], gold: Sequence[np.ndarray],
         keep: Sequence[np.ndarray] | None = None) -> float:
    """Undirected unlabelled attachment score over a corpus: edges of the predicted distances' minimum spanning
    tree that are gold edges, over all gold edges. Gold edges are the minimum spanning tree of the gold distances
    over the same kept words (with punctuation left out, as Hewitt & Manning do, this is the tree without its
    punctuation arcs, or a shortest reconnection where punctuation was not a leaf)."""
    correct = total = 0
    for s, (p, g) in enumerate(zip(predicted, gold)):
        k = None if keep is None else keep[s]
        gold_edges = mst_edges(g, k)
        correct += len(mst_edges(p, k) & gold_edges)
        total += len(gold_edges)
    return correct / total if total else float("nan")


def distance_spearman(predicted: Sequence[np.ndarray], gold: Sequence[np.ndarray], min_length: int = 5,
                      max_length: int = 50) -> float:
    """Hewitt & Manning's DSpr.: per word, the Spearman correlation between its row of predicted distances and
    its row of gold distances (all words, the word itself included, as in their reporter); averaged over the
    words of all sentences of each length, then over the lengths min_length..max_length present. A constant
    predicted row carries no ranking and counts as 0."""
    by_length = defaultdict(list)
    for p, g in zip(predicted, gold):
        n = len(p)
        if min_length <= n <= max_length:
            rp, rg = rankdata(p, axis=1), rankdata(g, axis=1)
            rp, rg = rp - rp.mean(1, keepdims=True), rg - rg.mean(1, keepdims=True)
            denom = np.sqrt((rp ** 2).sum(1) * (rg ** 2).sum(1))
            rho = np.divide((rp * rg).sum(1), denom, out=np.zeros(n), where=denom > 0)
            by_length[n].extend(rho.tolist())
    if not by_length:
        return float("nan")
    return float(np.mean([np.mean(v) for v in by_length.values()]))


def structural_probe_scores(train_vectors, train_distances, dev_vectors, dev_distances, dev_keep=None,
                            rank: int = 64, seed: int = 0, **kwargs) -> dict[str, float]:
    """Fit on train, score on dev: {'uuas', 'spearman'} for one layer."""
    b = fit_structural_probe(train_vectors, train_distances, rank=rank, seed=seed, **kwargs)
    pred = predict_distances(b, dev_vectors)
    return {"uuas": uuas(pred, dev_distances, dev_keep), "spearman": distance_spearman(pred, dev_distances)}
