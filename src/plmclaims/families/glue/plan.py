"""GLUE measurements to runs: one fine-tuning run per (instance, method, task, seed), scored on the dev split."""
from __future__ import annotations

from ...claims import Claim, Measurement
from ...data import verify
from ...plan import PlannedMeasurement, Run, asset_view, make_run, merge, model_run, pick, plan_task_runs

ENCODER_KINDS = {"pretrain-mlm", "transformer"}


def finetune_run(tier: dict, instance: str, method: str, task: str, seed: int, params: dict) -> Run:
    """One trained model scored on one task's dev split: metrics.json holds the scores, parameter counts and peak
    memory; predictions.npz the dev predictions in the score-run layout."""
    model = model_run(tier, instance)
    view = merge(pick(tier, "data.glue", "finetune.budget"), asset_view(tier, instance))
    fields = {"instance": instance, "method": method, "task": task, "seed": int(seed)}
    return make_run("finetune", fields, view, (model,) if model else (), params)


def plan_measurement(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, role: dict) -> PlannedMeasurement:
    run_of = lambda instance, task, seed, params: finetune_run(tier, instance, m.method, task, seed, params)  # noqa: E731
    return plan_task_runs(claim, m, tier, pm, role, run_of, ENCODER_KINDS)


def data_files(run: Run, tier: dict, data_root: str | None) -> list[str]:
    return verify.glue_files(tier, run.task, data_root)
