"""GLUE metrics, computed locally (the `evaluate` metric scripts download code and do not work offline) with the
closed forms in stats.py, the same functions the verdict's bootstrap resamples: numpy only, so a fine-tuning job skips
importing scipy.stats and sklearn (a second together). tests/test_stats_methods.py and
tests/test_finetuning_methods.py check them against sklearn's and scipy's definitions."""
from __future__ import annotations

import numpy as np

from .. import stats

TASK_METRICS = {"CoLA": ("matthews",), "SST-2": ("accuracy",), "MRPC": ("accuracy", "f1"), "RTE": ("accuracy",),
                "STS-B": ("pearson", "spearman"), "WNLI": ("accuracy",), "QNLI": ("accuracy",),
                "MNLI": ("accuracy",), "QQP": ("accuracy", "f1")}  # MNLI: matched dev (glue.load_hub); as GLUE reports them
# Matthews as the Pearson of 0/1 labels is the binary case, which is CoLA's; a constant predictor scores 0 throughout
METRICS = {m: stats.metric_function(m) for names in TASK_METRICS.values() for m in names}


def score(task: str, labels, predictions, scale: float = 100.0) -> dict[str, float]:
    """Every metric the task reports, x scale; predictions are class ids, or scores for STS-B."""
    y, p = np.asarray(labels, dtype=float), np.asarray(predictions, dtype=float)
    if not np.isfinite(p).all():  # no score for NaN predictions; the run is marked degenerate by its writer
        return {m: float("nan") for m in TASK_METRICS[task]}
    return {m: float(METRICS[m](y, p)) * scale for m in TASK_METRICS[task]}
