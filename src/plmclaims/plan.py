"""Expand validated claims and a tier into the runs they need, and own where every run lives.

The Snakefile asks this module which files to build and what each rule hands the CLI; the CLI and the runs ask it
where upstream runs live. The core part of the plan lives here (run identity, the shared model runs, claims and
measurements to runs); each family's planner (families/<family>/plan.py, reached through the registry) builds its
own run kinds with `make_run`. Each run kind has one Layout: a folder template whose fields are Snakemake wildcards in
the rule's output pattern and the run's values in its concrete path. Every folder ends in the run's key: a short
hash of its spec, which holds everything that can change its result: the asset spec and revision, the data source,
the method and its hyper-parameters, the budget, sampling, encode settings, the seed, and the keys of the runs it
reads. The spec's tier part is also the only tier the run sees (the CLI gets it as --spec), so a run cannot read a
setting its key does not cover. Editing a setting moves exactly the runs it affects to new folders; runs that
share a spec (two claims fine-tuning the same model the same way) share one folder. Data files are inputs of the
rules that read them, and are checked against their release checksums before compute (data.verify).
"""
from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field

from . import families, hub_family, recipes
from .claims import Claim, Measurement
from .errors import UserError
from .families.family import Layout
from .magnitudes import mark_cut_budgets
from .tiers import Instance


# ---------------------------------------------------------------- where runs live

# the kinds every family shares (models the workflow builds, verdicts); each family declares its own run kinds
ASSET_LAYOUTS = {
    "corpus": Layout("resources", "corpus", "pretrain.txt"),
    "tokenizer": Layout("resources", "tokenizers/{asset}/{key}", "tokenizer.json"),
    "pretrain": Layout("resources", "models/{asset}.s{seed}/{key}", "metrics.json"),
    "gguf": Layout("resources", "gguf/{asset}/{key}", "gguf.json"),  # a GGUF joined from its parts: the file beside it
    "lm_model": Layout("resources", "models/{instance}/{key}", "model.json"),  # the model itself: model/ beside it
    "verdict": Layout("results", "claims", "{slug}.json"),
}
LAYOUTS = {**ASSET_LAYOUTS, **families.layouts()}
KEY_PATTERN = r"[0-9a-f]{10}"

# Tier settings a run reads that change float rounding at most, never what is computed: they are handed to the run
# but not hashed, so fitting a batch into memory reruns nothing. The tier's name and file are not hashed either
# (results are per tier name already; a copy of a tier file under another path is the same tier).
NOT_HASHED = ("encode.batch_size", "lm.eval_batch_size", "name", "_path")
# The tier's `checkpoint` section (how often training jobs save their resume state) is not even in a run's spec: the
# workflow hands it to jobs through the environment (plmclaims.checkpoint), so changing it reruns no finished job.
# asset fields that say nothing about one run's result (the pre-training seeds are the instances' own business; why a
# repository has no pin is not its commit)
ASSET_NOT_RESULT = ("seeds", "twin_seeds", "install", "note", "substitute_for", "unpinned")
# asset fields that say how runs compute with a model, not what the model is: not part of materialising it
COMPUTE_ONLY = ("precision",)
GGUF_FIELDS = ("parts", "gguf_file", "bytes", "sha256")  # what a GGUF joined from its parts is (lm.gguf_parts)
# roles whose measurements are set beside their random-weights twins where the claim asks for that control: the raw
# encoder, and the raw pre-trained language model measured in its place (a decoder: Gemma-3-270M, GPT-2)
TWIN_ROLES = ("raw-encoder", "pretrained-lm")


def pick(tier: dict, *paths: str) -> dict:
    """The sub-tree of `tier` holding the dotted `paths` that are present (absent ones stay absent)."""
    out: dict = {}
    for path in paths:
        *parents, last = path.split(".")
        src, dst = tier, out
        for k in parents:
            if not isinstance(src.get(k), dict):
                break
            src, dst = src[k], dst.setdefault(k, {})
        else:
            if last in src:
                dst[last] = copy.deepcopy(src[last])
    return out


def asset_view(tier: dict, instance: str, step: int | None = None) -> dict:
    """The asset settings a run of `instance` reads (a random-weights twin reads no training schedule); of a hub family
    of seeded pre-trainings, the one repository and commit the instance loads (its checkpoint at `step`; a twin: the
    first seed's, for the configuration and tokenizer)."""
    inst = Instance.parse(instance, tier)
    drop = ASSET_NOT_RESULT + (("train",) if inst.random else ())
    spec = tier["assets"][inst.asset]
    if hub_family.is_family(spec):
        spec = hub_family.resolve(spec, None if inst.random else inst.seed, None if inst.random else step)
    return {"assets": {inst.asset: copy.deepcopy({k: v for k, v in spec.items() if k not in drop})}}


def merge(*views: dict) -> dict:
    out: dict = {}
    for v in views:
        for k, x in v.items():
            out[k] = merge(out[k], x) if isinstance(x, dict) and isinstance(out.get(k), dict) else x
    return out


def key_of(spec: dict) -> str:
    """The run's identity: a short hash of its spec without the settings in NOT_HASHED."""
    hashed = copy.deepcopy(spec)
    for path in NOT_HASHED:
        *parents, last = path.split(".")
        node = hashed["tier"]
        for k in parents:
            node = node.get(k, {})
        node.pop(last, None)
    blob = json.dumps(hashed, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:10]


class Run:
    """A planned run: its spec (kind, path fields, method parameters, the tier settings it reads, the keys of the
    runs it reads) and the key hashed from it. Path fields read as attributes (run.instance, run.task)."""

    def __init__(self, spec: dict, upstream: tuple = ()):
        self.spec = spec
        self.key = key_of(spec)
        self.upstream = tuple(upstream)  # the Run objects behind spec['upstream'] (empty when rebuilt from JSON)

    @property
    def kind(self) -> str:
        return self.spec["kind"]

    @property
    def params(self) -> dict:
        return self.spec.get("params", {})

    def __getattr__(self, name: str):
        fields = self.__dict__.get("spec", {}).get("fields", {})
        if name in fields:
            return fields[name]
        raise AttributeError(name)

    def __eq__(self, other) -> bool:
        return isinstance(other, Run) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.kind} {'/'.join(map(str, self.spec['fields'].values()))} {self.key})"

    def layout(self) -> Layout:
        return LAYOUTS[self.kind]

    def dir(self, root: str) -> str:
        return f"{root}/{self.layout().folder.format(**self.spec['fields'], key=self.key)}"

    def path(self, root: str) -> str:
        return f"{self.dir(root)}/{self.layout().main}"

    def tier(self, name: str, path: str) -> dict:
        """The tier as the run sees it: only the settings its spec holds."""
        return {**copy.deepcopy(self.spec["tier"]), "name": name, "_path": path}

    def to_json(self, tier: dict) -> str:
        """What the rule hands the CLI: the spec, with the tier's name and file (not hashed) for its messages."""
        return json.dumps({**self.spec, "tier": {**self.spec["tier"], "name": tier["name"], "_path": tier["_path"]}},
                          sort_keys=True, separators=(",", ":"))


def make_run(kind: str, fields: dict, tier_view: dict, upstream: tuple = (), params: dict | None = None) -> Run:
    """A run of `kind` (a key of LAYOUTS): its path fields, the tier settings it reads (pick/asset_view), the runs it
    reads and its method parameters. Every run constructor, the families' too, goes through here."""
    spec = {"kind": kind, "fields": fields, "tier": tier_view, "upstream": {u.kind: u.key for u in upstream}}
    if params is not None:
        spec["params"] = params
    return Run(spec, upstream)


def run_from_json(text: str) -> tuple[Run, dict]:
    """The run and its tier view from a rule's --spec; the key is recomputed, so a spec cannot claim another's path."""
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"--spec: not JSON ({err.msg}); the workflow passes the planned run's spec") from None
    if not isinstance(spec, dict) or spec.get("kind") not in LAYOUTS or not isinstance(spec.get("tier"), dict):
        raise UserError(f"--spec: not a run spec; it needs 'kind' (one of {', '.join(LAYOUTS)}), 'fields' and 'tier'")
    tier = spec["tier"]
    run = Run({**spec, "tier": {k: v for k, v in tier.items() if k not in ("name", "_path")}})
    return run, {**tier, "name": tier.get("name", "?"), "_path": tier.get("_path", "?")}


# ---------------------------------------------------------------- one constructor per run kind

def tokenizer_run(tier: dict, asset: str) -> Run:
    # the WordPiece vocabulary depends on its size and the sequence length only, not on the training schedule
    view = pick(tier, f"assets.{asset}.kind", f"assets.{asset}.model.vocab", f"assets.{asset}.model.max_length")
    return make_run("tokenizer", {"asset": asset}, view)


def pretrain_run(tier: dict, asset: str, seed: int) -> Run:
    tok = tokenizer_run(tier, asset)
    return make_run("pretrain", {"asset": asset, "seed": int(seed)}, asset_view(tier, asset), (tok,))


def gguf_run(tier: dict, asset: str) -> Run:
    """A GGUF file joined from the packages holding its parts, checked against the tier's sha256, kept under
    resources/ for the materialisations that read it."""
    return make_run("gguf", {"asset": asset}, pick(tier, *(f"assets.{asset}.{k}" for k in ("kind",) + GGUF_FIELDS)))


def lm_model_run(tier: dict, instance: str) -> Run | None:
    """A causal LM the workflow materialises (dequantised GGUF, or the tiny LM built from the corpus). For a random-
    weights twin of a GGUF asset it writes the configuration and tokenizer only (the twin draws its weights at load,
    so it never waits for the trained weights); a workflow-built LM's folder serves its twins as it is."""
    asset, _, suffix = instance.partition(".")
    spec = tier["assets"][asset]
    if spec["kind"] != "causal-lm" or spec.get("source") not in ("package", "workflow"):
        return None
    if suffix.startswith("random-") and spec["source"] == "workflow":
        return lm_model_run(tier, asset)
    view = asset_view(tier, instance)
    for k in COMPUTE_ONLY:
        view["assets"][asset].pop(k, None)
    return make_run("lm_model", {"instance": instance}, view, (gguf_run(tier, asset),) if "parts" in spec else ())


def model_run(tier: dict, instance: str) -> Run | None:
    """The workflow run an instance's weights (or tokenizer) come from; None for packaged, local or hub models."""
    inst = Instance.parse(instance, tier)
    if inst.kind == "pretrain-mlm":
        return tokenizer_run(tier, inst.asset) if inst.random else pretrain_run(tier, inst.asset, inst.seed)
    return lm_model_run(tier, instance)


def all_runs(runs) -> dict[str, Run]:
    """key -> run for `runs` and every run upstream of them: what the rules look up by their {key} wildcard."""
    out: dict[str, Run] = {}
    stack = list(runs)
    while stack:
        r = stack.pop()
        if r.key not in out:
            out[r.key] = r
            stack.extend(r.upstream)
    return out


def lookup(index: dict[str, Run], key: str, path: str) -> Run:
    run = index.get(key)
    if run is None:
        raise UserError(f"{path}: no planned run has key {key}; it was planned with other settings. Ask for the "
                        "report (the default target), not a run folder from an older plan")
    return run


# ---------------------------------------------------------------- what a run reads

def data_files(run: Run, tier: dict, data_root: str | None) -> list[str]:
    """The data files a run reads (inputs of its rule, verified before compute); [] for hub sources and assets."""
    fam = families.family_of_kind(run.kind)
    return families.implementation(fam.name, "plan").data_files(run, tier, data_root) if fam else []


def gguf_path(resources: str, tier: dict, asset: str) -> str:
    """Where the GGUF joined from an asset's parts lives."""
    return f"{gguf_run(tier, asset).dir(resources)}/{tier['assets'][asset]['gguf_file']}"


def wants_twins(claim: Claim, m: Measurement) -> bool:
    """Whether a measurement's runs get their random-weights twins beside them (its role is one of TWIN_ROLES and the
    claim asks for the control)."""
    return "random-weights" in claim.controls and m.role in TWIN_ROLES


def lm_model_dir(resources: str, tier: dict, instance: str) -> str | None:
    """Where a causal LM the workflow materialises lives (None for hub or local models)."""
    run = lm_model_run(tier, instance)
    return f"{run.dir(resources)}/model" if run else None


def model_dir(resources: str, tier: dict, instance: str, step: int | None = None) -> str | None:
    """Where a workflow-trained instance's final weights (or those it saved at `step`) live (None for packaged or hub
    models)."""
    inst = Instance.parse(instance, tier)
    if inst.kind != "pretrain-mlm" or inst.random:
        return None
    step = step or tier["assets"][inst.asset]["train"]["steps"]
    return f"{pretrain_run(tier, inst.asset, inst.seed).dir(resources)}/checkpoints/step-{step}"


def tokenizer_dir(resources: str, tier: dict, asset: str) -> str:
    return tokenizer_run(tier, asset).dir(resources)


def verdict_tier_view(cplan: "ClaimPlan", tier: dict) -> dict:
    """The part of the tier a claim's verdict reads besides its runs: the judging settings and its roles."""
    roles = sorted({m.role for p in cplan.every_model() for m in p.claim.measurements.values()} | {"lexical"})
    return pick(tier, "bootstrap", "judges", "controls", "floors", "headline", *(f"roles.{r}" for r in roles))


def verdict_params(cplan: "ClaimPlan", tier: dict) -> str:
    """Everything a verdict reads besides its runs: the claim as loaded and the tier's judging settings. A rule
    parameter, so editing one claim (or the bootstrap) reruns exactly the verdicts it changes."""
    read = {"claim": cplan.claim.data, "tier": verdict_tier_view(cplan, tier)}
    cut = {n: pm.magnitudes for n, pm in cplan.measurements.items() if pm.magnitudes}
    if cut:  # which magnitudes are judged depends on the reference tier's runs too (plmclaims.magnitudes)
        read["magnitudes"] = cut
    blob = json.dumps(read, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ---------------------------------------------------------------- claims to runs

@dataclass
class PlannedMeasurement:
    name: str
    measurement: Measurement
    runs: list = field(default_factory=list)  # the runs whose metrics.json the verdict reads
    controls: list[Run] = field(default_factory=list)  # random-weights twins of `runs`
    # a curve (a measurement that sweeps its family's axis parameter): x -> that point's runs (and their twins);
    # `runs` and `controls` then hold every point's runs
    points: dict = field(default_factory=dict)
    control_points: dict = field(default_factory=dict)
    status: str = "ok"
    reason: str = ""
    substitute: str = ""  # the paper asset this tier's asset stands in for
    role_note: str = ""
    magnitudes: str = ""  # why its magnitudes are not judged at a tier with cut budgets (plmclaims.magnitudes)

    @property
    def unjudged_magnitude(self) -> str:
        """Why this measurement's magnitudes are not judged here ('' where they are)."""
        return f"on a substitute asset ({self.substitute})" if self.substitute else self.magnitudes

    def not_run(self, reason: str) -> "PlannedMeasurement":
        self.status, self.reason = "not-run", reason
        return self

    def set_curve(self, points: dict, control_points: dict | None = None) -> "PlannedMeasurement":
        """Make this measurement a curve: x -> runs (and their random-weights twins), in order; `runs` and
        `controls` become every point's runs, each once (points may share a twin, e.g. step 0)."""
        self.points, self.control_points = points, control_points or {}
        self.runs = list(dict.fromkeys(r for rs in self.points.values() for r in rs))
        self.controls = list(dict.fromkeys(r for rs in self.control_points.values() for r in rs))
        return self


def plan_measurement(claim: Claim, m: Measurement, tier: dict) -> PlannedMeasurement:
    """The runs of one measurement: the tier's asset for its role, handed to its family's planner."""
    pm = PlannedMeasurement(m.name, m)
    role = tier["roles"].get(m.role)
    if role is None:
        return pm.not_run(f"tier {tier['name']} maps no asset to role '{m.role}'")
    if "unavailable" in role:
        return pm.not_run(f"role '{m.role}': {role['unavailable']}")
    fam = families.family(claim.protocol["family"])
    if not fam.built:  # expressible in the schema, but no rule chain runs it yet
        return pm.not_run(f"the {fam.name} family is not built yet (built: {', '.join(families.BUILT)})")
    if m.method not in fam.methods:
        return pm.not_run(f"method '{m.method}' is not implemented yet")
    pm = families.implementation(fam.name, "plan").plan_measurement(claim, m, tier, pm, role)
    if pm.status == "ok":
        pm.substitute, pm.role_note = role.get("substitute_for", ""), role.get("note", "")
    return pm


def method_params(tier: dict, section: str, m: Measurement, asset: str | None = None, task: str | None = None,
                  recipe: str | None = None) -> dict:
    """The method's parameters from the tier's recipe for it (plmclaims.recipes: its entry, or the entry of the method
    `recipe` names, narrowed to the asset and task), overridden by the claim's params."""
    return {**recipes.params(tier, section, recipe or m.method, asset, task), **m.params}


def skipped_tasks(claim: Claim, tier: dict, role: str | None = None) -> dict[str, str]:
    """The claim's tasks this tier does not run (the family's tier section's `skip_tasks`: task -> reason, e.g.
    nothing beats chance at this budget). The verdict shows them as uninformative, never as measured. With `role`,
    those of the measurements of that role: a family may plan another role's model under another budget (a GLUE
    claim's CKA on a causal LM reads the lm-tasks family's fine-tuning: its plan module's role_skipped(claim, tier,
    role) says which tasks that leaves out, None where the role is planned as the family's own)."""
    fam = families.family(claim.protocol["family"])
    by_role = getattr(families.implementation(fam.name, "plan"), "role_skipped", None) if fam.built and role else None
    if by_role and (own := by_role(claim, tier, role)) is not None:
        return own
    skip = tier.get(fam.tier_section, {}).get("skip_tasks", {}) if fam.tier_section else {}
    out = {t: skip[t] for t in claim.protocol["benchmarks"] if t in skip}
    # a family may leave out more for a claim (the seed grid runs on the tasks its tier names): its plan module's
    # grid_skipped(claim, tier), so the planner and the verdict leave them out alike
    extra = getattr(families.implementation(fam.name, "plan"), "grid_skipped", None) if fam.built else None
    for t, why in (extra(claim, tier) if extra else {}).items():
        out.setdefault(t, why)
    return out


def plan_task_runs(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, role: dict, run_of,
                   asset_kinds: set[str], recipe: str | None = None) -> PlannedMeasurement:
    """A measurement of a trained family: one run per task and seed (`run_of(instance, task, seed, params)`), from
    the first instance of the role's asset, with the parameters of the method's recipe (or of the method `recipe`
    names: a measurement of what another method trained). A method that trains nothing (zero-shot) runs once per
    task."""
    section_name = families.family(claim.protocol["family"]).tier_section
    section = tier.get(section_name)
    if section is None:
        return pm.not_run(f"tier {tier['name']} has no '{section_name}' budget")
    asset = role["asset"]
    spec = tier["assets"][asset]
    if spec["kind"] not in asset_kinds:
        return pm.not_run(f"role '{m.role}' maps to asset '{asset}' of kind {spec['kind']}, which "
                          f"{claim.protocol['family']} runs cannot use")
    # a workflow-pretrained asset with several pre-training seeds is trained from its first: the spread reported
    # is over training seeds (training sample, data order, head and adapter initialisation)
    from .tiers import instances

    instance = instances(tier, asset)[0].name
    skipped = skipped_tasks(claim, tier)
    tasks = [t for t in claim.protocol["benchmarks"] if t not in skipped]
    if not tasks:
        return pm.not_run(f"tier {tier['name']} skips every task of the claim: " + "; ".join(
            f"{t}: {why}" for t, why in skipped.items()))
    if m.method == "zero-shot":
        pm.runs = [run_of(instance, task, 0, {}) for task in tasks]
    else:  # a recipe may differ by model and task (LoRA's per-task learning rates and epochs)
        pm.runs = [run_of(instance, task, seed, method_params(tier, section_name, m, asset, task, recipe))
                   for task in tasks for seed in section["seeds"]]
    return pm


# the role a claim's `models` re-plans on other models: the claim's pre-trained encoder
MODEL_ROLE = "raw-encoder"


@dataclass
class ClaimPlan:
    claim: Claim
    measurements: dict[str, PlannedMeasurement]
    lexical: dict[str, Run]  # control runs beside the claim's own (STS: bag-of-words and TF-IDF cosine)
    # the claim on each further model it names (`models:`): role -> the plan of the claim with its raw-encoder
    # measurements on that role; each is judged on its own (verdicts.claim), the tier's `headline` picks the verdict
    models: dict[str, "ClaimPlan"] = field(default_factory=dict)
    role: str = MODEL_ROLE  # the model this plan measures the claim on

    def score_runs(self) -> list:
        """Every run whose metrics.json the verdict reads, on every model the claim is measured on."""
        runs = [r for pm in self.measurements.values() for r in pm.runs + pm.controls]
        runs += [r for m in self.models.values() for r in m.score_runs() if r not in runs]
        return runs + [r for r in self.lexical.values() if r not in runs]

    def every_model(self) -> list["ClaimPlan"]:
        """This plan and the plan on each further model, in the claim's order."""
        return [self, *self.models.values()]


def on_model(claim: Claim, role: str) -> Claim:
    """The claim with its raw-encoder measurements on `role`: methods replaced by their analogues on that model, and no
    reported values (they are the paper model's, never this one's: its magnitudes are not judged)."""
    from dataclasses import replace

    spec = claim.data["models"][role]
    analogue = spec.get("methods", {})
    ms = {n: replace(m, role=role, method=analogue.get(m.method, m.method), reported={}, reported_curve=None)
          if m.role == MODEL_ROLE else m for n, m in claim.measurements.items()}
    return replace(claim, measurements=ms)


def plan_claim(claim: Claim, tier: dict) -> ClaimPlan:
    ms = {name: plan_measurement(claim, m, tier) for name, m in claim.measurements.items()}
    fam = families.family(claim.protocol["family"])
    impl = families.implementation(fam.name, "plan") if fam.built else None
    controls = impl.controls(claim, tier) if hasattr(impl, "controls") else {}
    models = {}
    for role, spec in claim.data.get("models", {}).items():
        variant = on_model(claim, role)
        vms = {name: plan_measurement(variant, m, tier) for name, m in variant.measurements.items()}
        for name in spec.get("skip", []):
            vms[name].not_run(f"not measured on the {role} model: {spec['note']}")
        models[role] = ClaimPlan(variant, vms, controls, role=role)
    cplan = ClaimPlan(claim, ms, controls, models)
    mark_cut_budgets(cplan, tier, plan_measurement)  # a tier with cut budgets: which magnitudes it judges
    return cplan


def plan_all(claims: list[Claim], tier: dict) -> list[ClaimPlan]:
    from .claims import check_against_tier  # what the tier's assets cannot do is refused before any run is planned

    for c in claims:
        check_against_tier(c, tier)
    return [plan_claim(c, tier) for c in claims]
