"""The typed records the verdict engine passes between its modules, and the small vocabulary of checks.

A check's outcome: holds, contradicted (significantly), inconclusive (the interval straddles the margin, a credited
side is not above its floor, too few tasks are informative, or too few runs are usable), shown (measured, but not
credited here: the tier does not judge its scope, or it holds by construction), not-run, error.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np


VERDICTS = ("reproduced", "direction-holds", "not-reproduced", "inconclusive", "shown", "not-run", "error")


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
    degenerate: dict[str, list[str]] = field(default_factory=dict)  # benchmark -> ["<run>: <reason>"], every one
    unusable: dict[str, str] = field(default_factory=dict)  # benchmark -> why the side has no number there

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


def point_name(measurement: str, x) -> str:
    """The series name of one point of a curve measurement."""
    return f"{measurement}@{x}"


SHOWN_RUNS = 3  # a reason names this many degenerate runs; claims.json lists every one under its measurement


def few(bad: list[str]) -> str:
    """The first degenerate runs and how many more: a rehearsal's cut can leave dozens degenerate, and a reason
    naming each one's path buried the verdict (75 paths in one row); every one stays in claims.json."""
    more = len(bad) - SHOWN_RUNS
    return "; ".join(bad[:SHOWN_RUNS]) + (f"; and {more} more (listed under each measurement's degenerate in "
                                          "claims.json)" if more > 0 else "")


def targets(check: dict) -> list[str]:
    on = check.get("target", "avg")
    return [on] if isinstance(on, str) else list(on)


def combine(outcomes: list[str]) -> str:
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
        return f"{check['measurement']}: {' peaks below '.join(targets(check))} (expected {check['axis']})"
    if t == "trend":
        word = {"flat": "within", "spreads": "by more than", "under": "under"}.get(check["shape"], "")
        delta = f" {word} {check['delta']}" if check.get("delta") is not None else ""
        shape = "stays" if check["shape"] == "under" else check["shape"]
        return f"{check['measurement']} {shape}{delta} along {check['axis']} on {on}"
    return f"{check['measurement']} {check['shape']} over {check['axis']}"


def sides(check: dict) -> list[str]:
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


def is_params_ratio(check: dict) -> bool:
    return check["type"] == "ratio" and check.get("quantity") == "trained-params"
