"""Expand validated claims and a tier into the runs they need.

The Snakefile asks this module which files to build; the CLI asks it what a wildcard means. Paths
are the run identities: two claims that need the same (instance, text form, pooling,
post-processing) share one score run, and all poolings of one model share one encode run.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .claims import Claim, Measurement
from .tiers import Instance, instances, random_twins

IMPLEMENTED_METHODS = {"mean", "cls", "cls-before-pooler", "first-last", "static-last", "last2avg",
                       "static-average", "bow-cosine", "tfidf-cosine"}
IMPLEMENTED_POSTPROCESS = {"whitening"}
ENCODER_KINDS = {"pretrain-mlm", "transformer"}


@dataclass(frozen=True)
class ScoreRun:
    evaluator: str
    instance: str
    form: str
    method: str
    post: str = "none"

    def path(self, results: str) -> str:
        return f"{results}/runs/score/{self.evaluator}/{self.instance}/{self.form}/{self.method}/{self.post}/metrics.json"


@dataclass
class PlannedMeasurement:
    name: str
    measurement: Measurement
    runs: list[ScoreRun] = field(default_factory=list)
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

    def score_runs(self) -> list[ScoreRun]:
        runs = [r for pm in self.measurements.values() for r in pm.runs + pm.controls]
        return runs + list(self.lexical.values())


def plan_claim(claim: Claim, tier: dict) -> ClaimPlan:
    ms = {name: plan_measurement(claim, m, tier) for name, m in claim.measurements.items()}
    return ClaimPlan(claim, ms, lexical_controls(claim, tier))


def plan_all(claims: list[Claim], tier: dict) -> list[ClaimPlan]:
    return [plan_claim(c, tier) for c in claims]


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
