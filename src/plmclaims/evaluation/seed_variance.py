"""Each seed's share of a seed grid's variance (P12, Dodge et al. 2020): the runs of one task at every (head seed,
order seed) pair, decomposed two ways, head x order, one run per cell (an additive two-way ANOVA without
replication: the interaction cannot be told from noise, so it is the residual).

Failed runs (constant or NaN predictions, a diverged loss) stay in the decomposition at the score they got (chance,
for constant predictions): which seeds fail is part of each factor's effect. They are counted beside it."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scipy.stats import f as f_dist

from ..training import run_seeds
from . import glue_metrics


def decompose(scores: np.ndarray) -> dict:
    """Shares of the total sum of squares of a complete (heads, orders) grid explained by the head seed, the order
    seed and the rest, and each factor's F-test p-value against the residual (NaN where a factor has one level or
    the residual is zero)."""
    y = np.asarray(scores, dtype=float)
    h, o = y.shape
    grand = y.mean()
    rows, cols = y.mean(axis=1, keepdims=True), y.mean(axis=0, keepdims=True)
    ss = {"head": o * float(((rows - grand) ** 2).sum()), "order": h * float(((cols - grand) ** 2).sum()),
          "residual": float(((y - rows - cols + grand) ** 2).sum())}
    total = float(((y - grand) ** 2).sum())
    out = {k: (v / total if total > 0 else 0.0) for k, v in ss.items()}
    df = {"head": h - 1, "order": o - 1, "residual": (h - 1) * (o - 1)}
    ms_res = ss["residual"] / df["residual"] if df["residual"] else 0.0
    for k in ("head", "order"):
        ok = df[k] > 0 and ms_res > 0
        out[f"{k}_p"] = float(f_dist.sf(ss[k] / df[k] / ms_res, df[k], df["residual"])) if ok else float("nan")
    out["total_ss"] = total
    return out


def task_summary(cells: dict[tuple[int, int], float], failed: set[tuple[int, int]]) -> dict:
    """One task's grid: its scores by (head, order), the spread, the failed share and, for a complete grid of at
    least 2 x 2 finite scores, the decomposition."""
    heads = sorted({h for h, _ in cells})
    orders = sorted({o for _, o in cells})
    vals = np.array(list(cells.values()), dtype=float)
    out = {"heads": heads, "orders": orders, "runs": len(cells), "failed": len(failed),
           "failed_share": len(failed) / len(cells), "mean": float(np.nanmean(vals)), "sd": float(np.nanstd(vals, ddof=1)),
           "spread": float(np.nanmax(vals) - np.nanmin(vals)),
           "grid": [[cells.get((h, o)) for o in orders] for h in heads]}
    complete = len(cells) == len(heads) * len(orders) and np.isfinite(vals).all()
    if complete and len(heads) >= 2 and len(orders) >= 2:
        out["decomposition"] = decompose(np.array(out["grid"], dtype=float))
    else:
        out["decomposition"] = None
        out["why_not"] = "the grid is not complete with finite scores and at least 2 seeds of each kind"
    return out


def grid_summary(runs, results: str, metrics: dict[str, str]) -> dict[str, dict]:
    """Per task, the seed grid of a planned curve measurement (its runs: glue finetune runs, seed = order seed,
    params.head_seed where it differs), read from each run's metrics.json under `results`; `metrics` names each
    task's metric (the claim's protocol: accuracy, matthews, ...). A run that does not record it (a causal LM's
    lm-eval run records accuracy alone) is scored from its predictions, as the verdict scores it."""
    cells: dict[str, dict] = {}
    failed: dict[str, set] = {}
    for run in runs:
        path = Path(run.path(results))
        values = json.loads(path.read_text())["values"]
        task = run.task
        pair = run_seeds(run.params, run.seed)
        scores = values["benchmarks"][task]
        if metrics[task] not in scores:
            with np.load(path.with_name("predictions.npz")) as npz:
                scores = glue_metrics.score(task, npz[f"{task}::gold"], npz[f"{task}::pred"])
        cells.setdefault(task, {})[pair] = scores[metrics[task]]
        if values.get("degenerate"):
            failed.setdefault(task, set()).add(pair)
    return {t: task_summary(c, failed.get(t, set())) for t, c in cells.items()}
