"""Linear centred kernel alignment (Kornblith et al. 2019, arXiv 1905.00414) between two representations of the same
items, and its leave-one-group-out jackknife.

Linear CKA of X (n, p) and Y (n, q), both column-centred, is ||Y'X||_F^2 / (||X'X||_F ||Y'Y||_F): 1 for the same
representation up to a rotation and an isotropic scaling, 0 when every direction of one is uncorrelated with every
direction of the other. No maintained library implements it, so it is this short function, tested against hand-worked
values (tests/test_cka.py).

The jackknife: the verdict engine bootstraps the mean of per-item values, and CKA is no mean over items. With the
rows grouped into items (a sentence's tokens), item i's pseudo-value is n * CKA - (n - 1) * CKA without item i; their
mean is the jackknife estimate of CKA (bias-corrected) and their spread carries its sampling error, so a bootstrap
of their mean, paired across runs on the same items, gives its interval. Leaving an item out needs only the cross-
products and sums without its rows (the totals minus its own), so all n leave-one-out values cost one pass over the
rows plus n small (p x q) matrix norms.
"""
from __future__ import annotations

import numpy as np


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA of two representations of the same n items, rows aligned: x (n, p), y (n, q)."""
    x, y = _rows(x, y)
    x = x - x.mean(0)
    y = y - y.mean(0)
    return _ratio(y.T @ x, x.T @ x, y.T @ y)


def _rows(x, y) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.ndim != 2 or y.ndim != 2 or len(x) != len(y):
        raise ValueError(f"CKA needs two 2-d arrays with the same rows; got shapes {x.shape} and {y.shape}")
    if len(x) < 2:
        raise ValueError("CKA needs at least 2 rows")
    return x, y


def _ratio(cxy: np.ndarray, cxx: np.ndarray, cyy: np.ndarray) -> float:
    den = np.linalg.norm(cxx) * np.linalg.norm(cyy)
    return float(np.linalg.norm(cxy) ** 2 / den) if den > 0 else float("nan")  # a constant representation: undefined


def _centred(sxy, sx, sy, n):
    """Cross-product of centred rows from the raw one: sum (x - mx)(y - my)' = sum x y' - n mx my'."""
    return sxy - np.outer(sx, sy) / n


def jackknife(x: np.ndarray, y: np.ndarray, groups: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Linear CKA on all rows, and per group (item) its leave-one-group-out CKA and jackknife pseudo-value.
    `groups` (n,) labels each row's item; items come out in order of first appearance. Returns (cka, leave_one_out,
    pseudo_values), the last two one per item; pseudo_values.mean() is the jackknife estimate."""
    x, y = _rows(x, y)
    groups = np.asarray(groups)
    _, first, inverse = np.unique(groups, return_index=True, return_inverse=True)
    order = np.argsort(first)  # items in order of first appearance
    n_items = len(first)
    if n_items < 2:
        raise ValueError("the jackknife needs at least 2 items")
    # centre on the overall mean first: CKA is unchanged by shifting all rows, and the raw sums stay well conditioned
    x = x - x.mean(0)
    y = y - y.mean(0)
    sxx, syy, syx = x.T @ x, y.T @ y, y.T @ x
    sx, sy, n = x.sum(0), y.sum(0), len(x)
    full = _ratio(syx, sxx, syy)
    loo = np.empty(n_items)
    for k, g in enumerate(order):
        rows = inverse == g
        xi, yi = x[rows], y[rows]
        m = n - len(xi)
        if m < 2:
            loo[k] = np.nan
            continue
        ax, ay = sx - xi.sum(0), sy - yi.sum(0)
        loo[k] = _ratio(_centred(syx - yi.T @ xi, ay, ax, m), _centred(sxx - xi.T @ xi, ax, ax, m),
                        _centred(syy - yi.T @ yi, ay, ay, m))
    return full, loo, n_items * full - (n_items - 1) * loo
