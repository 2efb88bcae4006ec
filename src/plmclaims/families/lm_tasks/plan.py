"""lm-tasks measurements to runs: per task, the lm-eval task files generated from the local GLUE dev file, and one
run per (instance, method, task, seed) that trains (unless zero-shot) and is scored by lm-eval."""
from __future__ import annotations

from ... import recipes
from ...claims import Claim, Measurement
from ...data import verify
from ...plan import LAYOUTS, PlannedMeasurement, Run, asset_view, make_run, merge, model_run, pick, plan_task_runs


def lm_tasks_run(tier: dict, task: str) -> Run:
    """The lm-eval task YAML and JSONL docs of one task, generated from the local GLUE dev file."""
    return make_run("lm_tasks", {"task": task}, pick(tier, "data.glue", "lm.eval_limit"))


def lm_run(tier: dict, instance: str, method: str, task: str, seed: int, params: dict) -> Run:
    """A causal LM trained with `method` on one task (nothing for zero-shot), then scored by lm-eval."""
    model = model_run(tier, instance)
    up = ((model,) if model else ()) + (lm_tasks_run(tier, task),)
    if method == "zero-shot":  # trains nothing: the training budget and data cannot change its result
        view = pick(tier, "lm.eval_limit", "lm.eval_batch_size")
    else:  # the method's recipe for this model and task over the tier's budget (plmclaims.recipes)
        budget = recipes.budget(tier, "lm", method, instance.partition(".")[0], task)
        view = merge(pick(tier, "data.glue", "lm.eval_limit", "lm.eval_batch_size"), {"lm": {"budget": budget}})
    fields = {"instance": instance, "method": method, "task": task, "seed": int(seed)}
    return make_run("lm", fields, merge(view, asset_view(tier, instance)), up, params)


def plan_measurement(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, role: dict) -> PlannedMeasurement:
    run_of = lambda instance, task, seed, params: lm_run(tier, instance, m.method, task, seed, params)  # noqa: E731
    return plan_task_runs(claim, m, tier, pm, role, run_of, {"causal-lm"})


def data_files(run: Run, tier: dict, data_root: str | None) -> list[str]:
    if run.kind == "lm_tasks":
        return verify.glue_files(tier, run.task, data_root, splits=("dev",))
    return [] if run.method == "zero-shot" else verify.glue_files(tier, run.task, data_root, splits=("train",))


def lm_tasks_dir(results: str, run: Run) -> str:
    """The lm-eval task folder an lm run reads, at the key it was planned with (the run's own tier view lacks the
    GLUE source that key covers, so it is read from the spec, not recomputed)."""
    return f"{results}/{LAYOUTS['lm_tasks'].folder.format(task=run.task, key=run.spec['upstream']['lm_tasks'])}"
