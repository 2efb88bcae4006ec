"""Verdicts: a claim's checks decided on run metrics with a paired bootstrap.

Check outcomes: holds, contradicted (significantly), inconclusive (the interval straddles the
margin), not-judged (shown, but this tier cannot judge it: a semantic-quality check at a tier that
judges mechanics, or a magnitude measured on a substitute asset), not-run, error.

Claim verdicts (DESIGN.md): reproduced, direction-holds, not-reproduced, inconclusive, not-run, error.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import stats
from .plan import ClaimPlan, ScoreRun

log = logging.getLogger("plmclaims")
VERDICTS = ("reproduced", "direction-holds", "not-reproduced", "inconclusive", "not-run", "error")


@dataclass
class Series:
    """Per-seed predictions of one measurement on every benchmark, with bootstrap samples per target."""

    preds: dict[str, list[np.ndarray]]
    point: dict[str, float] = field(default_factory=dict)
    seeds: dict[str, list[float]] = field(default_factory=dict)
    samples: dict[str, np.ndarray] = field(default_factory=dict)
    extra: dict[str, dict] = field(default_factory=dict)
    parameters: list[dict] = field(default_factory=list)  # per fine-tuning run: trainable, total, fraction
    peak_memory_mb: float | None = None

    def trained_params(self) -> float | None:
        """Mean trained parameters over the runs (the task head differs slightly between tasks)."""
        return float(np.mean([p["trainable"] for p in self.parameters])) if self.parameters else None


def _load_run(run: ScoreRun, results: str):
    path = Path(run.path(results))
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
        self.benchmarks = list(proto["benchmarks"])
        # GLUE-style protocols name a metric per task (CoLA Matthews, STS-B Pearson, ...); STS uses one for all
        task_metrics = proto.get("task_metrics", {})
        self.metric_names = {b: task_metrics.get(b, proto["metric"]) for b in self.benchmarks}
        self.metrics = {b: stats.metric_function(n) for b, n in self.metric_names.items()}
        boot = tier["bootstrap"]
        self.confidence = float(boot.get("confidence", 0.95))
        self.gold, self.subsets, self.indices = {}, {}, {}
        self._rng = np.random.default_rng(int(boot.get("seed", 0)))
        self._resamples = int(boot["resamples"])

    def series(self, runs: list[ScoreRun]) -> Series:
        log.info("bootstrap (%d resamples) over %s", self._resamples, ", ".join(sorted({r.instance for r in runs})))
        preds: dict[str, list[np.ndarray]] = {b: [] for b in self.benchmarks}
        extra: dict[str, dict] = {}
        parameters, peaks = [], []
        for run in runs:
            metrics, npz = _load_run(run, self.results)
            if "parameters" in metrics["values"]:
                parameters.append(metrics["values"]["parameters"])
            if metrics["values"].get("peak_memory_mb"):
                peaks.append(metrics["values"]["peak_memory_mb"])
            # a score run covers every benchmark; a task run covers its task (the plan lists runs seed-ordered per task)
            covers = [run.task] if hasattr(run, "task") else self.benchmarks
            for b in covers:
                if f"{b}::pred" not in npz.files:
                    raise ValueError(f"{run.path(self.results)}: predictions.npz has no {b}::pred")
                preds[b].append(npz[f"{b}::pred"])
                if b in self.gold and not np.array_equal(self.gold[b], npz[f"{b}::gold"]):
                    raise ValueError(f"{run.path(self.results)}: {b} gold labels differ from other runs' (dev samples differ?)")
                if b not in self.gold:
                    self.gold[b], self.subsets[b] = npz[f"{b}::gold"], npz[f"{b}::subsets"]
                    self.indices[b] = stats.stratified_indices(self.subsets[b], self._resamples, self._rng)
                extra.setdefault(b, {}).update({k: v for k, v in metrics["values"]["benchmarks"][b].items()
                                                if k.startswith("mteb")})
        counts = {b: len(preds[b]) for b in self.benchmarks}
        if min(counts.values()) == 0 or len(set(counts.values())) > 1:
            raise ValueError(f"runs of {sorted({r.instance for r in runs})} cover the benchmarks unevenly: {counts}")
        s = Series(preds, extra=extra, parameters=parameters, peak_memory_mb=max(peaks) if peaks else None)
        for b in self.benchmarks:
            metric = self.metrics[b]
            s.seeds[b] = [stats.aggregate(p, self.gold[b], self.subsets[b], self.how, metric) * self.scale for p in preds[b]]
            s.point[b] = float(np.mean(s.seeds[b]))
            s.samples[b] = stats.bootstrap_scores(preds[b], self.gold[b], self.subsets[b], self.how, self.indices[b],
                                                  self.scale, metric)
        s.point["avg"] = float(np.mean([s.point[b] for b in self.benchmarks]))
        s.seeds["avg"] = [float(np.mean([s.seeds[b][i] for b in self.benchmarks])) for i in range(len(s.seeds[self.benchmarks[0]]))]
        s.samples["avg"] = np.mean([s.samples[b] for b in self.benchmarks], axis=0)
        return s

    def ci(self, samples: np.ndarray) -> tuple[float, float]:
        return stats.interval(samples, self.confidence)


def _targets(check: dict) -> list[str]:
    on = check.get("target", "avg")
    return [on] if isinstance(on, str) else list(on)


def _decide(samples: np.ndarray, point: float, evidence: Evidence, margin: float = 0.0) -> dict:
    lo, hi = evidence.ci(samples)
    outcome = "holds" if lo > margin else "contradicted" if hi < margin else "inconclusive"
    return {"estimate": point, "ci_low": lo, "ci_high": hi, "outcome": outcome}


def _combine(outcomes: list[str]) -> str:
    if "error" in outcomes:
        return "error"
    if "contradicted" in outcomes:
        return "contradicted"
    if "inconclusive" in outcomes:
        return "inconclusive"
    return "holds"


def describe(check: dict) -> str:
    t = check["type"]
    on = check.get("target", "avg")
    on = on if isinstance(on, str) else ", ".join(on)
    if t in ("greater", "less"):
        m = f" by {check['margin']}" if check.get("margin") else ""
        return f"{check['a']} {'>' if t == 'greater' else '<'} {check['b']}{m} on {on}"
    if t == "ordering":
        return f"{' > '.join(check['order'])} on {on}"
    if t == "approx-equal":
        return f"|{check['a']} - {check['b']}| <= {check['delta']} on {on}"
    if t == "non-inferior":
        return f"{check['a']} >= {check['b']} - {check['delta']} on {on}"
    if t == "ratio" and check.get("quantity") == "trained-params":
        sign = ">=" if check.get("direction") == "at-least" else "<="
        return f"trained parameters of {check['a']} {sign} {check['ratio']:g} x those of {check['b']}"
    if t == "ratio":
        return f"{check['a']} >= {check['ratio']} x {check['b']} on {on}"
    if t == "trend" and check.get("series"):
        minus = f" minus {', '.join(check['minus'])}" if check.get("minus") else ""
        return f"{', '.join(check['series'])}{minus} {check['shape']} with {check['axis']} on {on}"
    if t == "reproduces":
        return f"{check['measurement']} within {check.get('tolerance', 'tolerance')} of reported on {on}"
    return f"{check['measurement']} {check['shape']} over {check['axis']}"


def decide_claim(cplan: ClaimPlan, tier: dict, results: str) -> dict:
    claim = cplan.claim
    ev = Evidence(cplan, tier, results)
    series: dict[str, Series] = {}
    controls: dict[str, Series] = {}
    for name, pm in cplan.measurements.items():
        if pm.status == "ok":
            series[name] = ev.series(pm.runs)
            if pm.controls:
                controls[name] = ev.series(pm.controls)
    lexical = {k: ev.series([run]) for k, run in cplan.lexical.items()}

    checks = [_evaluate_check(i, c, cplan, tier, ev, series, controls) for i, c in enumerate(claim.checks)]
    verdict, note = _claim_verdict(checks, cplan, tier, series, claim.tolerance)
    expected = [e for e in claim.data.get("expected", []) if e["tier"] == tier["name"]]
    return {
        "id": claim.id, "version": claim.data["version"], "seed_point": claim.data["seed_point"], "tier": tier["name"],
        "statement": claim.data["statement"], "source": claim.data["source"], "protocol": claim.protocol,
        "verdict": verdict, "note": note,
        "expected": expected, "matches_expected": all(e["verdict"] == verdict for e in expected) if expected else None,
        "tier_note": claim.data.get("tier_notes", {}).get(tier["name"], ""),
        "measurements": {name: _measurement_summary(pm, series.get(name), controls.get(name), ev) for name, pm in cplan.measurements.items()},
        "controls": {k: _series_summary(s, ev) for k, s in lexical.items()},
        "checks": checks,
        "runs": sorted({r.path(results) for r in cplan.score_runs()}),
    }


def _series_summary(s: Series, ev: Evidence) -> dict:
    out = {}
    for t in ev.benchmarks + ["avg"]:
        lo, hi = ev.ci(s.samples[t])
        out[t] = {"measured": s.point[t], "ci_low": lo, "ci_high": hi, "seeds": s.seeds[t]}
        if t in s.extra and s.extra[t]:
            out[t].update(s.extra[t])
    return out


def _reported_avg(m, benchmarks: list[str]) -> float | None:
    """The reported average, or the mean of the reported per-benchmark values when the source gives only those."""
    if "avg" in m.reported:
        return m.reported["avg"]
    if all(b in m.reported for b in benchmarks):
        return float(np.mean([m.reported[b] for b in benchmarks]))
    return None


def _measurement_summary(pm, s: Series | None, ctrl: Series | None, ev: Evidence) -> dict:
    m = pm.measurement
    out = {"label": m.label, "role": m.role, "method": m.method, "postprocess": m.postprocess, "status": pm.status,
           "reason": pm.reason, "substitute_for": pm.substitute, "role_note": pm.role_note,
           "instances": sorted({r.instance for r in pm.runs}), "reported": _reported_avg(m, ev.benchmarks)}
    if s is None:
        out.update({"measured": None, "ci_low": None, "ci_high": None, "per_benchmark": {}})
        return out
    per = _series_summary(s, ev)
    for b, row in per.items():
        row["reported"] = m.reported.get(b)
    out.update({"measured": per["avg"]["measured"], "ci_low": per["avg"]["ci_low"], "ci_high": per["avg"]["ci_high"],
                "seeds": per["avg"]["seeds"], "per_benchmark": per})
    if ctrl is not None:
        out["random_weights"] = _series_summary(ctrl, ev)["avg"]
    if s.parameters:
        out["trained_params"] = s.trained_params()
        out["total_params"] = float(np.mean([p["total"] for p in s.parameters]))
        out["trained_fraction"] = out["trained_params"] / out["total_params"] if out["total_params"] else None
        out["reported_params"] = m.reported_params
        out["peak_memory_mb"] = s.peak_memory_mb
    return out


def _evaluate_check(i: int, check: dict, cplan: ClaimPlan, tier: dict, ev: Evidence,
                    series: dict[str, Series], controls: dict[str, Series]) -> dict:
    t = check["type"]
    scope = check.get("scope", "semantic")
    row = {"index": i, "type": t, "description": describe(check), "scope": scope, "note": check.get("note", "")}
    names = [check[k] for k in ("measurement", "a", "b") if k in check] + check.get("order", [])
    names += check.get("series", []) + check.get("minus", [])
    missing = [n for n in names if n not in series]
    if t == "trend" and not (check.get("axis") == "scale" and check.get("series")):
        return {**row, "outcome": "not-run", "reason": "layer and step trends arrive with the probing family"}
    if missing:
        reasons = "; ".join(f"{n}: {cplan.measurements[n].reason}" for n in missing)
        return {**row, "outcome": "not-run", "reason": reasons}
    judged = scope in tier["judges"]
    row["judged"] = judged
    if t == "ratio" and check.get("quantity") == "trained-params":
        detail = _params_ratio(check, series)
        if detail["outcome"] == "not-run":
            row["reason"] = detail["reason"]
        return _finish(row, [detail], judged, scope, tier)
    details = []
    for target in _targets(check):
        S = lambda n: series[n].samples[target]  # noqa: E731
        P = lambda n: series[n].point[target]  # noqa: E731
        if t in ("greater", "less"):
            a, b = (check["a"], check["b"]) if t == "greater" else (check["b"], check["a"])
            details.append({"on": target, **_decide(S(a) - S(b), P(a) - P(b), ev, check.get("margin", 0.0))})
        elif t == "ordering":
            parts = [_decide(S(a) - S(b), P(a) - P(b), ev, check.get("margin", 0.0)) for a, b in zip(check["order"], check["order"][1:])]
            details.append({"on": target, "pairs": parts, "outcome": _combine([p["outcome"] for p in parts]),
                            "estimate": min(p["estimate"] for p in parts),
                            "ci_low": min(p["ci_low"] for p in parts), "ci_high": min(p["ci_high"] for p in parts)})
        elif t == "approx-equal":
            d = S(check["a"]) - S(check["b"])
            lo, hi = ev.ci(d)
            delta = check["delta"]
            outcome = "holds" if (-delta <= lo and hi <= delta) else "contradicted" if (lo > delta or hi < -delta) else "inconclusive"
            details.append({"on": target, "estimate": P(check["a"]) - P(check["b"]), "ci_low": lo, "ci_high": hi, "outcome": outcome})
        elif t == "non-inferior":
            # a may trail b by at most delta: holds when the whole interval of a - b lies above -delta
            details.append({"on": target, **_decide(S(check["a"]) - S(check["b"]), P(check["a"]) - P(check["b"]), ev,
                                                    -float(check["delta"]))})
        elif t == "trend":
            details.append({"on": target, **_scale_trend(check, series, target, ev)})
        elif t == "ratio":
            r = check["ratio"]
            details.append({"on": target, **_decide(S(check["a"]) - r * S(check["b"]), P(check["a"]) - r * P(check["b"]), ev)})
        elif t == "reproduces":
            name = check["measurement"]
            reported = cplan.measurements[name].measurement.reported.get(target)
            tol = float(check.get("tolerance", cplan.claim.tolerance))
            lo, hi = ev.ci(S(name))
            if reported is None:
                details.append({"on": target, "outcome": "not-run", "reason": f"no reported value for {target}"})
                continue
            diff = P(name) - reported
            details.append({"on": target, "estimate": P(name), "reported": reported, "difference": diff, "tolerance": tol,
                            "ci_low": lo, "ci_high": hi, "outcome": "holds" if abs(diff) <= tol else "contradicted"})
            if cplan.measurements[name].substitute:
                judged = False
                row["reason"] = f"magnitudes are not judged on a substitute asset ({cplan.measurements[name].substitute})"
    _combine_details(row, details)
    if check.get("control") == "random-weights" and row["outcome"] == "holds":
        row["control"] = _control(check, series, controls, ev)
        if row["control"]["outcome"] != "holds":
            row["outcome"] = "inconclusive"
            row["reason"] = (f"the relation holds, but {row['control']['measurement']} does not beat the same network with random weights "
                             f"({row['control']['estimate']:+.2f} [{row['control']['ci_low']:+.2f}, {row['control']['ci_high']:+.2f}])")
    return _judge(row, judged, scope, tier)


def _combine_details(row: dict, details: list[dict]) -> None:
    """A check's outcome from its per-target details (targets that could not run do not count)."""
    row["details"] = details
    ran = [d["outcome"] for d in details if d["outcome"] != "not-run"]
    row["outcome"] = _combine(ran) if ran else "not-run"


def _finish(row: dict, details: list[dict], judged: bool, scope: str, tier: dict) -> dict:
    _combine_details(row, details)
    return _judge(row, judged, scope, tier)


def _judge(row: dict, judged: bool, scope: str, tier: dict) -> dict:
    """At a tier that does not judge the check's scope, the outcome is shown, not judged."""
    if not judged and row["outcome"] not in ("not-run", "error"):
        row["measured_outcome"] = row["outcome"]
        row["outcome"] = "not-judged"
        row.setdefault("reason", f"a {scope} check; tier {tier['name']} judges {', '.join(tier['judges'])}")
    return row


def _params_ratio(check: dict, series: dict[str, Series]) -> dict:
    """Trained parameters of a over those of b, against the claimed ratio: counts are exact, so no interval."""
    a, b = series[check["a"]].trained_params(), series[check["b"]].trained_params()
    if a is None or b is None or b == 0:
        return {"on": "parameters", "outcome": "not-run", "reason": "the runs record no parameter counts"}
    ratio = a / b
    ok = ratio >= check["ratio"] if check.get("direction") == "at-least" else ratio <= check["ratio"]
    return {"on": "parameters", "estimate": ratio, "ci_low": ratio, "ci_high": ratio, "trained_a": a, "trained_b": b,
            "outcome": "holds" if ok else "contradicted"}


def _scale_trend(check: dict, series: dict[str, Series], target: str, ev: Evidence) -> dict:
    """A trend along a scale ladder (smallest model first), optionally of differences (e.g. prompt minus full tuning).

    Judged on the ends of the ladder: 'rises' holds when largest minus smallest is above 0 with the bootstrap
    interval clear of it and no step between neighbours goes significantly the wrong way; 'falls' mirrors it.
    Each step is reported too."""
    names, minus = check["series"], check.get("minus") or []
    sign = 1.0 if check["shape"] == "rises" else -1.0 if check["shape"] == "falls" else None
    if sign is None:
        return {"outcome": "not-run", "reason": f"scale trends judge 'rises' or 'falls', not {check['shape']!r}"}
    vals = [series[n].samples[target] - (series[minus[i]].samples[target] if minus else 0.0) for i, n in enumerate(names)]
    pts = [series[n].point[target] - (series[minus[i]].point[target] if minus else 0.0) for i, n in enumerate(names)]
    steps = [_decide(sign * (vals[i + 1] - vals[i]), sign * (pts[i + 1] - pts[i]), ev) for i in range(len(vals) - 1)]
    ends = _decide(sign * (vals[-1] - vals[0]), sign * (pts[-1] - pts[0]), ev)
    outcome = ends["outcome"]
    if outcome == "holds" and any(st["outcome"] == "contradicted" for st in steps):
        outcome = "inconclusive"
    return {**ends, "outcome": outcome, "values": pts, "steps": steps}


def _control(check: dict, series: dict[str, Series], controls: dict[str, Series], ev: Evidence) -> dict:
    """Trained minus random weights for the winning side of the relation, on the check's first target."""
    winner = check.get("a") if check["type"] != "less" else check.get("b")
    winner = winner or check.get("order", [None])[0] or check.get("measurement")
    target = _targets(check)[0]
    if winner not in controls:
        return {"measurement": winner, "outcome": "not-run", "estimate": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"),
                "reason": "no random-weights control planned for this measurement"}
    d = series[winner].samples[target] - controls[winner].samples[target]
    return {"measurement": winner, "on": target, **_decide(d, series[winner].point[target] - controls[winner].point[target], ev)}


def _failure(check: dict) -> str:
    """The contradicted part of a check, in numbers."""
    bad = [d for d in check.get("details", []) if d["outcome"] == "contradicted"]
    if check["type"] == "reproduces":
        parts = [f"{d['on']} {d['estimate']:.2f} vs {d['reported']:.2f}" for d in bad]
        return f"{check['description'].split(' within')[0]} off by more than {bad[0]['tolerance']} on {', '.join(parts)}"
    if check["type"] == "ratio" and bad and bad[0]["on"] == "parameters":
        return f"{check['description']} (measured {bad[0]['estimate']:.4g})"
    parts = [f"{d['on']} {d['estimate']:+.2f} [{d['ci_low']:+.2f}, {d['ci_high']:+.2f}]" for d in bad]
    return f"{check['description']} ({', '.join(parts)})"


def _claim_verdict(checks: list[dict], cplan: ClaimPlan, tier: dict, series: dict, tolerance: float) -> tuple[str, str]:
    judged = [c for c in checks if c["outcome"] in ("holds", "contradicted", "inconclusive", "error")]
    if any(c["outcome"] == "error" for c in checks):
        return "error", "a check failed to evaluate"
    if not judged:
        reasons = sorted({c.get("reason", "") for c in checks if c.get("reason")})
        return "not-run", "; ".join(reasons) or "no check can be judged at this tier"
    outcomes = [c["outcome"] for c in judged]
    skipped = [c for c in checks if c not in judged]
    tail = f" {len(skipped)} check(s) shown but not judged at this tier." if skipped else ""
    if "contradicted" in outcomes:
        failed = "; ".join(_failure(c) for c in judged if c["outcome"] == "contradicted")
        return "not-reproduced", f"contradicted: {failed}." + tail
    if "inconclusive" in outcomes:
        reasons = "; ".join(c.get("reason", "the interval straddles the margin") for c in judged if c["outcome"] == "inconclusive")
        return "inconclusive", reasons + "." + tail
    off = []
    for name, s in series.items():
        pm = cplan.measurements[name]
        reported = pm.measurement.reported.get("avg")
        if pm.substitute or reported is None:
            continue
        if abs(s.point["avg"] - reported) > tolerance:
            off.append(f"{name} {s.point['avg']:.2f} vs {reported:.2f}")
    if off:
        return "direction-holds", f"the relations hold, but magnitudes are off by more than {tolerance}: {', '.join(off)}." + tail
    judged_mag = any(not cplan.measurements[n].substitute and cplan.measurements[n].measurement.reported for n in series)
    if not judged_mag:
        return "reproduced", "relations only: magnitudes are not judged on this tier's substitute assets." + tail
    return "reproduced", "relations hold and magnitudes are within tolerance." + tail
