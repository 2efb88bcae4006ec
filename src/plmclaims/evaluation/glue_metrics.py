"""GLUE metrics computed locally with sklearn and scipy (the `evaluate` metric scripts download code and do not work
offline). The bootstrap uses the closed forms in stats.py; tests/test_stats_methods.py checks that both agree."""
from __future__ import annotations

import warnings

import numpy as np
from scipy.stats import ConstantInputWarning, pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

TASK_METRICS = {"CoLA": ("matthews",), "SST-2": ("accuracy",), "MRPC": ("accuracy", "f1"), "RTE": ("accuracy",),
                "STS-B": ("pearson", "spearman"), "WNLI": ("accuracy",), "QNLI": ("accuracy",),
                "MNLI": ("accuracy",), "QQP": ("accuracy", "f1")}  # MNLI: matched dev (glue.load_hub); as GLUE reports them


def _correlation(fn):
    def score(y, p) -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConstantInputWarning)
            r = fn(y, p)[0]
        return 0.0 if np.isnan(r) else float(r)  # a constant predictor (a collapsed regression head): 0, as in stats
    return score


METRICS = {"accuracy": accuracy_score, "f1": lambda y, p: f1_score(y, p, zero_division=0.0),
           "matthews": matthews_corrcoef, "pearson": _correlation(pearsonr), "spearman": _correlation(spearmanr)}


def score(task: str, labels, predictions, scale: float = 100.0) -> dict[str, float]:
    """Every metric the task reports, x scale; predictions are class ids, or scores for STS-B."""
    y, p = np.asarray(labels, dtype=float), np.asarray(predictions, dtype=float)
    if not np.isfinite(p).all():  # sklearn rejects NaN; the run is marked degenerate by its writer
        return {m: float("nan") for m in TASK_METRICS[task]}
    return {m: float(METRICS[m](y, p)) * scale for m in TASK_METRICS[task]}
