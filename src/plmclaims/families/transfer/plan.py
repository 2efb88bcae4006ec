"""Transfer measurements to runs: one FPT run per (instance, task, seed) from the tier's `transfer` section; the
pre-trained instances of the role's asset, or (`weights: random`) its random-weights twins, which are also planned
beside a raw encoder's pre-trained runs when the claim asks for the random-weights control."""
from __future__ import annotations

from ... import recipes
from ...claims import Claim, Measurement
from ...data import synthetic
from ...plan import (PlannedMeasurement, Run, asset_view, make_run, merge, method_params, model_run, pick,
                     skipped_tasks, wants_twins)
from ...tiers import instances, random_twins
from . import ENCODER_KINDS, METHOD

SECTION = "transfer"


def transfer_run(tier: dict, instance: str, task: str, seed: int, params: dict) -> Run:
    """One FPT trained on one generated task and scored on its test items: metrics.json + predictions.npz."""
    # the method's recipe over the tier's budget
    budget = recipes.budget(tier, SECTION, METHOD, instance.partition(".")[0], task)
    view = merge(pick(tier, "transfer.data_seed", f"transfer.tasks.{task}"), {SECTION: {"budget": budget}},
                 asset_view(tier, instance))
    model = model_run(tier, instance)
    fields = {"instance": instance, "task": task, "seed": int(seed)}
    return make_run("transfer", fields, view, (model,) if model else (), params)


def positions(spec: dict) -> int | None:
    """How many positions an asset's position table has (None: not stated in the tier)."""
    return spec["model"]["max_length"] if spec["kind"] == "pretrain-mlm" else spec.get("max_length")


def plan_measurement(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, role: dict) -> PlannedMeasurement:
    asset = role["asset"]
    spec = tier["assets"][asset]
    if spec["kind"] not in ENCODER_KINDS:
        return pm.not_run(f"role '{m.role}' maps to asset '{asset}' of kind {spec['kind']}; the frozen-transformer "
                          f"transfer wraps a transformer ({', '.join(ENCODER_KINDS)})")
    section = tier.get(SECTION)
    if section is None:
        return pm.not_run(f"tier {tier['name']} has no '{SECTION}' section (budget, task sizes, seeds)")
    skipped = skipped_tasks(claim, tier)
    tasks = [t for t in claim.protocol["benchmarks"] if t not in skipped]
    if not tasks:
        return pm.not_run(f"tier {tier['name']} skips every task of the claim: " + "; ".join(
            f"{t}: {why}" for t, why in skipped.items()))
    n_pos = positions(spec)
    lengths = {t: synthetic.sequence_length(t, section.get("tasks", {}).get(t)) for t in tasks}
    long = {t: n for t, n in lengths.items() if n_pos is not None and n > n_pos}
    if long:
        return pm.not_run(f"'{asset}' has {n_pos} positions, fewer than the tokens of " + ", ".join(
            f"{t} ({n})" for t, n in long.items()) + f" at tier {tier['name']} (shorten transfer.tasks)")
    params = {k: v for k, v in method_params(tier, SECTION, m).items() if k != "weights"}
    random = m.params.get("weights") == "random"
    insts = random_twins(tier, asset) if random else instances(tier, asset)

    def runs(insts) -> list[Run]:
        return [transfer_run(tier, i.name, t, s, params) for t in tasks for i in insts for s in section["seeds"]]

    pm.runs = runs(insts)
    if not random and wants_twins(claim, m):
        pm.controls = runs(random_twins(tier, asset))
    return pm


def data_files(run: Run, tier: dict, data_root: str | None) -> list[str]:
    return []  # the tasks are generated from the tier's settings and seed
