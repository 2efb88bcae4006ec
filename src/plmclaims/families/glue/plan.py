"""GLUE measurements to runs: one fine-tuning run per (instance, method, task, seed), scored on the dev split; a
measurement with `seeds` sweeps the tier's grid of (head seed, order seed) pairs instead (a curve along the seed
axis, one point per pair)."""
from __future__ import annotations

from ...claims import Claim, Measurement
from ...data import verify
from ...errors import UserError
from ...plan import (PlannedMeasurement, Run, asset_view, make_run, merge, method_params, model_run, pick,
                     plan_task_runs)
from ..probing import depth, resolve_layer
from . import CKA

ENCODER_KINDS = {"pretrain-mlm", "transformer"}


def finetune_run(tier: dict, instance: str, method: str, task: str, seed: int, params: dict) -> Run:
    """One trained model scored on one task's dev split: metrics.json holds the scores, parameter counts and peak
    memory; predictions.npz the dev predictions in the score-run layout."""
    model = model_run(tier, instance)
    # the task's own GLUE source (the hub for a task in data.glue.hub_tasks), so a local task's key ignores hub_tasks
    data = {"data": {"glue": verify.glue_source(tier, task)}} if "glue" in tier.get("data", {}) else {}
    view = merge(data, pick(tier, "finetune.budget"), asset_view(tier, instance))
    fields = {"instance": instance, "method": method, "task": task, "seed": int(seed)}
    return make_run("finetune", fields, view, (model,) if model else (), params)


def finetuned_run(tier: dict, instance: str, method: str, task: str, seed: int, params: dict) -> Run:
    """finetune_run's twin that also saves the trained model (encoder + task head, and the tokenizer) in `model/`
    beside its metrics.json, loadable with AutoModelForSequenceClassification.from_pretrained(<run dir>/model).

    Same arguments, fields, tier view, upstream and parameters as finetune_run(tier, instance, method, task, seed,
    params): the same training, so its metrics.json values and predictions.npz equal that run's, and anything that
    changes the model changes its key. A separate kind (not a flag on `finetune`) so that no existing run's key or
    folder changes and the weights are kept only where a downstream run reads them. Methods: training.SAVABLE_METHODS
    (a LoRA model is saved with the update merged)."""
    from ...training import SAVABLE_METHODS

    if method not in SAVABLE_METHODS:
        raise UserError(f"glue finetuned run: method {method!r} leaves no plain transformers model to save; "
                        f"allowed values: {', '.join(SAVABLE_METHODS)}")
    run = finetune_run(tier, instance, method, task, seed, params)
    return make_run("finetuned", run.spec["fields"], run.spec["tier"], run.upstream, run.spec["params"])


def saved_twin(run: Run) -> Run | None:
    """The `finetuned` run of a `finetune` run's very training (finetuned_run of the same spec), or None for a method
    whose model cannot be saved. Where the workflow plans both, the finetune job copies the twin's scores and
    predictions instead of training the same model a second time (glue.runs.copy_saved_twin)."""
    from ...training import SAVABLE_METHODS

    if run.kind != "finetune" or run.method not in SAVABLE_METHODS:
        return None
    return make_run("finetuned", run.spec["fields"], run.spec["tier"], run.upstream, run.spec["params"])


def grid_run(tier: dict, instance: str, method: str, task: str, head: int, order: int, params: dict) -> Run:
    """The run of one grid point. Its seed (folder s<seed>, training sample, data order, dropout) is the order seed;
    a head seed that differs is a method parameter. So the point (s, s) is the plain run of seed s, key and all, and
    a grid reuses every run another claim already has for its seeds."""
    extra = {} if head == order else {"head_seed": int(head)}
    return finetune_run(tier, instance, method, task, order, {**params, **extra})


def cka_run(tier: dict, instance: str, task: str, seed: int, params: dict) -> Run:
    """Linear CKA of every layer between the pre-trained instance and its fully fine-tuned twin (the `finetuned` run
    of the same spec as the `finetune` run a full-finetuning claim plans), on the task's scored dev examples:
    metrics.json holds each layer's CKA, cka.npz the per-example jackknife pseudo-values."""
    tuned = finetuned_run(tier, instance, "full-finetuning", task, seed, params)
    model = model_run(tier, instance)
    fields = {"instance": instance, "method": CKA, "task": task, "seed": int(seed)}
    return make_run("cka", fields, tuned.spec["tier"], (tuned,) + ((model,) if model else ()))


def cka_layer_run(tier: dict, instance: str, task: str, seed: int, layer: int, params: dict) -> Run:
    """One layer of a cka run in the score-run layout (per-example pseudo-values): a point of the layer curve."""
    up = cka_run(tier, instance, task, seed, params)
    fields = {**up.spec["fields"], "layer": int(layer)}
    return make_run("cka-layer", fields, up.spec["tier"], (up,))


def plan_cka(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, role: dict) -> PlannedMeasurement:
    """One cka-layer run per task and seed at the measurement's layer, or a curve over every layer (`layer: all`).
    The fine-tuning is full fine-tuning with the tier's defaults for it, overridden by the claim's `lr`."""
    n = depth(tier, role["asset"])
    if n is None:
        return pm.not_run(f"tier {tier['name']} does not state how many layers '{role['asset']}' has "
                          f"(probing.layers.{role['asset']})")
    params = {**tier.get("finetune", {}).get("methods", {}).get("full-finetuning", {}),
              **{k: v for k, v in m.params.items() if k != "layer"}}

    def at(layer: int) -> PlannedMeasurement:
        one = PlannedMeasurement(pm.name, m)
        run_of = lambda instance, task, seed, _: cka_layer_run(tier, instance, task, seed, layer, params)  # noqa: E731
        return plan_task_runs(claim, m, tier, one, role, run_of, ENCODER_KINDS)

    if m.params["layer"] != "all":
        planned = at(resolve_layer(m.params["layer"], n))
        return pm.not_run(planned.reason) if planned.status != "ok" else _with_runs(pm, planned.runs)
    first = at(0)
    if first.status != "ok":
        return pm.not_run(first.reason)
    return pm.set_curve({layer: at(layer).runs for layer in range(n + 1)})


def _with_runs(pm: PlannedMeasurement, runs: list[Run]) -> PlannedMeasurement:
    pm.runs = runs
    return pm


def grid_points(tier: dict, m: Measurement) -> list[tuple[int, int]] | None:
    """The (head seed, order seed) pairs a measurement sweeps: `seeds: all` is the tier's finetune.seed_grid (every
    head seed with every order seed, head-major: x = head index * len(order) + order index), a list names its pairs.
    None: the tier has no grid."""
    seeds = m.params["seeds"]
    if seeds != "all":
        return [(int(h), int(o)) for h, o in seeds]
    grid = tier.get("finetune", {}).get("seed_grid")
    return None if grid is None else [(h, o) for h in grid["head"] for o in grid["order"]]


def plan_measurement(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, role: dict) -> PlannedMeasurement:
    if m.method == CKA:
        return plan_cka(claim, m, tier, pm, role)
    run_of = lambda instance, task, seed, params: finetune_run(tier, instance, m.method, task, seed, params)  # noqa: E731
    pm = plan_task_runs(claim, m, tier, pm, role, run_of, ENCODER_KINDS)
    if "seeds" not in m.params or pm.status != "ok":
        return pm
    # a seed grid: the same checks, tasks and instance as one run per seed, then one run per task at each grid point
    points = grid_points(tier, m)
    if points is None:
        return pm.not_run(f"tier {tier['name']} has no seed grid (finetune.seed_grid) for 'seeds: all'")
    instance = pm.runs[0].instance
    tasks = list(dict.fromkeys(r.task for r in pm.runs))
    params = {k: v for k, v in method_params(tier, "finetune", m).items() if k != "seeds"}
    return pm.set_curve({x: [grid_run(tier, instance, m.method, t, h, o, params) for t in tasks] for x, (h, o) in enumerate(points)})


def grid_skipped(claim: Claim, tier: dict) -> dict[str, str]:
    """The claim's tasks outside the tier's finetune.seed_grid.tasks, with the reason, for a claim that sweeps the
    grid (a test tier runs its grid on one task). plan.skipped_tasks adds these to the section's skip_tasks, so the
    planner and the verdict leave them out alike."""
    grid = tier.get("finetune", {}).get("seed_grid", {})
    if "tasks" not in grid or not any(m.params.get("seeds") == "all" for m in claim.measurements.values()):
        return {}
    why = f"the tier's seed grid runs on {', '.join(grid['tasks'])} only (finetune.seed_grid.tasks)"
    return {t: why for t in claim.protocol["benchmarks"] if t not in grid["tasks"]}


def data_files(run: Run, tier: dict, data_root: str | None) -> list[str]:
    if run.kind == "cka-layer":
        return []  # reads its cka run's arrays only
    return verify.glue_files(tier, run.task, data_root)
