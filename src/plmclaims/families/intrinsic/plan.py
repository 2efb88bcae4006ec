"""Intrinsic measurements to runs: one geometry run per (instance, split, layer), reading the probing family's shared
word-vector encode (same tier settings, same key: computed once for both families); the random-weights twins beside
the raw encoder."""
from __future__ import annotations

from ...claims import Claim, Measurement
from ...data import verify
from ...plan import PlannedMeasurement, Run, asset_view, make_run, merge, pick
from ..probing import ENCODER_KINDS, depth
from ..probing.plan import encode_run, plan_layers


def geometry_run(tier: dict, instance: str, split: str, layer: int) -> Run:
    """One layer's anisotropy, self-similarity and explainable variance: metrics.json + predictions.npz."""
    view = merge(pick(tier, "data.ud", "intrinsic"), asset_view(tier, instance))
    fields = {"instance": instance, "split": split, "layer": int(layer)}
    return make_run("geometry", fields, view, (encode_run(tier, instance, split),))


def plan_measurement(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, role: dict) -> PlannedMeasurement:
    asset = role["asset"]
    spec = tier["assets"][asset]
    if spec["kind"] not in ENCODER_KINDS:
        return pm.not_run(f"role '{m.role}' maps to asset '{asset}' of kind {spec['kind']}, which has no layers")
    if "intrinsic" not in tier or "probing" not in tier or "ud" not in tier.get("data", {}):
        return pm.not_run(f"tier {tier['name']} lacks an 'intrinsic' or 'probing' section (the word sample) or 'data.ud'")
    n = depth(tier, asset)
    if n is None:
        return pm.not_run(f"tier {tier['name']} does not state how many layers '{asset}' has (probing.layers.{asset})")
    split = claim.protocol["split"]
    twins = "random-weights" in claim.controls and m.role == "raw-encoder"

    def runs(insts, layer: int) -> list[Run]:
        return [geometry_run(tier, i.name, split, layer) for i in insts]

    return plan_layers(pm, m.params["layer"], n, tier, asset, runs, twins)


def data_files(run: Run, tier: dict, data_root: str | None) -> list[str]:
    return verify.ud_files(tier, ("train", run.split), data_root)
