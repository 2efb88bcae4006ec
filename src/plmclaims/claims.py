"""Claims as validated data: one YAML file per claim under replications/<family>/."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .errors import UserError
from .schema import read_yaml, validate

STS_BENCHMARKS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICK-R")
GLUE_TASKS = ("CoLA", "SST-2", "MRPC", "RTE", "STS-B", "WNLI", "QNLI", "MNLI", "QQP")
LM_TASKS = ("SST-2", "CoLA", "MRPC", "RTE", "QNLI", "WNLI")  # the tasks lm/tasks.py has prompt templates for
KNOWN_BENCHMARKS = {"sts": set(STS_BENCHMARKS), "glue": set(GLUE_TASKS), "lm-tasks": set(LM_TASKS)}


@dataclass(frozen=True)
class Measurement:
    name: str
    role: str
    method: str
    postprocess: dict | None = None
    params: dict = field(default_factory=dict)
    reported: dict = field(default_factory=dict)
    label: str = ""
    note: str = ""
    reported_params: float | None = None  # trained parameters the source reports (PEFT claims)

    @property
    def post_key(self) -> str:
        """A path-safe name of the post-processing, 'none' when there is none."""
        if not self.postprocess:
            return "none"
        p = self.postprocess
        k = f"-k{p['k']}" if p.get("k") else ""
        return f"{p['name']}-{p.get('fit_on', 'target')}{k}"


@dataclass(frozen=True)
class Claim:
    id: str
    path: Path
    data: dict
    measurements: dict[str, Measurement]

    @property
    def slug(self) -> str:
        return self.id.replace("/", "--")

    @property
    def protocol(self) -> dict:
        return self.data["protocol"]

    @property
    def checks(self) -> list[dict]:
        return self.data["checks"]

    @property
    def controls(self) -> list[str]:
        return self.data.get("controls", [])

    @property
    def tolerance(self) -> float:
        return float(self.data.get("tolerance", 1.0))


def _check_refs(check: dict) -> list[str]:
    refs = [check[k] for k in ("measurement", "a", "b") if k in check]
    refs += check.get("order", []) + check.get("series", []) + check.get("minus", [])
    return refs


def load_claim(path: Path, root: Path | None = None) -> Claim:
    path = Path(path)
    data = read_yaml(path)
    validate(data, "claim", path)
    if root is not None:
        expected = path.resolve().relative_to(root.resolve()).with_suffix("").as_posix()
        if data["id"] != expected:
            raise UserError(f"{path}: field 'id': got {data['id']!r}; it must be {expected!r}, the file's path under {root}")
    measurements = {
        name: Measurement(
            name=name, role=m["role"], method=m["method"], postprocess=m.get("postprocess"),
            params=m.get("params", {}), reported=m.get("reported", {}), label=m.get("label", name), note=m.get("note", ""),
            reported_params=m.get("reported_params"),
        )
        for name, m in data["measurements"].items()
    }
    proto = data["protocol"]
    known = KNOWN_BENCHMARKS.get(proto["family"])
    if known is not None:
        for i, b in enumerate(proto["benchmarks"]):
            if b not in known:
                raise UserError(f"{path}: field 'protocol.benchmarks.{i}': got {b!r}; allowed values: {', '.join(sorted(known))}")
    targets = set(proto["benchmarks"]) | {"avg"}
    for task in proto.get("task_metrics", {}):
        if task not in proto["benchmarks"]:
            raise UserError(f"{path}: field 'protocol.task_metrics.{task}': not one of the claim's benchmarks; allowed values: {', '.join(proto['benchmarks'])}")
    for i, check in enumerate(data["checks"]):
        for ref in _check_refs(check):
            if ref not in measurements:
                raise UserError(f"{path}: field 'checks.{i}': names measurement {ref!r}; allowed values: {', '.join(measurements)}")
        if check["type"] == "trend" and check.get("minus") and len(check["minus"]) != len(check.get("series", [])):
            raise UserError(f"{path}: field 'checks.{i}.minus': needs one measurement per entry of 'series' ({len(check.get('series', []))})")
        on = check.get("target", "avg")
        for t in [on] if isinstance(on, str) else on:
            if t not in targets:
                raise UserError(f"{path}: field 'checks.{i}.target': got {t!r}; allowed values: {', '.join(sorted(targets))}")
    for name, m in measurements.items():
        for key in m.reported:
            if key not in targets:
                raise UserError(f"{path}: field 'measurements.{name}.reported.{key}': unknown benchmark; allowed values: {', '.join(sorted(targets))}")
    return Claim(id=data["id"], path=path, data=data, measurements=measurements)


def load_claims(root: Path | str, selected: list[str] | None = None) -> list[Claim]:
    """Load and validate every claim under `root`; stop at the first malformed file."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"{root}: claims folder not found; pass claims_dir=<folder with <family>/<claim>.yaml>")
    claims = [load_claim(p, root) for p in sorted(root.glob("*/*.yaml"))]
    ids = [c.id for c in claims]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise UserError(f"{root}: claim ids must be unique; duplicated: {', '.join(sorted(dupes))}")
    if selected:
        unknown = set(selected) - set(ids)
        if unknown:
            raise UserError(f"config field 'claims': unknown claim ids {sorted(unknown)}; allowed values: {', '.join(ids)}")
        claims = [c for c in claims if c.id in selected]
    return claims
