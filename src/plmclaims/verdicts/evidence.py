"""Evidence: every run a claim needs, loaded and bootstrapped on shared resamples, so that differences are paired."""
from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np

from .. import stats
from ..errors import UserError
from ..plan import ClaimPlan, skipped_tasks
from .records import CHANCE, Detail, EvidenceError, Series, point_name

log = logging.getLogger("plmclaims")
MIN_USABLE_RUNS = 2  # a side that lost runs to degeneracy is judged on the rest only when this many remain


def load_run(run, results: str):
    path = Path(run.path(results))
    if not path.exists():  # the verdict re-plans from the files: a tier or claim edited while the workflow ran
        raise UserError(f"{path}: run not found; the tier or claim files changed after the workflow planned this "
                        "verdict (the run's key follows its settings). Run snakemake again to compute it")
    metrics = json.loads(path.read_text())
    npz = np.load(path.with_name("predictions.npz"))
    return metrics, npz


class Evidence:
    """Loads every run a claim needs and bootstraps them on shared resamples (so differences are paired)."""

    def __init__(self, cplan: ClaimPlan, tier: dict, results: str):
        self.cplan, self.tier, self.results = cplan, tier, results
        proto = cplan.claim.protocol
        self.how = proto.get("aggregation", "all")
        self.scale = float(proto.get("scale", 100))
        # tasks the tier does not run (nothing beats chance at its budget) are uninformative, never measured
        # a claim on a model another family trains (a causal LM's fine-tuning under a GLUE claim) skips that
        # family's tasks: the role its measurements share says which
        roles = {m.role for m in cplan.claim.measurements.values()}
        self.skipped = skipped_tasks(cplan.claim, tier, roles.pop() if len(roles) == 1 else None)
        self.all_benchmarks = list(proto["benchmarks"])
        self.benchmarks = [b for b in proto["benchmarks"] if b not in self.skipped]
        # GLUE-style protocols name a metric per task (CoLA Matthews, STS-B Pearson, ...); STS uses one for all
        task_metrics = proto.get("task_metrics", {})
        self.metric_names = {b: task_metrics.get(b, proto["metric"]) for b in self.benchmarks}
        self.metrics = {b: stats.metric_function(n) for b, n in self.metric_names.items()}
        boot = tier["bootstrap"]
        self.confidence = float(boot.get("confidence", 0.95))
        self.gold, self.subsets, self.index, self.indices, self.first = {}, {}, {}, {}, {}
        self._rng = np.random.default_rng(int(boot.get("seed", 0)))
        self._resamples = int(boot["resamples"])
        self._chance: Series | None = None
        self._seed_weights: dict[int, np.ndarray | None] = {}
        self.curves: dict[str, list[tuple[float, str]]] = {}  # curve measurement -> (x, point series name), in order

    def _pair(self, b: str, npz, where: str) -> None:
        """Every run on a benchmark must score the same documents with the same labels, or nothing is paired."""
        gold = npz[f"{b}::gold"]
        index = npz[f"{b}::index"] if f"{b}::index" in npz.files else None
        if b not in self.gold:
            self.gold[b], self.subsets[b], self.index[b], self.first[b] = gold, npz[f"{b}::subsets"], index, where
            # items that share a group (a probe's words of one sentence) are resampled together
            groups = npz[f"{b}::groups"] if f"{b}::groups" in npz.files else None
            self.indices[b] = (stats.stratified_indices(self.subsets[b], self._resamples, self._rng) if groups is None
                               else stats.grouped_indices(self.subsets[b], groups, self._resamples, self._rng))
            return
        if not np.array_equal(self.gold[b], gold):
            raise EvidenceError(f"{where}: {b} gold labels differ from those of {self.first[b]}; runs on different "
                                "dev samples cannot be paired (rerun both with the same budget)")
        if index is not None and self.index[b] is not None and not np.array_equal(self.index[b], index):
            raise EvidenceError(f"{where}: {b} scores other documents than {self.first[b]} (its {b}::index differs, "
                                "though the gold labels agree); runs on different samples cannot be paired")
        if self.index[b] is None:
            self.index[b] = index

    def series(self, runs: list, name: str) -> Series:
        log.info("bootstrap (%d resamples) over %s", self._resamples, ", ".join(sorted({r.instance for r in runs})))
        preds: dict[str, list[np.ndarray]] = {b: [] for b in self.benchmarks}
        s = Series(name)
        peaks = []
        for run in runs:
            where = run.path(self.results)
            metrics, npz = load_run(run, self.results)
            values = metrics["values"]
            if "parameters" in values:
                s.parameters.append(values["parameters"])
            if values.get("peak_memory_mb"):
                peaks.append(values["peak_memory_mb"])
            if "budget" in values and values.get("sentences_seen"):  # a run that trained an encoder itself
                s.training.append(training_record(run, values))
            # a score run covers every benchmark; a task run covers its task (the plan lists runs seed-ordered per task)
            covers = [run.task] if hasattr(run, "task") else self.benchmarks
            for b in covers:
                if f"{b}::pred" not in npz.files:
                    raise EvidenceError(f"{where}: predictions.npz has no {b}::pred")
                self._pair(b, npz, where)
                pred = npz[f"{b}::pred"]
                # marked by the writer (NaN loss, diverged training), or visible in the predictions of an older run
                why = values.get("degenerate") or stats.degenerate(pred)
                if why:
                    s.degenerate.setdefault(b, []).append(f"{where}: {why}")
                preds[b].append(None if why else pred)
                s.extra.setdefault(b, {}).update({k: v for k, v in values.get("benchmarks", {}).get(b, {}).items()
                                                  if k.startswith("mteb")})
        counts = {b: len(preds[b]) for b in self.benchmarks}
        if min(counts.values()) == 0 or len(set(counts.values())) > 1:
            raise EvidenceError(f"runs of {sorted({r.instance for r in runs})} cover the benchmarks unevenly: {counts}")
        s.peak_memory_mb = max(peaks) if peaks else None
        for b in self.benchmarks:
            usable = [p for p in preds[b] if p is not None]
            failed = len(preds[b]) - len(usable)
            # a degenerate run is a finding, not a veto: it is counted and shown, left out of the side's mean, and the
            # side stands on the rest when enough remain (Dodge et al. report failed restarts as part of fine-tuning)
            if failed and len(usable) < MIN_USABLE_RUNS:
                s.unusable[b] = (f"{len(usable)} of {len(preds[b])} run(s) usable, {MIN_USABLE_RUNS} needed; degenerate: "
                                 + "; ".join(s.degenerate[b]))
                s.seeds[b], s.point[b] = [math.nan] * len(preds[b]), math.nan
                s.samples[b] = np.full(self._resamples, math.nan)
                continue
            metric = self.metrics[b]
            s.seeds[b] = [math.nan if p is None else
                          stats.aggregate(p, self.gold[b], self.subsets[b], self.how, metric) * self.scale
                          for p in preds[b]]
            s.point[b] = float(np.nanmean(s.seeds[b]))
            s.samples[b] = stats.bootstrap_scores(usable, self.gold[b], self.subsets[b], self.how, self.indices[b],
                                                  self.scale, metric, self.seed_weights(len(usable)))
        return s

    def seed_weights(self, n_seeds: int) -> np.ndarray | None:
        """The seed draws of every resample for a side with n_seeds usable runs (stats.seed_resample_weights), the
        same for every side and benchmark with that many, so that shared seeds stay paired."""
        if n_seeds not in self._seed_weights:
            rng = np.random.default_rng([int(self.tier["bootstrap"].get("seed", 0)), n_seeds])
            self._seed_weights[n_seeds] = stats.seed_resample_weights(n_seeds, self._resamples, rng)
        return self._seed_weights[n_seeds]

    def load(self, cplan: ClaimPlan) -> tuple[dict[str, Series], dict[str, Series]]:
        """Every measurement's series and its random-weights twin's. A curve's points are series of their own, named
        '<measurement>@<x>', listed in order in self.curves[measurement]."""
        series, random = {}, {}
        for n, pm in cplan.measurements.items():
            if pm.status != "ok":
                continue
            if not pm.points:
                series[n] = self.series(pm.runs, n)
                if pm.controls:
                    random[n] = self.series(pm.controls, "random-weights")
                continue
            self.curves[n] = []
            for x, runs in pm.points.items():
                key = point_name(n, x)
                series[key] = self.series(runs, key)
                self.curves[n].append((x, key))
                if x in pm.control_points:
                    random[key] = self.series(pm.control_points[x], "random-weights")
        return series, random

    def chance(self) -> Series:
        """The metric's chance floor per benchmark, on the same resampled gold as every side."""
        if self._chance is None:
            s = Series(CHANCE)
            for b in self.benchmarks:
                s.point[b] = stats.chance(self.metric_names[b], self.gold[b]) * self.scale
                s.samples[b] = stats.chance_scores(self.metric_names[b], self.gold[b], self.indices[b], self.scale)
            self._chance = s
        return self._chance

    def as_floor(self, s: Series) -> Series:
        """A control used as a floor: where its run is degenerate (constant), the chance floor stands in, since a
        predictor that ignores its input scores at most chance."""
        if not s.unusable:
            return s
        c = self.chance()
        out = Series(s.name, dict(s.point), samples=dict(s.samples))
        for b in s.unusable:
            out.point[b], out.samples[b] = c.point[b], c.samples[b]
        return out

    def ci(self, samples: np.ndarray) -> tuple[float, float]:
        return stats.interval(samples, self.confidence)


def training_record(run, values: dict) -> dict:
    """What the report shows of one trained run: its budget, what it saw, where its checkpoint was chosen, its speed."""
    b = values["budget"]
    return {"instance": run.instance, "seed": getattr(run, "seed", None), "steps": b.get("steps"),
            "batch_size": b.get("batch_size"), "max_length": b.get("max_length"), "lr": b.get("lr"),
            "sentences_seen": values["sentences_seen"], "best_step": values.get("best_step"),
            "best_dev": None if values.get("best_spearman") is None else 100 * values["best_spearman"],
            "steps_per_second": values.get("steps_per_second"), "peak_memory_mb": values.get("peak_memory_mb")}


def decide(samples: np.ndarray, point: float, evidence: "Evidence", margin: float = 0.0, on: str = "") -> Detail:
    """Holds when the interval lies above the margin, contradicted when below it. The samples stay on the detail (not
    in its record) so that the same statistic on the random-weights twin can be set against it (relations.twin)."""
    lo, hi = evidence.ci(samples)
    outcome = "holds" if lo > margin else "contradicted" if hi < margin else "inconclusive"
    d = Detail(on, outcome, point, lo, hi)
    d.samples = samples
    return d
