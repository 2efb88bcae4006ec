"""What a verdict shows of its measurements: each one's score, interval, seeds and floors on every target, curve
points, training records, and the provenance of the runs it read."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..plan import ClaimPlan
from .evidence import Evidence
from .floors import Floors
from .records import Series


def _recorded(run, results: str) -> dict | None:
    """The provenance a finished run recorded in its metrics.json (None for a run not on disk)."""
    path = Path(run.path(results))
    return json.loads(path.read_text()).get("provenance", {}) if path.exists() else None


def mark_unverified_data(verdict: dict, cplan: ClaimPlan, results: str, data_root: str | None) -> None:
    """Mark the verdict and each measurement whose runs read data that is not the known release (a user who ran
    with allow_unverified_data): the report flags those rows. Read from each run's recorded data checksums."""
    from ..data.verify import is_verified

    def unverified(runs) -> list[str]:
        out = set()
        for run in runs:
            recorded = (_recorded(run, results) or {}).get("data_sha256", {})
            out |= {f for f, sha in recorded.items() if not is_verified(f, sha, data_root)}
        return sorted(out)

    every = set()
    for mplan in cplan.every_model():
        shown = verdict["models"][mplan.role] if "models" in verdict else verdict
        for name, pm in mplan.measurements.items():
            files = unverified(pm.runs + pm.controls)
            if files:
                shown["measurements"][name]["unverified_data"] = files
                if mplan.role == verdict.get("headline_model", mplan.role):
                    verdict["measurements"][name]["unverified_data"] = files
                every |= set(files)
    every |= set(unverified(list(cplan.lexical.values())))
    if every:
        verdict["unverified_data"] = sorted(every)


def runs_provenance(cplan: ClaimPlan, results: str) -> dict:
    """What produced the runs a verdict read, from each run's own record: how many runs each commit wrote (a run
    computed once is reused while its key holds, so a verdict reads runs from several commits) and every version of
    the recorded packages. The published report states it; its test checks it against the project's pins."""
    commits: dict[str, int] = {}
    packages: dict[str, set] = {}
    seen = set()
    for pm in (pm for mplan in cplan.every_model() for pm in mplan.measurements.values()):
        for run in pm.runs + pm.controls:
            path = run.path(results)
            prov = None if path in seen else _recorded(run, results)
            seen.add(path)
            if prov is None:
                continue
            commit = prov.get("git_commit", "unknown")
            commits[commit] = commits.get(commit, 0) + 1
            for name, version in (prov.get("packages") or {}).items():
                packages.setdefault(name, set()).add(version)
    return {"commits": dict(sorted(commits.items())),
            "packages": {n: sorted(v for v in vs if v) for n, vs in sorted(packages.items())}}


def series_summary(s: Series, ev: Evidence) -> dict:
    out = {}
    for t in ev.benchmarks + ["avg"]:
        point, samples = s.on(t, ev.benchmarks)
        lo, hi = ev.ci(samples) if np.isfinite(samples).any() else (math.nan, math.nan)
        out[t] = {k: (None if isinstance(v, float) and math.isnan(v) else v)
                  for k, v in {"measured": point, "ci_low": lo, "ci_high": hi}.items()}
        seeds = s.seeds.get(t) if t != "avg" else _avg_seeds(s, ev.benchmarks)
        out[t]["seeds"] = None if seeds is None else [None if math.isnan(x) else x for x in seeds]  # None: degenerate
        if s.extra.get(t):
            out[t].update(s.extra[t])
    return out


def _avg_seeds(s: Series, tasks: list[str]) -> list[float]:
    n = len(s.seeds.get(tasks[0], []))
    return [float(np.mean([s.seeds[b][i] for b in tasks])) for i in range(n)]


def _reported_avg(m, benchmarks: list[str]) -> float | None:
    """The reported average, or the mean of the reported per-benchmark values when the source gives only those."""
    if "avg" in m.reported:
        return m.reported["avg"]
    if all(b in m.reported for b in benchmarks):
        return float(np.mean([m.reported[b] for b in benchmarks]))
    return None


def _curve_summary(name: str, floors: Floors, ev: Evidence, series: dict[str, Series]) -> list[dict]:
    """Each point of a curve: its x, its score and interval on every target, and its floors' scores there."""
    rows = []
    for x, key in ev.curves[name]:
        per = series_summary(series[key], ev)
        rows.append({"x": x, "per_benchmark": per,
                     "floors": {f.name: {t: f.on(t, ev.benchmarks)[0] for t in ev.benchmarks + ["avg"]}
                                for f in floors.of[key]}})
        if series[key].degenerate:  # every degenerate run, which a check's reason only counts past the first few
            rows[-1]["degenerate"] = {b: "; ".join(r) for b, r in series[key].degenerate.items()}
    return rows


def measurement_summary(pm, s: Series | None, floors: Floors | None, ev: Evidence | None,
                         series: dict[str, Series] | None = None) -> dict:
    m = pm.measurement
    out = {"label": m.label, "role": m.role, "method": m.method, "postprocess": m.postprocess, "status": pm.status,
           "reason": pm.reason, "substitute_for": pm.substitute, "role_note": pm.role_note,
           "instances": sorted({r.instance for r in pm.runs}),
           "reported": _reported_avg(m, ev.benchmarks) if ev else m.reported.get("avg")}
    if pm.magnitudes:  # a cut budget (plmclaims.magnitudes): the reported value is shown, not judged
        out["magnitude_not_judged"] = pm.magnitudes
    if s is None and ev is not None and pm.measurement.name in ev.curves:
        out.update({"measured": None, "ci_low": None, "ci_high": None, "per_benchmark": {},
                    "curve": _curve_summary(pm.measurement.name, floors, ev, series)})
        if m.reported_curve:  # shown beside the measured curve, never judged
            out["reported_curve"] = m.reported_curve
        if "seeds" in m.params:  # a seed grid: each factor's share of the variance, the failed runs (Dodge et al.)
            from ..evaluation import seed_variance

            out["seed_variance"] = seed_variance.grid_summary(pm.runs, ev.results, ev.metric_names)
        return out
    if s is None:
        out.update({"measured": None, "ci_low": None, "ci_high": None, "per_benchmark": {}})
        return out
    per = series_summary(s, ev)
    for b, row in per.items():
        row["reported"] = m.reported.get(b)
    out.update({"measured": per["avg"]["measured"], "ci_low": per["avg"]["ci_low"], "ci_high": per["avg"]["ci_high"],
                "seeds": per["avg"]["seeds"], "per_benchmark": per})
    if s.degenerate:
        out["degenerate"] = {b: "; ".join(r) for b, r in s.degenerate.items()}
    # each floor's score on every target, so the report can draw it beside the measurement
    out["floors"] = {f.name: {t: f.on(t, ev.benchmarks)[0] for t in ev.benchmarks + ["avg"]} for f in floors.of[s.name]}
    if "random-weights" in out["floors"]:
        out["random_weights"] = {"measured": out["floors"]["random-weights"]["avg"]}
    if s.training:
        out["training"] = s.training
    if s.parameters:
        out["trained_params"] = s.trained_params()
        out["total_params"] = float(np.mean([p["total"] for p in s.parameters]))
        out["trained_fraction"] = out["trained_params"] / out["total_params"] if out["total_params"] else None
        out["reported_params"] = m.reported_params
        out["peak_memory_mb"] = s.peak_memory_mb
    return out
