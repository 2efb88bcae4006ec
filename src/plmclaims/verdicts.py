"""Verdicts: a claim's checks decided on run metrics with a paired bootstrap, above the measurements' floors.

Check outcomes: holds, contradicted (significantly), inconclusive (the interval straddles the margin, a credited
side is not above its floor, too few tasks are informative, or a run is degenerate), not-judged (shown, but this
tier cannot judge it), not-run, error.

Floors (see README "Floors"): every measurement on every benchmark has the metric's chance floor (the best score
of a predictor that ignores its input, computed on the resampled gold) and the family controls the claim declares
(`floors:`; by default the random-weights twin of a raw encoder, the claim's lexical controls, and the claim's
zero-shot measurement for the others). A relation is judged only when the sides it credits are above every floor
on the paired bootstrap; a task on which no side of a check is above its floor is left out of that check's average.

Claim verdicts (DESIGN.md): reproduced, direction-holds, not-reproduced, inconclusive, not-run, error.
"""
from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from . import stats
from .errors import UserError
from .plan import ClaimPlan, skipped_tasks

log = logging.getLogger("plmclaims")
VERDICTS = ("reproduced", "direction-holds", "not-reproduced", "inconclusive", "not-run", "error")
CHANCE = "chance"


class EvidenceError(ValueError):
    """Runs that cannot be compared (different documents or labels): the claim's verdict is `error`."""


@dataclass
class Series:
    """Per-seed predictions of one measurement (or floor) on every benchmark, with bootstrap samples per benchmark."""

    name: str
    point: dict[str, float] = field(default_factory=dict)
    seeds: dict[str, list[float]] = field(default_factory=dict)
    samples: dict[str, np.ndarray] = field(default_factory=dict)
    extra: dict[str, dict] = field(default_factory=dict)
    parameters: list[dict] = field(default_factory=list)  # per fine-tuning run: trainable, total, fraction
    peak_memory_mb: float | None = None
    training: list[dict] = field(default_factory=list)  # per trained run (contrastive): its budget and what it reached
    degenerate: dict[str, list[str]] = field(default_factory=dict)  # benchmark -> ["<run>: <reason>"]

    def trained_params(self) -> float | None:
        """Mean trained parameters over the runs (the task head differs slightly between tasks)."""
        return float(np.mean([p["trainable"] for p in self.parameters])) if self.parameters else None

    def on(self, target: str, tasks: list[str]) -> tuple[float, np.ndarray]:
        """(point, bootstrap samples) on one benchmark, or on 'avg' = the mean over `tasks`."""
        if target != "avg":
            return self.point[target], self.samples[target]
        return float(np.mean([self.point[b] for b in tasks])), np.mean([self.samples[b] for b in tasks], axis=0)


@dataclass
class FloorTest:
    """Whether one side is above every one of its floors on one target (avg over `tasks`, or a benchmark)."""

    side: str
    on: str
    above: bool
    value: float
    floor: str = ""  # the floor it fails, or the highest one it beats
    floor_value: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan

    def text(self) -> str:
        rel = "is above" if self.above else "is not above"
        return (f"{self.side} {self.value:.2f} on {self.on} {rel} its {self.floor} floor {self.floor_value:.2f} "
                f"(difference {self.value - self.floor_value:+.2f} [{self.ci_low:+.2f}, {self.ci_high:+.2f}])")


@dataclass
class Detail:
    """A check decided on one target."""

    on: str
    outcome: str
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    reason: str = ""
    tasks: list[str] = field(default_factory=list)  # the informative tasks an average was taken over
    extra: dict = field(default_factory=dict)  # pairs, steps, reported values, parameter counts


@dataclass
class CheckResult:
    index: int
    type: str
    description: str
    scope: str
    note: str = ""
    outcome: str = "not-run"
    measured_outcome: str | None = None  # what the numbers say where the tier does not judge the scope
    judged: bool | None = None
    reason: str = ""
    details: list[Detail] = field(default_factory=list)
    floors: list[FloorTest] = field(default_factory=list)
    uninformative: dict[str, str] = field(default_factory=dict)  # task -> why no side carries signal there
    qualifies: int | None = None  # a trained-parameter ratio: the quality check it counts with

    def as_dict(self) -> dict:
        d = asdict(self)
        for det in d["details"]:
            det.update(det.pop("extra"))
        d["floors"] = [{**asdict(f), "text": f.text()} for f in self.floors]
        return {k: v for k, v in d.items() if v not in (None, "", [], {})} | {"outcome": self.outcome}


def _load_run(run, results: str):
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
        self.skipped = skipped_tasks(cplan.claim, tier)
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
            metrics, npz = _load_run(run, self.results)
            values = metrics["values"]
            if "parameters" in values:
                s.parameters.append(values["parameters"])
            if values.get("peak_memory_mb"):
                peaks.append(values["peak_memory_mb"])
            if "budget" in values and values.get("sentences_seen"):  # a run that trained an encoder itself
                s.training.append(_training_record(run, values))
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
                preds[b].append(pred)
                s.extra.setdefault(b, {}).update({k: v for k, v in values.get("benchmarks", {}).get(b, {}).items()
                                                  if k.startswith("mteb")})
        counts = {b: len(preds[b]) for b in self.benchmarks}
        if min(counts.values()) == 0 or len(set(counts.values())) > 1:
            raise EvidenceError(f"runs of {sorted({r.instance for r in runs})} cover the benchmarks unevenly: {counts}")
        s.peak_memory_mb = max(peaks) if peaks else None
        for b in self.benchmarks:
            if b in s.degenerate:  # never a number: every check touching it is inconclusive
                s.seeds[b], s.point[b] = [math.nan] * len(preds[b]), math.nan
                s.samples[b] = np.full(self._resamples, math.nan)
                continue
            metric = self.metrics[b]
            s.seeds[b] = [stats.aggregate(p, self.gold[b], self.subsets[b], self.how, metric) * self.scale for p in preds[b]]
            s.point[b] = float(np.mean(s.seeds[b]))
            s.samples[b] = stats.bootstrap_scores(preds[b], self.gold[b], self.subsets[b], self.how, self.indices[b],
                                                  self.scale, metric)
        return s

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
        if not s.degenerate:
            return s
        c = self.chance()
        out = Series(s.name, dict(s.point), samples=dict(s.samples))
        for b in s.degenerate:
            out.point[b], out.samples[b] = c.point[b], c.samples[b]
        return out

    def ci(self, samples: np.ndarray) -> tuple[float, float]:
        return stats.interval(samples, self.confidence)


def point_name(measurement: str, x) -> str:
    """The series name of one point of a curve measurement."""
    return f"{measurement}@{x}"


SHOWN_RUNS = 3  # a reason names this many degenerate runs; claims.json lists every one under its measurement


def _few(bad: list[str]) -> str:
    """The first degenerate runs and how many more: a rehearsal's cut can leave dozens degenerate, and a reason
    naming each one's path buried the verdict (75 paths in one row); every one stays in claims.json."""
    more = len(bad) - SHOWN_RUNS
    return "; ".join(bad[:SHOWN_RUNS]) + (f"; and {more} more (listed under each measurement's degenerate in "
                                          "claims.json)" if more > 0 else "")


def _targets(check: dict) -> list[str]:
    on = check.get("target", "avg")
    return [on] if isinstance(on, str) else list(on)


def _decide(samples: np.ndarray, point: float, evidence: Evidence, margin: float = 0.0, on: str = "") -> Detail:
    lo, hi = evidence.ci(samples)
    outcome = "holds" if lo > margin else "contradicted" if hi < margin else "inconclusive"
    return Detail(on, outcome, point, lo, hi)


def _combine(outcomes: list[str]) -> str:
    for o in ("error", "contradicted", "inconclusive"):
        if o in outcomes:
            return o
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
    if t == "trend" and check["shape"] == "ordered-peaks":
        return f"{check['measurement']}: {' peaks below '.join(_targets(check))} (expected {check['axis']})"
    if t == "trend":
        word = {"flat": "within", "spreads": "by more than", "under": "under"}.get(check["shape"], "")
        delta = f" {word} {check['delta']}" if check.get("delta") is not None else ""
        shape = "stays" if check["shape"] == "under" else check["shape"]
        return f"{check['measurement']} {shape}{delta} along {check['axis']} on {on}"
    return f"{check['measurement']} {check['shape']} over {check['axis']}"


def _sides(check: dict) -> list[str]:
    names = [check[k] for k in ("measurement", "a", "b") if k in check] + check.get("order", [])
    return names + check.get("series", []) + check.get("minus", [])


def credited(check: dict) -> list[str]:
    """The sides a relation credits with signal: each must be above its floors for the check to be judged."""
    t = check["type"]
    if t == "greater":
        return [check["a"]]
    if t == "less":
        return [check["b"]]
    if t == "ordering":
        return check["order"][:-1]  # every side that is claimed to beat another
    if t in ("approx-equal", "non-inferior"):
        return [check["a"], check["b"]]  # equality or non-inferiority between two collapsed sides means nothing
    if t == "ratio" and check.get("quantity") != "trained-params":
        return [check["a"]]
    if t == "trend":
        return check.get("series", []) + check.get("minus", [])  # a gap along a ladder means something only where both learn
    return []  # reproduces: a magnitude, not a relation


class Floors:
    """Each measurement's floors: chance plus the controls the claim declares (or the family defaults)."""

    def __init__(self, cplan: ClaimPlan, ev: Evidence, series: dict[str, Series], random: dict[str, Series],
                 lexical: dict[str, Series]):
        self.ev, self.series = ev, series
        claim = cplan.claim
        declared = claim.data.get("floors")
        zero_shot = [n for n, pm in cplan.measurements.items() if pm.measurement.method == "zero-shot"]
        self.of: dict[str, list[Series]] = {}
        for name in series:
            base = name.split("@")[0]
            if declared is not None and base in declared:
                wanted = list(declared[base])
            elif declared is not None:
                wanted = []
            else:
                wanted = (["random-weights"] if name in random else []) + list(lexical)
                wanted += [z for z in zero_shot if z != base]
            floors = [ev.chance()]
            for w in wanted:
                if w == "random-weights" and name in random:
                    floors.append(ev.as_floor(random[name]))
                elif w in lexical:
                    floors.append(ev.as_floor(lexical[w]))
                elif w in series and w != name:
                    floors.append(ev.as_floor(Series(w, series[w].point, samples=series[w].samples,
                                                     degenerate=series[w].degenerate)))
                elif w in cplan.measurements and w != name:
                    continue  # a floor measurement this tier cannot run: the other floors still apply
                else:
                    allowed = ["random-weights"] * (name in random) + list(lexical) + [m for m in cplan.measurements if m != name]
                    raise UserError(f"{claim.path}: field 'floors.{name}': {w!r} is no floor this claim measures for "
                                    f"{name}; allowed values: {', '.join(allowed) or 'none (chance is always a floor)'}")
            self.of[name] = floors

    def test(self, side: str, target: str, tasks: list[str], skip: set[str] = frozenset()) -> FloorTest:
        """The side above every floor on the target? Reports the failing floor with the lowest interval, else the
        highest floor it beats. Floors that are themselves sides of the check (`skip`) are what the relation decides."""
        value, s = self.series[side].on(target, tasks)
        tests = []
        for f in self.of[side]:
            if f.name in skip:
                continue
            fv, fs = f.on(target, tasks)
            lo, hi = self.ev.ci(s - fs)
            tests.append(FloorTest(side, target, lo > 0, value, f.name, fv, lo, hi))
        failing = [t for t in tests if not t.above]
        return min(failing, key=lambda t: t.ci_low) if failing else max(tests, key=lambda t: t.floor_value)


def decide_claim(cplan: ClaimPlan, tier: dict, results: str) -> dict:
    claim = cplan.claim
    ev = Evidence(cplan, tier, results)
    try:
        series, random = ev.load(cplan)
        lexical = {k: ev.series([run], k) for k, run in cplan.lexical.items()}
    except EvidenceError as e:
        return _error_row(cplan, tier, str(e), results)
    floors = Floors(cplan, ev, series, random, lexical)
    checks: list[CheckResult] = [None] * len(claim.checks)  # type: ignore[list-item]
    # parameter ratios last: each counts only together with the quality check it qualifies
    order = sorted(range(len(claim.checks)), key=lambda i: _is_params_ratio(claim.checks[i]))
    for i in order:
        checks[i] = _evaluate_check(i, claim.checks[i], cplan, tier, ev, series, floors, checks)
    verdict, note = _claim_verdict(checks, cplan, series, claim.tolerance)
    return {**_header(cplan, tier, verdict, note),
            "measurements": {n: _measurement_summary(pm, series.get(n), floors, ev, series) for n, pm in cplan.measurements.items()},
            "controls": {k: _series_summary(s, ev) for k, s in lexical.items()},
            "checks": [c.as_dict() for c in checks],
            "runs": sorted({r.path(results) for r in cplan.score_runs()})}


def _header(cplan: ClaimPlan, tier: dict, verdict: str, note: str) -> dict:
    claim = cplan.claim
    expected = [e for e in claim.data.get("expected", []) if e["tier"] == tier["name"]]
    return {"id": claim.id, "version": claim.data["version"], "seed_point": claim.data["seed_point"], "tier": tier["name"],
            "statement": claim.data["statement"], "source": claim.data["source"], "protocol": claim.protocol,
            "verdict": verdict, "note": note, "expected": expected,
            "matches_expected": all(e["verdict"] == verdict for e in expected) if expected else None,
            "tier_note": claim.data.get("tier_notes", {}).get(tier["name"], ""),
            # a rehearsal runs the paper DAG on stand-in weights: the verdict code runs, the verdict means nothing
            "rehearsal": bool(tier.get("rehearsal"))}


def _error_row(cplan: ClaimPlan, tier: dict, note: str, results: str | None = None) -> dict:
    checks = [CheckResult(i, c["type"], describe(c), c.get("scope", "semantic"), c.get("note", ""), "error", reason=note)
              for i, c in enumerate(cplan.claim.checks)]
    return {**_header(cplan, tier, "error", note),
            "measurements": {n: _measurement_summary(pm, None, None, None) for n, pm in cplan.measurements.items()},
            "controls": {}, "checks": [c.as_dict() for c in checks],
            "runs": sorted({r.path(results) for r in cplan.score_runs()}) if results else []}


def _recorded(run, results: str) -> dict | None:
    """The provenance a finished run recorded in its metrics.json (None for a run not on disk)."""
    path = Path(run.path(results))
    return json.loads(path.read_text()).get("provenance", {}) if path.exists() else None


def mark_unverified_data(verdict: dict, cplan: ClaimPlan, results: str, data_root: str | None) -> None:
    """Mark the verdict and each measurement whose runs read data that is not the known release (a user who ran
    with allow_unverified_data): the report flags those rows. Read from each run's recorded data checksums."""
    from .data.verify import is_verified

    def unverified(runs) -> list[str]:
        out = set()
        for run in runs:
            recorded = (_recorded(run, results) or {}).get("data_sha256", {})
            out |= {f for f, sha in recorded.items() if not is_verified(f, sha, data_root)}
        return sorted(out)

    every = set()
    for name, pm in cplan.measurements.items():
        files = unverified(pm.runs + pm.controls)
        if files:
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
    for pm in cplan.measurements.values():
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


def error_verdict(cplan: ClaimPlan, tier: dict, failures: list[tuple[str, str]],
                  elsewhere: list[tuple[str, str]] = ()) -> dict:
    """The verdict row of a claim whose runs failed: (failed rule, log path) for each failure. With no failure of its
    own, the claim was left undone when the workflow stopped at another claim's failure (`elsewhere`)."""
    if failures:
        note = "; ".join(f"rule {rule} failed (log: {path})" for rule, path in failures)
    else:
        shown = "; ".join(f"rule {rule} failed (log: {path})" for rule, path in elsewhere) or "a job failed"
        note = (f"not computed: the workflow stopped at a failure this claim does not depend on ({shown}); rerun, "
                "or run with --keep-going to compute every claim that does not depend on it")
    return _error_row(cplan, tier, note)


def _series_summary(s: Series, ev: Evidence) -> dict:
    out = {}
    for t in ev.benchmarks + ["avg"]:
        point, samples = s.on(t, ev.benchmarks)
        lo, hi = ev.ci(samples) if np.isfinite(samples).any() else (math.nan, math.nan)
        out[t] = {k: (None if isinstance(v, float) and math.isnan(v) else v)
                  for k, v in {"measured": point, "ci_low": lo, "ci_high": hi}.items()}
        out[t]["seeds"] = s.seeds.get(t) if t != "avg" else _avg_seeds(s, ev.benchmarks)
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
        per = _series_summary(series[key], ev)
        rows.append({"x": x, "per_benchmark": per,
                     "floors": {f.name: {t: f.on(t, ev.benchmarks)[0] for t in ev.benchmarks + ["avg"]}
                                for f in floors.of[key]}})
        if series[key].degenerate:  # every degenerate run, which a check's reason only counts past the first few
            rows[-1]["degenerate"] = {b: "; ".join(r) for b, r in series[key].degenerate.items()}
    return rows


def _measurement_summary(pm, s: Series | None, floors: Floors | None, ev: Evidence | None,
                         series: dict[str, Series] | None = None) -> dict:
    m = pm.measurement
    out = {"label": m.label, "role": m.role, "method": m.method, "postprocess": m.postprocess, "status": pm.status,
           "reason": pm.reason, "substitute_for": pm.substitute, "role_note": pm.role_note,
           "instances": sorted({r.instance for r in pm.runs}),
           "reported": _reported_avg(m, ev.benchmarks) if ev else m.reported.get("avg")}
    if s is None and ev is not None and pm.measurement.name in ev.curves:
        out.update({"measured": None, "ci_low": None, "ci_high": None, "per_benchmark": {},
                    "curve": _curve_summary(pm.measurement.name, floors, ev, series)})
        if m.reported_curve:  # shown beside the measured curve, never judged
            out["reported_curve"] = m.reported_curve
        if "seeds" in m.params:  # a seed grid: each factor's share of the variance, the failed runs (Dodge et al.)
            from .evaluation import seed_variance

            out["seed_variance"] = seed_variance.grid_summary(pm.runs, ev.results, ev.metric_names)
        return out
    if s is None:
        out.update({"measured": None, "ci_low": None, "ci_high": None, "per_benchmark": {}})
        return out
    per = _series_summary(s, ev)
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


def _training_record(run, values: dict) -> dict:
    """What the report shows of one trained run: its budget, what it saw, where its checkpoint was chosen, its speed."""
    b = values["budget"]
    return {"instance": run.instance, "seed": getattr(run, "seed", None), "steps": b.get("steps"),
            "batch_size": b.get("batch_size"), "max_length": b.get("max_length"), "lr": b.get("lr"),
            "sentences_seen": values["sentences_seen"], "best_step": values.get("best_step"),
            "best_dev": None if values.get("best_spearman") is None else 100 * values["best_spearman"],
            "steps_per_second": values.get("steps_per_second"), "peak_memory_mb": values.get("peak_memory_mb")}


def _is_params_ratio(check: dict) -> bool:
    return check["type"] == "ratio" and check.get("quantity") == "trained-params"


def _evaluate_check(i: int, check: dict, cplan: ClaimPlan, tier: dict, ev: Evidence, series: dict[str, Series],
                    floors: Floors, done: list[CheckResult | None]) -> CheckResult:
    t = check["type"]
    scope = check.get("scope", "semantic")
    row = CheckResult(i, t, describe(check), scope, check.get("note", ""))
    curve = t == "trend" and check.get("measurement")  # a trend along a layer/step axis reads one curve measurement
    missing = [n for n in ([check["measurement"]] if curve else _sides(check)) if n not in (ev.curves if curve else series)]
    if missing:
        row.reason = "; ".join(f"{n}: {cplan.measurements[n].reason}" for n in missing)
        return row
    row.judged = scope in tier["judges"]
    if curve:
        _curve_trend(row, check, ev, series, floors)
    elif _is_params_ratio(check):
        _params_ratio(row, check, cplan.claim.checks, series, done)
    else:
        _measure(row, check, cplan, ev, series, floors)
    if not row.judged and row.outcome not in ("not-run", "error"):
        row.measured_outcome, row.outcome = row.outcome, "not-judged"
        row.reason = row.reason or f"a {scope} check; tier {tier['name']} judges {', '.join(tier['judges'])}"
    return row


def _measure(row: CheckResult, check: dict, cplan: ClaimPlan, ev: Evidence, series: dict[str, Series],
             floors: Floors) -> None:
    """Decide a relation (or a magnitude) on each target, after the guards that make it meaningful."""
    sides = list(dict.fromkeys(_sides(check)))
    # 1. a degenerate run never enters the bootstrap
    touched = [b for target in _targets(check) for b in (ev.benchmarks if target == "avg" else [target])]
    bad = [f"{n} on {b}: {r}" for n in sides for b in dict.fromkeys(touched) for r in series[n].degenerate.get(b, [])]
    if bad:
        row.outcome, row.reason = "inconclusive", f"{len(bad)} degenerate run(s), left out of the bootstrap: " + _few(bad)
        return
    wanted = credited(check)
    if check.get("control") == "random-weights":
        lacking = [n for n in wanted if not any(f.name == "random-weights" for f in floors.of[n])]
        if lacking:
            row.reason = f"no random-weights control planned for {', '.join(lacking)}"
            return
    details = []
    for target in _targets(check):
        tasks = ev.benchmarks
        if target in ev.skipped:
            details.append(Detail(target, "not-run", reason=f"{target} is not run at tier {ev.tier['name']}: {ev.skipped[target]}"))
            continue
        if target == "avg" and wanted:
            # 2. tasks on which no side carries signal are left out of the average (and those the tier skips)
            row.uninformative.update({b: f"not run at tier {ev.tier['name']}: {why}" for b, why in ev.skipped.items()})
            for b in ev.benchmarks:
                tests = [floors.test(n, b, [b], set(sides)) for n in sides]
                if not any(ft.above for ft in tests):
                    row.uninformative[b] = "no side above its floor: " + "; ".join(
                        f"{ft.side} {ft.value:.2f} vs {ft.floor} {ft.floor_value:.2f}" for ft in tests)
            tasks = [b for b in ev.benchmarks if b not in row.uninformative]
            need = math.ceil(float(cplan.claim.data.get("min_informative", 0.5)) * len(ev.all_benchmarks))
            if len(tasks) < need:
                details.append(Detail(target, "inconclusive", reason=(
                    f"only {len(tasks)} of {len(ev.all_benchmarks)} tasks are informative at this budget (at least {need} "
                    f"needed); uninformative: {', '.join(row.uninformative)}"), tasks=tasks))
                continue
        # 3. the sides the relation credits must be above their floors on the (recomputed) target
        tests = [floors.test(n, target, tasks, set(sides)) for n in wanted]
        row.floors += tests
        below = [ft for ft in tests if not ft.above]
        if below:
            details.append(Detail(target, "inconclusive", reason="; ".join(ft.text() for ft in below), tasks=tasks))
            continue
        d = _relation(check, cplan, ev, series, target, tasks, row)
        d.tasks = tasks if target == "avg" and row.uninformative else []
        details.append(d)
    row.details = details
    ran = [d.outcome for d in details if d.outcome != "not-run"]
    row.outcome = _combine(ran) if ran else "not-run"
    reasons = [d.reason for d in details if d.reason and d.outcome == row.outcome]
    if row.uninformative and row.outcome != "inconclusive":
        # each task left out with its own reason: a task the tier does not run is not one without signal
        skipped = [b for b in row.uninformative if b in ev.skipped]
        weak = [b for b in row.uninformative if b not in ev.skipped]
        left = ([f"not run at tier {ev.tier['name']}: {', '.join(skipped)}"] if skipped else []) + \
               ([f"uninformative (no side above its floor): {', '.join(weak)}"] if weak else [])
        reasons.append(f"judged on {', '.join(details[0].tasks or ev.benchmarks)}; {'; '.join(left)}")
    row.reason = row.reason or "; ".join(dict.fromkeys(reasons))


def _relation(check: dict, cplan: ClaimPlan, ev: Evidence, series: dict[str, Series], target: str, tasks: list[str],
              row: CheckResult) -> Detail:
    t = check["type"]
    S = lambda n: series[n].on(target, tasks)[1]  # noqa: E731
    P = lambda n: series[n].on(target, tasks)[0]  # noqa: E731
    if t in ("greater", "less"):
        a, b = (check["a"], check["b"]) if t == "greater" else (check["b"], check["a"])
        return _decide(S(a) - S(b), P(a) - P(b), ev, check.get("margin", 0.0), target)
    if t == "ordering":
        pairs = [_decide(S(a) - S(b), P(a) - P(b), ev, check.get("margin", 0.0), f"{a} > {b}")
                 for a, b in zip(check["order"], check["order"][1:])]
        weakest = min(pairs, key=lambda p: p.ci_low)  # the link the ordering stands or falls with
        return Detail(target, _combine([p.outcome for p in pairs]), weakest.estimate, weakest.ci_low, weakest.ci_high,
                      extra={"weakest": weakest.on, "pairs": [asdict(p) for p in pairs]})
    if t == "approx-equal":
        lo, hi = ev.ci(S(check["a"]) - S(check["b"]))
        delta = check["delta"]
        outcome = "holds" if (-delta <= lo and hi <= delta) else "contradicted" if (lo > delta or hi < -delta) else "inconclusive"
        return Detail(target, outcome, P(check["a"]) - P(check["b"]), lo, hi)
    if t == "non-inferior":
        # a may trail b by at most delta: holds when the whole interval of a - b lies above -delta
        return _decide(S(check["a"]) - S(check["b"]), P(check["a"]) - P(check["b"]), ev, -float(check["delta"]), target)
    if t == "trend":
        return _scale_trend(check, S, P, ev, target)
    if t == "ratio":
        r = check["ratio"]
        return _decide(S(check["a"]) - r * S(check["b"]), P(check["a"]) - r * P(check["b"]), ev, 0.0, target)
    # reproduces: a magnitude against the published value
    name = check["measurement"]
    reported = cplan.measurements[name].measurement.reported.get(target)
    if reported is None:
        return Detail(target, "not-run", reason=f"no reported value for {target}")
    tol = float(check.get("tolerance", cplan.claim.tolerance))
    lo, hi = ev.ci(S(name))
    diff = P(name) - reported
    if cplan.measurements[name].substitute:
        row.judged = False
        row.reason = f"magnitudes are not judged on a substitute asset ({cplan.measurements[name].substitute})"
    return Detail(target, "holds" if abs(diff) <= tol else "contradicted", P(name), lo, hi,
                  extra={"reported": reported, "difference": diff, "tolerance": tol})


def _params_ratio(row: CheckResult, check: dict, checks: list[dict], series: dict[str, Series],
                  done: list[CheckResult | None]) -> None:
    """Trained parameters of a over those of b, against the claimed ratio: counts are exact, so no interval. It counts
    only together with the quality check it qualifies: a method that trains few parameters and learns nothing
    reproduces nothing."""
    a, b = series[check["a"]].trained_params(), series[check["b"]].trained_params()
    if a is None or b is None or b == 0:
        row.reason = "the runs record no parameter counts"
        row.details = [Detail("parameters", "not-run")]
        return
    ratio = a / b
    ok = ratio >= check["ratio"] if check.get("direction") == "at-least" else ratio <= check["ratio"]
    row.details = [Detail("parameters", "holds" if ok else "contradicted", ratio, ratio, ratio,
                          extra={"trained_a": a, "trained_b": b})]
    if not ok:
        row.outcome = "contradicted"
        return
    qi = check.get("qualifies", _quality_index(check, checks))
    row.qualifies = qi
    quality = done[qi] if qi is not None else None
    if quality is None:
        row.outcome, row.reason = "inconclusive", (f"the ratio holds ({ratio:.4g}), but no quality check compares "
                                                   f"{check['a']} with {check['b']}: a parameter ratio alone reproduces nothing")
    elif quality.outcome != "holds":
        row.outcome, row.reason = "inconclusive", (
            f"the ratio holds ({ratio:.4g}), but it counts only with check {qi} ({quality.description}), which is "
            f"{quality.outcome}: a parameter ratio alone reproduces nothing")
    else:
        row.outcome = "holds"


def _quality_index(check: dict, checks: list[dict]) -> int | None:
    """The first quality check (not a parameter ratio) that compares the ratio's two measurements."""
    want = {check["a"], check["b"]}
    return next((j for j, c in enumerate(checks) if not _is_params_ratio(c) and want <= set(_sides(c))), None)


def _scale_trend(check: dict, S, P, ev: Evidence, target: str) -> Detail:
    """A trend along a scale ladder (smallest model first), optionally of differences (e.g. prompt minus full tuning),
    judged like a monotone curve (see _monotone)."""
    names, minus = check["series"], check.get("minus") or []
    if check["shape"] not in ("rises", "falls"):
        return Detail(target, "not-run", reason=f"scale trends judge 'rises' or 'falls', not {check['shape']!r}")
    vals = np.array([S(n) - (S(minus[i]) if minus else 0.0) for i, n in enumerate(names)])
    pts = np.array([P(n) - (P(minus[i]) if minus else 0.0) for i, n in enumerate(names)])
    return _monotone(vals, pts, 1.0 if check["shape"] == "rises" else -1.0, ev, target)


def _monotone(vals: np.ndarray, pts: np.ndarray, sign: float, ev: Evidence, target: str) -> Detail:
    """'rises' (sign +1) holds when last minus first is above 0 with the bootstrap interval clear of it and no step
    between neighbours goes significantly the wrong way; 'falls' (sign -1) mirrors it. Each step is reported too.
    vals: (points, resamples) bootstrap samples; pts: the point estimates."""
    steps = [_decide(sign * (vals[i + 1] - vals[i]), sign * (pts[i + 1] - pts[i]), ev) for i in range(len(vals) - 1)]
    ends = _decide(sign * (vals[-1] - vals[0]), sign * (pts[-1] - pts[0]), ev, on=target)
    if ends.outcome == "holds" and any(st.outcome == "contradicted" for st in steps):
        ends.outcome, ends.reason = "inconclusive", "the ends hold, but a step between neighbours goes the other way"
    ends.extra = {"values": [float(p) for p in pts], "steps": [asdict(st) for st in steps]}
    return ends


# where a peak may lie, as a share of the axis from its first point (0) to its last (1)
THIRDS = {"peaks-early": (0.0, 1 / 3), "peaks-middle": (1 / 3, 2 / 3), "peaks-late": (2 / 3, 1.0)}


def _peak_in(vals: np.ndarray, pts: np.ndarray, inside: np.ndarray, ev: Evidence, target: str) -> Detail:
    """The curve's best point inside the window beats its best point outside it (paired bootstrap of the two maxima):
    holds when the interval is above 0, contradicted when below."""
    return _decide(vals[inside].max(0) - vals[~inside].max(0), float(pts[inside].max() - pts[~inside].max()), ev, on=target)


def expected_position(vals: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """Tenney et al.'s expected layer E_Delta = sum_l x_l * Delta_l / sum_l Delta_l, with Delta_l the gain of the best
    score up to point l over the best up to point l-1 (their cumulative scoring, read from per-point probes by
    the running maximum). vals: (points,) or (points, resamples); NaN where the curve never gains."""
    best = np.maximum.accumulate(vals, axis=0)
    gains = np.diff(best, axis=0)
    total = gains.sum(axis=0)
    weighted = (xs[1:].reshape((-1,) + (1,) * (vals.ndim - 1)) * gains).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, weighted / np.where(total > 0, total, 1.0), np.nan)


def curve_shape(shape: str, xs: np.ndarray, vals: np.ndarray, pts: np.ndarray, ev: Evidence, target: str,
                delta: float | None = None) -> Detail:
    """One curve (points along xs, bootstrap samples `vals` of shape (points, resamples), point estimates `pts`)
    against a shape: rises, falls, peaks (an inner point beats both ends), peaks-early/-middle/-late (the best point in
    that third of the axis beats the best outside it), flat (no two points differ by more than delta), spreads (some
    two do: e.g. runs that differ only in their seeds) or under (every point below the bound delta). Spreads are of the bootstrap's max - min, which noise inflates:
    conservative for flat, generous for spreads, so a spread claim should set delta at the difference it must exceed."""
    if shape in ("rises", "falls"):
        return _monotone(vals, pts, 1.0 if shape == "rises" else -1.0, ev, target)
    if len(xs) < 3:
        return Detail(target, "not-run", reason=f"a {shape} curve needs at least 3 points, this one has {len(xs)}")
    at = (xs - xs[0]) / (xs[-1] - xs[0])
    if shape == "peaks":
        inside = np.zeros(len(xs), bool)
        inside[1:-1] = True
        d = _peak_in(vals, pts, inside, ev, target)
    elif shape in THIRDS:
        lo, hi = THIRDS[shape]
        inside = (at >= lo - 1e-9) & (at <= hi + 1e-9)
        if inside.all() or not inside.any():
            return Detail(target, "not-run", reason=f"the curve has no point outside (or inside) its {shape[6:]} third")
        d = _peak_in(vals, pts, inside, ev, target)
    elif shape in ("flat", "spreads"):  # duals: no two points differ by more than delta / some two do
        lo_, hi_ = ev.ci(vals.max(0) - vals.min(0))
        flat, spread = hi_ <= delta, lo_ > delta
        outcome = ("holds" if flat else "contradicted" if spread else "inconclusive") if shape == "flat" else \
            ("holds" if spread else "contradicted" if flat else "inconclusive")
        d = Detail(target, outcome, float(pts.max() - pts.min()), lo_, hi_, extra={"delta": delta})
    elif shape == "under":  # every point below the bound: the bootstrap's max over the points, biased up (conservative)
        lo_, hi_ = ev.ci(vals.max(0))
        outcome = "holds" if hi_ < delta else "contradicted" if lo_ > delta else "inconclusive"
        d = Detail(target, outcome, float(pts.max()), lo_, hi_, extra={"bound": delta})
    else:
        return Detail(target, "not-run", reason=f"shape {shape!r} is judged across targets (ordered-peaks), not on one")
    d.extra = {**d.extra, "x": [float(x) for x in xs], "values": [float(p) for p in pts],
               "best_x": float(xs[int(np.argmax(pts))])}
    return d


def ordered_peaks(xs: np.ndarray, curves: dict[str, tuple[np.ndarray, np.ndarray]], ev: Evidence) -> Detail:
    """The targets' expected positions (expected_position) come in the order listed: each pair of neighbours is a
    paired bootstrap of the difference, and the ordering stands or falls with its weakest link."""
    names = list(curves)
    where = {t: (expected_position(v, xs), float(expected_position(p, xs))) for t, (v, p) in curves.items()}
    flat = [t for t, (_, point) in where.items() if math.isnan(point)]
    if flat:
        return Detail(" < ".join(names), "inconclusive", reason=f"{', '.join(flat)} never gains past its first point: "
                      "no expected position")
    pairs = []
    for a, b in zip(names, names[1:]):
        diff = where[b][0] - where[a][0]
        if np.isnan(diff).mean() > 1 - ev.confidence:  # too many resamples without a gain to place the peak
            pairs.append(Detail(f"{a} < {b}", "inconclusive", where[b][1] - where[a][1],
                                reason="too many resamples in which a curve never gains"))
            continue
        pairs.append(_decide(np.nan_to_num(diff, nan=0.0), where[b][1] - where[a][1], ev, on=f"{a} < {b}"))
    weakest = min(pairs, key=lambda p: -math.inf if p.ci_low is None else p.ci_low)
    return Detail(" < ".join(names), _combine([p.outcome for p in pairs]), weakest.estimate, weakest.ci_low,
                  weakest.ci_high, reason=weakest.reason,
                  extra={"expected": {t: where[t][1] for t in names}, "weakest": weakest.on,
                         "pairs": [asdict(p) for p in pairs], "x": [float(x) for x in xs]})


def _curve_trend(row: CheckResult, check: dict, ev: Evidence, series: dict[str, Series], floors: Floors) -> None:
    """A trend along one curve measurement's axis (layers, steps), on each target, or across targets (ordered-peaks).
    Guards as for relations: no degenerate point, and each curve's best point above its floors (chance, and the
    same point of the random-weights network where the claim asks for that control)."""
    name = check["measurement"]
    points = ev.curves[name]
    xs = np.array([float(x) for x, _ in points])
    keys = [k for _, k in points]
    if check.get("control") == "random-weights":
        lacking = [k for k in keys if not any(f.name == "random-weights" for f in floors.of[k])]
        if lacking:
            row.reason = f"no random-weights control planned for {', '.join(lacking)}"
            return
    details, curves = [], {}
    for target in _targets(check):
        if target in ev.skipped:
            details.append(Detail(target, "not-run", reason=f"{target} is not run at tier {ev.tier['name']}: {ev.skipped[target]}"))
            continue
        tasks = ev.benchmarks if target == "avg" else [target]
        bad = [f"{k} on {b}: {r}" for k in keys for b in tasks for r in series[k].degenerate.get(b, [])]
        failed = [k for k in keys if any(series[k].degenerate.get(b) for b in tasks)]
        # a spread over seeds counts failed (degenerate) runs as the phenomenon, not as noise: they are left out of
        # the spread and reported as the failed share; any other shape needs every point
        used = [k for k in keys if k not in failed] if check["shape"] == "spreads" else keys
        if (bad and check["shape"] != "spreads") or len(used) < 2:
            # a tier that plans fewer than two points (CI's rehearsal cuts the layers) has no shape to judge either
            short = f"{len(used)} usable point(s) on the curve, a shape needs 2 or more"
            details.append(Detail(target, "inconclusive", reason="; ".join(
                ([f"{len(bad)} degenerate run(s): {_few(bad)}"] if bad else []) + ([short] if len(used) < 2 else []))))
            continue
        at = np.array([xs[keys.index(k)] for k in used])
        pts = np.array([series[k].on(target, tasks)[0] for k in used])
        vals = np.stack([series[k].on(target, tasks)[1] for k in used])
        best = used[int(np.argmax(pts))]
        # a curve that never clears its floors has no shape to judge; a bound from above ('under') credits no side
        ft = floors.test(best, target, tasks) if check["shape"] != "under" else None
        if ft is not None:
            row.floors.append(ft)
        if ft is not None and not ft.above:
            details.append(Detail(target, "inconclusive", reason=f"the curve's best point: {ft.text()}"))
            continue
        if check["shape"] == "ordered-peaks":
            curves[target] = (vals, pts)
        else:
            d = curve_shape(check["shape"], at, vals, pts, ev, target, check.get("delta"))
            if check["shape"] == "spreads":
                d.extra["failed"] = {"runs": len(failed), "of": len(keys), "share": len(failed) / len(keys)}
            details.append(d)
    if check["shape"] == "ordered-peaks" and len(curves) == len(_targets(check)):
        details.append(ordered_peaks(xs, curves, ev))
    row.details = details
    ran = [d.outcome for d in details if d.outcome != "not-run"]
    row.outcome = _combine(ran) if ran else "not-run"
    row.reason = "; ".join(dict.fromkeys(d.reason for d in details if d.reason and d.outcome == row.outcome))


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


def _claim_verdict(results: list[CheckResult], cplan: ClaimPlan, series: dict, tolerance: float) -> tuple[str, str]:
    checks = [c.as_dict() for c in results]
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
        reasons = "; ".join(f"{c['description']}: {c.get('reason') or 'the interval straddles the margin'}"
                            for c in judged if c["outcome"] == "inconclusive")
        return "inconclusive", reasons + "." + tail
    dropped = [f"{c['description']}: {c['reason']}" for c in judged if c.get("uninformative")]
    tail = (" " + "; ".join(dropped) + "." if dropped else "") + tail
    off = []
    for name, s in series.items():
        pm = cplan.measurements.get(name)  # a curve's points carry no reported value
        if pm is None:
            continue
        reported = pm.measurement.reported.get("avg")
        if pm.substitute or reported is None:
            continue
        avg = s.on("avg", list(s.point))[0]
        if abs(avg - reported) > tolerance:
            off.append(f"{name} {avg:.2f} vs {reported:.2f}")
    if off:
        return "direction-holds", f"the relations hold, but magnitudes are off by more than {tolerance}: {', '.join(off)}." + tail
    judged_mag = any(not cplan.measurements[n].substitute and cplan.measurements[n].measurement.reported
                     for n in series if n in cplan.measurements)
    if not judged_mag:
        return "reproduced", "relations only: magnitudes are not judged on this tier's substitute assets." + tail
    return "reproduced", "relations hold and magnitudes are within tolerance." + tail
