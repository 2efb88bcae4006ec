"""Intrinsic measurements to runs: one geometry run per (instance, split, layer), reading the probing family's shared
word-vector encode (same tier settings, same key: computed once for both families); one attention run per (instance,
split, layer), reading one attention-maps run per (instance, split); the random-weights twins beside the raw
encoder."""
from __future__ import annotations

import json
from pathlib import Path

from ...claims import Claim, Measurement
from ...data import verify
from ...plan import PlannedMeasurement, Run, asset_view, make_run, merge, model_run, pick, wants_twins
from ...tiers import instances, random_twins
from ..probing import LAYER_KINDS, depth, resolve_layer
from ..probing.plan import encode_run, plan_layers
from . import ATTENTION, DECODER_SHARES, GRADIENT

# the sentences attention is read on: the probing family's seeded sample of the scored split (its eval part)
ATTENTION_SAMPLE = ("probing.eval_sentences", "probing.max_words", "probing.seed", "intrinsic.seed", "encode.max_length")
# hub organisations whose BERT checkpoints keep the pre-training (masked-LM) head
MLM_HUB_ORGS = ("google-bert", "google")
HEAD_ARCHITECTURES = ("ForMaskedLM", "ForPreTraining")  # the config.json architectures that keep the MLM head


def geometry_run(tier: dict, instance: str, split: str, layer: int) -> Run:
    """One layer's anisotropy, self-similarity and explainable variance: metrics.json + predictions.npz."""
    view = merge(pick(tier, "data.ud", "intrinsic"), asset_view(tier, instance))
    fields = {"instance": instance, "split": split, "layer": int(layer)}
    return make_run("geometry", fields, view, (encode_run(tier, instance, split),))


def mlm_head_missing(spec: dict) -> str | None:
    """Why an asset has no masked-LM head to take the loss's gradient through; None when it has one (the workflow's
    pre-trained BERTs, Google's hub BERTs). A random-weights twin is the same architecture, head included."""
    if spec["kind"] == "pretrain-mlm":
        return None
    if spec["kind"] == "causal-lm":
        return "a causal LM has no masked-LM head (it predicts the next token), so the MLM loss has no gradient to take"
    if spec.get("source") == "local":  # a local checkpoint names its architecture (read offline, before any run)
        config = Path(spec["path"]) / "config.json"
        arch = json.loads(config.read_text()).get("architectures") or [] if config.is_file() else []
        if any(a.endswith(HEAD_ARCHITECTURES) for a in arch):
            return None
        return (f"the local model {spec['path']} is a {'/'.join(arch) or 'model without a config.json'}, without a "
                f"masked-LM head ({' or '.join(HEAD_ARCHITECTURES)}), so the MLM loss has no gradient to take")
    hub_id = spec.get("id", "") if spec.get("source") == "hub" else ""
    if hub_id.partition("/")[0] in MLM_HUB_ORGS or hub_id.startswith("bert-"):
        return None
    what = f"hub model {hub_id}" if hub_id else f"a {spec.get('source', '?')} model"
    return (f"{what} is not known to keep its masked-LM head (the workflow's pre-trained BERTs and the hub BERTs of "
            f"{', '.join(MLM_HUB_ORGS)} do), so the MLM loss has no gradient to take")


def maps_run(tier: dict, instance: str, split: str) -> Run:
    """Every layer's attention shares (and, with an MLM head, the loss gradient) per sentence of the split's sample."""
    view = merge(pick(tier, "data.ud", *ATTENTION_SAMPLE), asset_view(tier, instance))
    model = model_run(tier, instance)
    gradient = mlm_head_missing(tier["assets"][instance.partition(".")[0]]) is None
    return make_run("attention-maps", {"instance": instance, "split": split}, view, (model,) if model else (),
                    {"gradient": True} if gradient else None)


def attention_run(tier: dict, instance: str, split: str, layer: int) -> Run:
    """One layer's attention benchmarks from the maps: metrics.json + predictions.npz."""
    view = merge(pick(tier, "data.ud"), asset_view(tier, instance))
    fields = {"instance": instance, "split": split, "layer": int(layer)}
    return make_run("attention", fields, view, (maps_run(tier, instance, split),))


def plan_attention(m: Measurement, n: int, tier: dict, asset: str, split: str, pm: PlannedMeasurement,
                   twins: bool) -> PlannedMeasurement:
    """One layer (>= 1), or with layer 'all' a curve over layers 1 to the top; the twins beside, as plan_layers."""
    def runs(insts, layer: int) -> list[Run]:
        return [attention_run(tier, i.name, split, layer) for i in insts]

    if m.params["layer"] == "all":
        every = range(1, n + 1)
        return pm.set_curve({l: runs(instances(tier, asset), l) for l in every},
                            {l: runs(random_twins(tier, asset), l) for l in every} if twins else None)
    layer = resolve_layer(m.params["layer"], n)
    pm.runs = runs(instances(tier, asset), layer)
    if twins:
        pm.controls = runs(random_twins(tier, asset), layer)
    return pm


def plan_measurement(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, role: dict) -> PlannedMeasurement:
    asset = role["asset"]
    spec = tier["assets"][asset]
    if spec["kind"] not in LAYER_KINDS:
        return pm.not_run(f"role '{m.role}' maps to asset '{asset}' of kind {spec['kind']}, which has no layers")
    if "intrinsic" not in tier or "probing" not in tier or "ud" not in tier.get("data", {}):
        return pm.not_run(f"tier {tier['name']} lacks an 'intrinsic' or 'probing' section (the word sample) or 'data.ud'")
    n = depth(tier, asset)
    if n is None:
        return pm.not_run(f"tier {tier['name']} does not state how many layers '{asset}' has (probing.layers.{asset})")
    split = claim.protocol["split"]
    twins = wants_twins(claim, m)
    if m.method == ATTENTION:
        special = [b for b in claim.protocol["benchmarks"] if b not in DECODER_SHARES + (GRADIENT,)]
        if spec["kind"] == "causal-lm" and special:
            return pm.not_run(f"role '{m.role}' maps to '{asset}', a causal LM: it has no [SEP] or [CLS] token for "
                              f"{', '.join(special)}; its analogue is attention-to-first (the attention sink)")
        missing = mlm_head_missing(spec) if GRADIENT in claim.protocol["benchmarks"] else None
        if missing:
            return pm.not_run(f"role '{m.role}' maps to '{asset}': {missing}")
        return plan_attention(m, n, tier, asset, split, pm, twins)

    def runs(insts, layer: int) -> list[Run]:
        return [geometry_run(tier, i.name, split, layer) for i in insts]

    return plan_layers(pm, m.params["layer"], n, tier, asset, runs, twins)


def data_files(run: Run, tier: dict, data_root: str | None) -> list[str]:
    """Geometry reads probing's train and scored parts; attention only the scored split's sample."""
    parts = (run.split,) if run.kind in ("attention-maps", "attention") else ("train", run.split)
    return verify.ud_files(tier, parts, data_root)
