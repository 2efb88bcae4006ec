"""Expand validated claims and a tier into the runs they need, and own where every run lives.

The Snakefile asks this module which files to build and what each rule hands the CLI; the CLI and runs.py ask it
where upstream runs live. Each run kind has one Layout: a folder template whose fields are Snakemake wildcards in
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

from .claims import Claim, Measurement
from .data.sts import SOURCE_OF_EVALUATOR  # evaluator -> the tier's data source it reads
from .errors import UserError
from .tiers import Instance, instances, random_twins

IMPLEMENTED_METHODS = {"mean", "cls", "cls-before-pooler", "first-last", "static-last", "last2avg",
                       "static-average", "bow-cosine", "tfidf-cosine"}
IMPLEMENTED_POSTPROCESS = {"whitening"}
ENCODER_KINDS = {"pretrain-mlm", "transformer"}
FINETUNING_METHODS = {"full-finetuning", "lora", "adapter", "bitfit", "prefix-tuning", "prompt-tuning"}
LM_METHODS = {"zero-shot", "prefix-tuning", "prompt-tuning", "lora", "full-finetuning"}  # lm/train.py METHODS + zero-shot
TRAINING_FAMILIES = {"glue": "finetune", "lm-tasks": "lm"}  # claim family -> tier section and run kind


# ---------------------------------------------------------------- where runs live

@dataclass(frozen=True)
class Layout:
    """One run kind's place on disk. `folder` and `main` hold fields in braces: as they stand they are the Snakemake
    wildcards of the rule's output; formatted with a run's values they are its concrete path. `base` names the
    config folder (per tier) the kind lives under: 'results' or 'resources'."""

    base: str
    folder: str
    main: str  # the file whose presence means the run is done

    def pattern(self, root: str, file: str | None = None) -> str:
        return f"{root}/{self.folder}/{file or self.main}"

    def log(self, root: str, step: str = "") -> str:
        return f"{root}/logs/{self.folder}{'-' + step if step else ''}.log"


LAYOUTS = {
    "corpus": Layout("resources", "corpus", "pretrain.txt"),
    "tokenizer": Layout("resources", "tokenizers/{asset}/{key}", "tokenizer.json"),
    "pretrain": Layout("resources", "models/{asset}.s{seed}/{key}", "metrics.json"),
    "lm_model": Layout("resources", "models/{instance}/{key}", "model.json"),  # the model itself: model/ beside it
    "encode": Layout("results", "runs/encode/{evaluator}/{instance}/{form}/{key}", "vectors.npz"),
    "score": Layout("results", "runs/score/{evaluator}/{instance}/{form}/{method}/{post}/{key}", "metrics.json"),
    "finetune": Layout("results", "runs/finetune/{instance}/{method}/{task}/s{seed}/{key}", "metrics.json"),
    "lm_tasks": Layout("results", "runs/lm-tasks/{task}/{key}", "tasks.json"),
    "lm": Layout("results", "runs/lm/{instance}/{method}/{task}/s{seed}/{key}", "metrics.json"),  # + train.json, model/
    "verdict": Layout("results", "claims", "{slug}.json"),
}
KEY_PATTERN = r"[0-9a-f]{10}"

# Tier settings a run reads that change float rounding at most, never what is computed: they are handed to the run
# but not hashed, so fitting a batch into memory reruns nothing. The tier's name and file are not hashed either
# (results are per tier name already; a copy of a tier file under another path is the same tier).
NOT_HASHED = ("encode.batch_size", "lm.eval_batch_size", "name", "_path")
# asset fields that say nothing about one run's result (the pre-training seeds are the instances' own business)
ASSET_NOT_RESULT = ("seeds", "install", "note", "substitute_for")


def _pick(tier: dict, *paths: str) -> dict:
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


def _asset_view(tier: dict, instance: str) -> dict:
    """The asset settings a run of `instance` reads (a random-weights twin reads no training schedule)."""
    asset, _, suffix = instance.partition(".")
    drop = ASSET_NOT_RESULT + (("train",) if suffix.startswith("random-") else ())
    spec = {k: v for k, v in tier["assets"][asset].items() if k not in drop}
    return {"assets": {asset: copy.deepcopy(spec)}}


def _merge(*views: dict) -> dict:
    out: dict = {}
    for v in views:
        for k, x in v.items():
            out[k] = _merge(out[k], x) if isinstance(x, dict) and isinstance(out.get(k), dict) else x
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


class ScoreRun(Run):
    """Cosine scores of one (instance, text form, pooling, post-processing) on every STS benchmark."""


class TaskRun(Run):
    """One trained (or zero-shot) model scored on one task's dev split: a GLUE fine-tuning run (kind 'finetune')
    or a causal-LM run scored by lm-eval (kind 'lm'). metrics.json holds the scores, parameter counts and peak
    memory; predictions.npz the dev predictions in the score-run layout."""


CLASS_OF_KIND = {"score": ScoreRun, "finetune": TaskRun, "lm": TaskRun}


def _run(kind: str, fields: dict, tier_view: dict, upstream: tuple = (), params: dict | None = None) -> Run:
    spec = {"kind": kind, "fields": fields, "tier": tier_view, "upstream": {u.kind: u.key for u in upstream}}
    if params is not None:
        spec["params"] = params
    return CLASS_OF_KIND.get(kind, Run)(spec, upstream)


def run_from_json(text: str) -> tuple[Run, dict]:
    """The run and its tier view from a rule's --spec; the key is recomputed, so a spec cannot claim another's path."""
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"--spec: not JSON ({err.msg}); the workflow passes the planned run's spec") from None
    if not isinstance(spec, dict) or spec.get("kind") not in LAYOUTS or not isinstance(spec.get("tier"), dict):
        raise UserError(f"--spec: not a run spec; it needs 'kind' (one of {', '.join(LAYOUTS)}), 'fields' and 'tier'")
    tier = spec["tier"]
    run = CLASS_OF_KIND.get(spec["kind"], Run)({**spec, "tier": {k: v for k, v in tier.items() if k not in ("name", "_path")}})
    return run, {**tier, "name": tier.get("name", "?"), "_path": tier.get("_path", "?")}


# ---------------------------------------------------------------- one constructor per run kind

def tokenizer_run(tier: dict, asset: str) -> Run:
    # the WordPiece vocabulary depends on its size and the sequence length only, not on the training schedule
    view = _pick(tier, f"assets.{asset}.kind", f"assets.{asset}.model.vocab", f"assets.{asset}.model.max_length")
    return _run("tokenizer", {"asset": asset}, view)


def pretrain_run(tier: dict, asset: str, seed: int) -> Run:
    tok = tokenizer_run(tier, asset)
    return _run("pretrain", {"asset": asset, "seed": int(seed)}, _asset_view(tier, asset), (tok,))


def lm_model_run(tier: dict, instance: str) -> Run | None:
    """A causal LM the workflow materialises (dequantised GGUF, or the tiny LM built from the corpus)."""
    asset = instance.partition(".")[0]
    spec = tier["assets"][asset]
    if spec["kind"] != "causal-lm" or spec.get("source") not in ("package", "workflow"):
        return None
    return _run("lm_model", {"instance": instance}, _asset_view(tier, instance))


def model_run(tier: dict, instance: str) -> Run | None:
    """The workflow run an instance's weights (or tokenizer) come from; None for packaged, local or hub models."""
    inst = Instance.parse(instance, tier)
    if inst.kind == "pretrain-mlm":
        return tokenizer_run(tier, inst.asset) if inst.random else pretrain_run(tier, inst.asset, inst.seed)
    return lm_model_run(tier, instance)


def encode_run(tier: dict, evaluator: str, instance: str, form: str) -> Run:
    """One forward pass per (evaluator's data, instance, text form), shared by every pooling."""
    view = _merge(_pick(tier, f"data.{SOURCE_OF_EVALUATOR[evaluator]}", "data.max_pairs", "encode"), _asset_view(tier, instance))
    model = model_run(tier, instance)
    return _run("encode", {"evaluator": evaluator, "instance": instance, "form": form}, view, (model,) if model else ())


def needs_encode(run: Run, tier: dict) -> bool:
    return tier["assets"][run.instance.partition(".")[0]]["kind"] != "lexical"


def score_run(tier: dict, evaluator: str, instance: str, form: str, method: str, post: str = "none") -> ScoreRun:
    asset = instance.partition(".")[0]
    view = _merge(_pick(tier, f"data.{SOURCE_OF_EVALUATOR[evaluator]}", "data.max_pairs"), _asset_view(tier, instance))
    fields = {"evaluator": evaluator, "instance": instance, "form": form, "method": method, "post": post}
    up = () if tier["assets"][asset]["kind"] == "lexical" else (encode_run(tier, evaluator, instance, form),)
    return _run("score", fields, view, up)


def lm_tasks_run(tier: dict, task: str) -> Run:
    """The lm-eval task YAML and JSONL docs of one task, generated from the local GLUE dev file."""
    return _run("lm_tasks", {"task": task}, _pick(tier, "data.glue", "lm.eval_limit"))


def task_run(tier: dict, kind: str, instance: str, method: str, task: str, seed: int, params: dict) -> TaskRun:
    """A fine-tuning run ('finetune') or a causal-LM run ('lm': PEFT training, then lm-eval) on one task."""
    model = model_run(tier, instance)
    up = (model,) if model else ()
    if kind == "finetune":
        view = _pick(tier, "data.glue", "finetune.budget")
    elif method == "zero-shot":  # trains nothing: the training budget and data cannot change its result
        view, up = _pick(tier, "lm.eval_limit", "lm.eval_batch_size"), up + (lm_tasks_run(tier, task),)
    else:
        view, up = _pick(tier, "data.glue", "lm.budget", "lm.eval_limit", "lm.eval_batch_size"), up + (lm_tasks_run(tier, task),)
    fields = {"instance": instance, "method": method, "task": task, "seed": int(seed)}
    return _run(kind, fields, _merge(view, _asset_view(tier, instance)), up, params)


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
    """The data files a run reads (inputs of its rule, verified before compute); [] for hub sources."""
    from .data import verify

    if run.kind in ("encode", "score"):
        return verify.sts_files(tier, run.evaluator, run.form, data_root)
    if run.kind == "finetune":
        return verify.glue_files(tier, run.task, data_root)
    if run.kind == "lm" and run.method != "zero-shot":
        return verify.glue_files(tier, run.task, data_root, splits=("train",))
    if run.kind == "lm_tasks":
        return verify.glue_files(tier, run.task, data_root, splits=("dev",))
    return []


def lm_model_dir(resources: str, tier: dict, instance: str) -> str | None:
    """Where a causal LM the workflow materialises lives (None for hub or local models)."""
    run = lm_model_run(tier, instance)
    return f"{run.dir(resources)}/model" if run else None


def lm_tasks_dir(results: str, run: Run) -> str:
    """The lm-eval task folder an lm run reads, at the key it was planned with (the run's own tier view lacks the
    GLUE source that key covers, so it is read from the spec, not recomputed)."""
    return f"{results}/{LAYOUTS['lm_tasks'].folder.format(task=run.task, key=run.spec['upstream']['lm_tasks'])}"


def model_dir(resources: str, tier: dict, instance: str) -> str | None:
    """Where a workflow-trained instance's final weights live (None for packaged or hub models)."""
    inst = Instance.parse(instance, tier)
    if inst.kind != "pretrain-mlm" or inst.random:
        return None
    steps = tier["assets"][inst.asset]["train"]["steps"]
    return f"{pretrain_run(tier, inst.asset, inst.seed).dir(resources)}/checkpoints/step-{steps}"


def tokenizer_dir(resources: str, tier: dict, asset: str) -> str:
    return tokenizer_run(tier, asset).dir(resources)


def verdict_params(cplan: "ClaimPlan", tier: dict) -> str:
    """Everything a verdict reads besides its runs: the claim as loaded and the tier's judging settings. A rule
    parameter, so editing one claim (or the bootstrap) reruns exactly the verdicts it changes."""
    roles = sorted({m.role for m in cplan.claim.measurements.values()} | {"lexical"})
    view = _pick(tier, "bootstrap", "judges", "controls", "floors", *(f"roles.{r}" for r in roles))
    blob = json.dumps({"claim": cplan.claim.data, "tier": view}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ---------------------------------------------------------------- claims to runs

@dataclass
class PlannedMeasurement:
    name: str
    measurement: Measurement
    runs: list = field(default_factory=list)  # ScoreRun or TaskRun
    controls: list[ScoreRun] = field(default_factory=list)  # random-weights twins of `runs`
    status: str = "ok"
    reason: str = ""
    substitute: str = ""  # the paper asset this tier's asset stands in for
    role_note: str = ""


def _method_key(m: Measurement, tier: dict) -> tuple[str, str | None]:
    """The score-run method and post-processing key; None as post means 'not available at this tier'."""
    if not m.postprocess:
        return m.method, "none"
    fit_on = m.postprocess.get("fit_on", "target")
    corpus = tier.get("fit_corpora", {}).get(fit_on)
    if corpus is None:
        return m.method, None
    if corpus["use"] != "target":
        return m.method, "unsupported"
    effective = "target"
    k = f"-k{m.postprocess['k']}" if m.postprocess.get("k") else ""
    return m.method, f"{m.postprocess['name']}-{effective}{k}"


def _evaluator_and_form(claim: Claim) -> tuple[str, str]:
    """The claim's evaluator and text form (MTEB reads raw text, SentEval its tokenised files, unless stated)."""
    evaluator = claim.protocol.get("evaluator", "senteval")
    return evaluator, claim.protocol.get("text_form", "raw" if evaluator == "mteb" else "tokenised")


def plan_measurement(claim: Claim, m: Measurement, tier: dict) -> PlannedMeasurement:
    pm = PlannedMeasurement(m.name, m)
    role = tier["roles"].get(m.role)
    if role is None:
        pm.status, pm.reason = "not-run", f"tier {tier['name']} maps no asset to role '{m.role}'"
        return pm
    if "unavailable" in role:
        pm.status, pm.reason = "not-run", f"role '{m.role}': {role['unavailable']}"
        return pm
    family = claim.protocol["family"]
    if family in TRAINING_FAMILIES:
        return _plan_training(claim, m, tier, pm, role)
    if family != "sts":  # expressible in the schema (probing, compression, ...), but no rule chain runs it yet
        pm.status, pm.reason = "not-run", f"the {family} family is not built yet (built: sts, {', '.join(TRAINING_FAMILIES)})"
        return pm
    if m.method not in IMPLEMENTED_METHODS:
        pm.status, pm.reason = "not-run", f"method '{m.method}' is not implemented yet"
        return pm
    if m.postprocess and m.postprocess["name"] not in IMPLEMENTED_POSTPROCESS:
        pm.status, pm.reason = "not-run", f"post-processing '{m.postprocess['name']}' is not implemented yet"
        return pm
    method, post = _method_key(m, tier)
    if post is None:
        pm.status, pm.reason = "not-run", f"tier {tier['name']} has no fit corpus '{m.postprocess.get('fit_on')}'"
        return pm
    if post == "unsupported":
        pm.status, pm.reason = "not-run", f"fitting {m.postprocess['name']} on a hub corpus ('{m.postprocess.get('fit_on')}') is not implemented yet"
        return pm
    asset = role["asset"]
    evaluator, form = _evaluator_and_form(claim)
    pm.substitute, pm.role_note = role.get("substitute_for", ""), role.get("note", "")
    pm.runs = [score_run(tier, evaluator, inst.name, form, method, post) for inst in instances(tier, asset)]
    if "random-weights" in claim.controls and m.role == "raw-encoder":
        pm.controls = [score_run(tier, evaluator, inst.name, form, method, post) for inst in random_twins(tier, asset)]
    return pm


def method_params(tier: dict, kind: str, m: Measurement) -> dict:
    """The tier's defaults for the method (learning rate for its budget, sizes), overridden by the claim's params."""
    section = tier.get("finetune" if kind == "finetune" else "lm", {})
    return {**section.get("methods", {}).get(m.method, {}), **m.params}


def skipped_tasks(claim: Claim, tier: dict) -> dict[str, str]:
    """The claim's tasks this tier does not run (`finetune.skip_tasks` / `lm.skip_tasks`: task -> reason, e.g.
    nothing beats chance at this budget). The verdict shows them as uninformative, never as measured."""
    kind = TRAINING_FAMILIES.get(claim.protocol["family"])
    skip = tier.get(kind, {}).get("skip_tasks", {}) if kind else {}
    return {t: skip[t] for t in claim.protocol["benchmarks"] if t in skip}


def _plan_training(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, role: dict) -> PlannedMeasurement:
    """A measurement on GLUE (fine-tuned encoder) or on lm-eval tasks (causal LM): one run per task and seed."""
    kind = TRAINING_FAMILIES[claim.protocol["family"]]
    section = tier.get("finetune" if kind == "finetune" else "lm")
    if section is None:
        pm.status, pm.reason = "not-run", f"tier {tier['name']} has no '{'finetune' if kind == 'finetune' else 'lm'}' budget"
        return pm
    allowed = LM_METHODS if kind == "lm" else FINETUNING_METHODS
    if m.method not in allowed:
        pm.status, pm.reason = "not-run", f"method '{m.method}' is not a {claim.protocol['family']} method; allowed: {', '.join(sorted(allowed))}"
        return pm
    asset = role["asset"]
    spec = tier["assets"][asset]
    wanted = {"causal-lm"} if kind == "lm" else ENCODER_KINDS
    if spec["kind"] not in wanted:
        pm.status, pm.reason = "not-run", f"role '{m.role}' maps to asset '{asset}' of kind {spec['kind']}, which {kind} runs cannot use"
        return pm
    # a workflow-pretrained asset with several pre-training seeds is fine-tuned from its first: the spread
    # reported is over fine-tuning seeds (training sample, data order, head and adapter initialisation)
    instance = instances(tier, asset)[0].name
    pm.substitute, pm.role_note = role.get("substitute_for", ""), role.get("note", "")
    skipped = skipped_tasks(claim, tier)
    tasks = [t for t in claim.protocol["benchmarks"] if t not in skipped]
    if not tasks:
        pm.status, pm.reason = "not-run", f"tier {tier['name']} skips every task of the claim: " + "; ".join(
            f"{t}: {why}" for t, why in skipped.items())
        return pm
    if m.method == "zero-shot":
        pm.runs = [task_run(tier, kind, instance, "zero-shot", task, 0, {}) for task in tasks]
        return pm
    params = method_params(tier, kind, m)
    pm.runs = [task_run(tier, kind, instance, m.method, task, seed, params) for task in tasks for seed in section["seeds"]]
    return pm



def lexical_controls(claim: Claim, tier: dict) -> dict[str, ScoreRun]:
    """Bag-of-words and TF-IDF cosine on the claim's benchmarks and text form."""
    role = tier["roles"].get("lexical", {})
    if "asset" not in role:
        return {}
    evaluator, form = _evaluator_and_form(claim)
    wanted = {"bow": "bow-cosine", "tfidf": "tfidf-cosine"}
    # same evaluator as the claim: its benchmarks (e.g. MTEB's 9927-pair SICK-R) must be the same pairs
    return {c: score_run(tier, evaluator, role["asset"], form, wanted[c]) for c in claim.controls if c in wanted}


@dataclass
class ClaimPlan:
    claim: Claim
    measurements: dict[str, PlannedMeasurement]
    lexical: dict[str, ScoreRun]

    def score_runs(self) -> list:
        """Every run whose metrics.json the verdict reads (score runs and task runs)."""
        runs = [r for pm in self.measurements.values() for r in pm.runs + pm.controls]
        return runs + list(self.lexical.values())


def plan_claim(claim: Claim, tier: dict) -> ClaimPlan:
    ms = {name: plan_measurement(claim, m, tier) for name, m in claim.measurements.items()}
    return ClaimPlan(claim, ms, lexical_controls(claim, tier))


def plan_all(claims: list[Claim], tier: dict) -> list[ClaimPlan]:
    from .claims import check_against_tier  # what the tier's assets cannot do is refused before any run is planned

    for c in claims:
        check_against_tier(c, tier)
    return [plan_claim(c, tier) for c in claims]

