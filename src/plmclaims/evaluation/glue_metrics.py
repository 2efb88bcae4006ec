"""GLUE metrics computed locally (the `evaluate` metric scripts download code and do not work offline)."""
from __future__ import annotations

import numpy as np

from .. import stats

TASK_METRICS = {"CoLA": ("matthews",), "SST-2": ("accuracy",), "MRPC": ("accuracy", "f1"), "RTE": ("accuracy",),
                "STS-B": ("pearson", "spearman"), "WNLI": ("accuracy",), "QNLI": ("accuracy",)}


def accuracy(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.mean(np.asarray(y) == np.asarray(p)))


def f1(y: np.ndarray, p: np.ndarray, positive: int = 1) -> float:
    y, p = np.asarray(y) == positive, np.asarray(p) == positive
    tp = float(np.sum(y & p))
    denom = 2 * tp + np.sum(~y & p) + np.sum(y & ~p)
    return float(2 * tp / denom) if denom else 0.0


def matthews(y: np.ndarray, p: np.ndarray) -> float:
    y, p = np.asarray(y).astype(bool), np.asarray(p).astype(bool)
    tp, tn = float(np.sum(y & p)), float(np.sum(~y & ~p))
    fp, fn = float(np.sum(~y & p)), float(np.sum(y & ~p))
    denom = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return float((tp * tn - fp * fn) / denom) if denom else 0.0


def score(task: str, labels, predictions, scale: float = 100.0) -> dict[str, float]:
    """Every metric the task reports, x scale; predictions are class ids, or scores for STS-B."""
    y, p = np.asarray(labels, dtype=float), np.asarray(predictions, dtype=float)
    return {m: stats.metric_function(m)(y, p) * scale for m in TASK_METRICS[task]}
