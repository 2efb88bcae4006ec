"""Expand validated claims and a tier into the runs they need.

The Snakefile asks this module which files to build; the CLI asks it what a wildcard means. Paths
are the run identities: two claims that need the same (instance, text form, pooling,
post-processing) share one score run, and all poolings of one model share one encode run. Likewise
two claims that fine-tune the same instance with the same method and hyper-parameters on the same
task and seed share one fine-tuning run (the method's hyper-parameters are part of the path, as a short
hash; the tier's budget is not, so results/<tier>/ must be cleared after editing a tier's budget).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from .claims import Claim, Measurement
from .tiers import Instance, instances, random_twins

IMPLEMENTED_METHODS = {"mean", "cls", "cls-before-pooler", "first-last", "static-last", "last2avg",
                       "static-average", "bow-cosine", "tfidf-cosine"}
IMPLEMENTED_POSTPROCESS = {"whitening"}
ENCODER_KINDS = {"pretrain-mlm", "transformer"}
FINETUNING_METHODS = {"full-finetuning", "lora", "adapter", "bitfit", "prefix-tuning", "prompt-tuning"}
LM_METHODS = {"zero-shot", "prefix-tuning", "prompt-tuning", "lora", "full-finetuning"}  # lm/train.py METHODS + zero-shot
TRAINING_FAMILIES = {"glue": "finetune", "lm-tasks": "lm"}  # claim family -> tier section and run kind


@dataclass(frozen=True)
class ScoreRun:
    evaluator: str
    instance: str
    form: str
    method: str
    post: str = "none"

    def path(self, results: str) -> str:
        return f"{results}/runs/score/{self.evaluator}/{self.instance}/{self.form}/{self.method}/{self.post}/metrics.json"


def params_key(method: str, params: dict) -> str:
    """A short, stable name for a method's hyper-parameters: the run path differs when they do."""
    if not params:
        return "default"
    blob = json.dumps(params, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{method}:{blob}".encode()).hexdigest()[:10]


@dataclass(frozen=True)
class TaskRun:
    """One trained (or zero-shot) model scored on one task's dev split: a GLUE fine-tuning run (kind 'finetune')
    or a causal-LM run scored by lm-eval (kind 'lm'). metrics.json holds the scores, parameter counts and peak
    memory; predictions.npz the dev predictions in the score-run layout."""

    kind: str
    instance: str
    method: str
    pkey: str
    task: str
    seed: int

    def dir(self, results: str) -> str:
        return f"{results}/runs/{self.kind}/{self.instance}/{self.method}/{self.pkey}/{self.task}/s{self.seed}"

    def path(self, results: str) -> str:
        return f"{self.dir(results)}/metrics.json"


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
    pm.runs = [ScoreRun(evaluator, inst.name, form, method, post) for inst in instances(tier, asset)]
    if "random-weights" in claim.controls and m.role == "raw-encoder":
        pm.controls = [ScoreRun(evaluator, inst.name, form, method, post) for inst in random_twins(tier, asset)]
    return pm


def method_params(tier: dict, kind: str, m: Measurement) -> dict:
    """The tier's defaults for the method (learning rate for its budget, sizes), overridden by the claim's params."""
    section = tier.get("finetune" if kind == "finetune" else "lm", {})
    return {**section.get("methods", {}).get(m.method, {}), **m.params}


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
    if m.method == "zero-shot":
        pm.runs = [TaskRun(kind, instance, "zero-shot", "default", task, 0) for task in claim.protocol["benchmarks"]]
        return pm
    params = method_params(tier, kind, m)
    key = params_key(m.method, params)
    pm.runs = [TaskRun(kind, instance, m.method, key, task, seed)
               for task in claim.protocol["benchmarks"] for seed in section["seeds"]]
    return pm


def training_params(plans: list["ClaimPlan"], tier: dict) -> dict[tuple[str, str, str], dict]:
    """(run kind, method, params key) -> the hyper-parameters, for the rules that train."""
    out = {}
    for p in plans:
        for pm in p.measurements.values():
            for r in pm.runs:
                if isinstance(r, TaskRun) and r.method != "zero-shot":
                    out[(r.kind, r.method, r.pkey)] = method_params(tier, r.kind, pm.measurement)
    return out


def lexical_controls(claim: Claim, tier: dict) -> dict[str, ScoreRun]:
    """Bag-of-words and TF-IDF cosine on the claim's benchmarks and text form."""
    role = tier["roles"].get("lexical", {})
    if "asset" not in role:
        return {}
    evaluator, form = _evaluator_and_form(claim)
    wanted = {"bow": "bow-cosine", "tfidf": "tfidf-cosine"}
    # same evaluator as the claim: its benchmarks (e.g. MTEB's 9927-pair SICK-R) must be the same pairs
    return {c: ScoreRun(evaluator, role["asset"], form, wanted[c]) for c in claim.controls if c in wanted}


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


def lm_model_dir(resources: str, tier: dict, instance: str) -> str | None:
    """Where a causal LM the workflow materialises lives (dequantised GGUF, or a tiny LM built by the workflow)."""
    spec = tier["assets"][instance.partition(".")[0]]
    if spec["kind"] != "causal-lm" or spec.get("source") not in ("package", "workflow"):
        return None
    return f"{resources}/models/{instance}"


def lm_tasks_dir(results: str) -> str:
    """The lm-eval task YAMLs and JSONL docs generated from the local GLUE files (one folder per tier)."""
    return f"{results}/runs/lm-tasks"


def needs_encode(run: ScoreRun, tier: dict) -> bool:
    asset = run.instance.partition(".")[0]
    return tier["assets"][asset]["kind"] != "lexical"


def encode_path(results: str, run: ScoreRun) -> str:
    """Vectors a score run reads: one forward pass per (evaluator's data, instance, text form)."""
    return f"{results}/runs/encode/{run.evaluator}/{run.instance}/{run.form}/vectors.npz"


def model_dir(resources: str, tier: dict, instance: str) -> str | None:
    """Where a workflow-trained instance's final weights live (None for packaged or hub models)."""
    inst = Instance.parse(instance, tier)
    spec = tier["assets"][inst.asset]
    if inst.kind != "pretrain-mlm" or inst.random:
        return None
    return f"{resources}/models/{inst.asset}.s{inst.seed}/checkpoints/step-{spec['train']['steps']}"


def tokenizer_dir(resources: str, asset: str) -> str:
    return f"{resources}/tokenizers/{asset}"


def encode_inputs(resources: str, tier: dict, instance: str) -> list[str]:
    """Files an encode run depends on: trained weights, or the tokenizer for a random twin."""
    inst = Instance.parse(instance, tier)
    if inst.kind != "pretrain-mlm":
        return []
    if inst.random:
        return [f"{tokenizer_dir(resources, inst.asset)}/tokenizer.json"]
    return [f"{resources}/models/{inst.asset}.s{inst.seed}/metrics.json"]
