"""Probing measurements to runs: one word-vector encode per (instance, scored split), shared by every task, layer and
claim, and one probe run per (instance, method, task, layer); the random-weights twins beside the raw encoder."""
from __future__ import annotations

from ... import hub_family
from ...claims import Claim, Measurement
from ...data import verify
from ...plan import PlannedMeasurement, Run, asset_view, make_run, merge, model_run, pick, wants_twins
from ...tiers import instances, random_twins
from . import LAYER_KINDS, SHIFTED_WORDS, depth, resolve_layer

# the tier settings each run kind reads (and is keyed by): the sample, and each method's probe settings
SAMPLE = ("probing.train_sentences", "probing.eval_sentences", "probing.max_words", "probing.seed")
SETTINGS = {"probe-linear": "probing.linear", "structural-probe": "probing.structural"}


def encode_run(tier: dict, instance: str, split: str, step: int | None = None, words: str | None = None) -> Run:
    """Word vectors of every layer for the seeded UD sample (train and the scored split) of one instance: its final
    weights, or the checkpoint its pre-training saved at `step`. `words='bigram-shift'`: the same sample with two
    adjacent words swapped in a seeded half of it (a run of its own; without it, params and keys are as before)."""
    view = merge(pick(tier, "data.ud", *SAMPLE, "encode"), asset_view(tier, instance, step))
    model = model_run(tier, instance)
    params = {k: v for k, v in (("step", int(step) if step else None), ("words", words)) if v}
    return make_run("probe-encode", {"instance": instance, "split": split}, view, (model,) if model else (),
                    params or None)


def probe_run(tier: dict, instance: str, method: str, task: str, split: str, layer: int, step: int | None = None) -> Run:
    """One probe fitted on one layer's train vectors and scored on the split: metrics.json + predictions.npz."""
    view = merge(pick(tier, "data.ud", "probing.seed", SETTINGS[method]), asset_view(tier, instance))
    fields = {"instance": instance, "method": method, "task": task, "split": split, "layer": int(layer)}
    words = SHIFTED_WORDS if task == "bigram-shift" else None
    return make_run("probe", fields, view, (encode_run(tier, instance, split, step, words),))


def checkpoint_steps(tier: dict, asset: str) -> list[int] | None:
    """The steps a model's pre-training saved weights at, the last step last: a workflow-trained model's checkpoints,
    or the checkpoints a hub family of seeded pre-trainings released (hub_family); None for any other model."""
    spec = tier["assets"][asset]
    if spec["kind"] != "pretrain-mlm":
        return hub_family.steps(spec)
    return sorted({int(c) for c in spec["train"].get("checkpoints", [])} | {int(spec["train"]["steps"])})


def plan_measurement(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, role: dict) -> PlannedMeasurement:
    asset = role["asset"]
    spec = tier["assets"][asset]
    if spec["kind"] not in LAYER_KINDS:
        return pm.not_run(f"role '{m.role}' maps to asset '{asset}' of kind {spec['kind']}, which has no layers to probe")
    if "probing" not in tier or "ud" not in tier.get("data", {}):
        return pm.not_run(f"tier {tier['name']} has no 'probing' section or no 'data.ud' source")
    n = depth(tier, asset)
    if n is None:
        return pm.not_run(f"tier {tier['name']} does not state how many layers '{asset}' has (probing.layers.{asset})")
    split = claim.protocol["split"]
    twins = wants_twins(claim, m)

    def runs(insts, layer: int, step: int | None = None) -> list[Run]:
        return [probe_run(tier, i.name, m.method, task, split, layer, step)
                for task in claim.protocol["benchmarks"] for i in insts]

    if m.params.get("step") == "all":  # a curve along pre-training: the initialisation, each checkpoint, the end
        steps = checkpoint_steps(tier, asset)
        if steps is None:
            return pm.not_run(f"role '{m.role}' maps to '{asset}', which has no intermediate checkpoints at tier "
                              f"{tier['name']} (the workflow does not pre-train it and the tier lists none; the "
                              "paper-multiberts tier reads MultiBERTs' checkpoints)")
        layer = resolve_layer(m.params["layer"], n)
        final = steps[-1]
        # step 0 is the same architecture at its random initialisation: the random-weights twin
        points = {0: runs(random_twins(tier, asset), layer)}
        points.update({s: runs(instances(tier, asset), layer, None if s == final else s) for s in steps})
        return pm.set_curve(points, {s: points[0] for s in points} if twins else None)
    return plan_layers(pm, m.params["layer"], n, tier, asset, runs, twins)


def plan_layers(pm: PlannedMeasurement, layer, n_layers: int, tier: dict, asset: str, runs, twins: bool) -> PlannedMeasurement:
    """One layer's runs (`runs(instances, layer)`), or with layer 'all' a curve over every layer from the embeddings
    (0) to the top ('contextual': from layer 1); beside each, the random-weights twins' runs when `twins`. The
    intrinsic family plans the same way."""
    if layer in ("all", "contextual"):
        every = range(0 if layer == "all" else 1, n_layers + 1)
        return pm.set_curve({l: runs(instances(tier, asset), l) for l in every},
                            {l: runs(random_twins(tier, asset), l) for l in every} if twins else None)
    layer = resolve_layer(layer, n_layers)
    pm.runs = runs(instances(tier, asset), layer)
    if twins:
        pm.controls = runs(random_twins(tier, asset), layer)
    return pm


def data_files(run: Run, tier: dict, data_root: str | None) -> list[str]:
    return verify.ud_files(tier, ("train", run.split), data_root)
