"""GLUE measurements to runs: one fine-tuning run per (instance, method, task, seed), scored on the dev split; a
measurement with `seeds` sweeps the tier's grid of (head seed, order seed) pairs instead (a curve along the seed
axis, one point per pair)."""
from __future__ import annotations

from ... import recipes
from ...claims import Claim, Measurement
from ...data import verify
from ...errors import UserError
from ...plan import (PlannedMeasurement, Run, asset_view, make_run, merge, method_params, model_run,
                     plan_task_runs)
from ..probing import depth, resolve_layer
from . import CKA

ENCODER_KINDS = {"pretrain-mlm", "transformer"}


def finetune_budget(tier: dict, instance: str, method: str, task: str) -> dict:
    """The budget one fine-tuning run trains under, as its view holds it: the tier's budget with the method's recipe
    for this model and task over it (plmclaims.recipes), capped by a test tier's limit."""
    asset = instance.partition(".")[0]
    return {"finetune": {"budget": recipes.budget(tier, "finetune", method, asset, task)}} if "finetune" in tier else {}


def recipe_params(tier: dict, instance: str, method: str, task: str, claim_params: dict) -> dict:
    """The method's parameters for this model and task: its recipe's, the claim's over them."""
    return {**recipes.params(tier, "finetune", method, instance.partition(".")[0], task), **claim_params}


def finetune_run(tier: dict, instance: str, method: str, task: str, seed: int, params: dict) -> Run:
    """One trained model scored on one task's dev split: metrics.json holds the scores, parameter counts and peak
    memory; predictions.npz the dev predictions in the score-run layout."""
    model = model_run(tier, instance)
    # the task's own GLUE source (the hub for a task in data.glue.hub_tasks), so a local task's key ignores hub_tasks
    data = {"data": {"glue": verify.glue_source(tier, task)}} if "glue" in tier.get("data", {}) else {}
    view = merge(data, finetune_budget(tier, instance, method, task), asset_view(tier, instance))
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
    of the same spec as the `finetune` run a full-finetuning claim plans; for a causal LM the lm-tasks family's
    full-finetuning run, which saves the model), on the task's scored dev examples: metrics.json holds each layer's
    CKA, cka.npz the per-example jackknife pseudo-values."""
    if tier["assets"][instance.partition(".")[0]]["kind"] == "causal-lm":
        from ..lm_tasks.plan import lm_run

        tuned = lm_run(tier, instance, "full-finetuning", task, seed, lm_params(tier, instance, task, params))
    else:
        recipe = recipe_params(tier, instance, "full-finetuning", task, params)
        tuned = finetuned_run(tier, instance, "full-finetuning", task, seed, recipe)
    model = model_run(tier, instance)
    fields = {"instance": instance, "method": CKA, "task": task, "seed": int(seed)}
    return make_run("cka", fields, tuned.spec["tier"], (tuned,) + ((model,) if model else ()))


def cka_layer_run(tier: dict, instance: str, task: str, seed: int, layer: int, params: dict) -> Run:
    """One layer of a cka run in the score-run layout (per-example pseudo-values): a point of the layer curve."""
    up = cka_run(tier, instance, task, seed, params)
    fields = {**up.spec["fields"], "layer": int(layer)}
    return make_run("cka-layer", fields, up.spec["tier"], (up,))


def lm_params(tier: dict, instance: str, task: str, claim_params: dict) -> dict:
    """A causal LM's full fine-tuning parameters for one task: the lm section's recipe, the claim's over it (the same
    parameters, so the same runs, as the lm-tasks family's own full-finetuning measurements)."""
    return {**recipes.params(tier, "lm", "full-finetuning", instance.partition(".")[0], task), **claim_params}


def lm_cka_skipped(claim: Claim, tier: dict) -> dict[str, str]:
    """The claim's tasks a causal LM's CKA leaves out, with the reason: the LM budget's skip_tasks, tasks without an lm
    prompt template, and tasks outside lm.cka_tasks where the tier names them (the fine-tunings it already runs)."""
    from ...lm.tasks import TEMPLATES

    section = tier.get("lm", {})
    out = dict(section.get("skip_tasks", {}))
    for t in claim.protocol["benchmarks"]:
        if t not in TEMPLATES:
            out.setdefault(t, "no lm prompt template for this task (lm.tasks.TEMPLATES)")
        elif "cka_tasks" in section and t not in section["cka_tasks"]:
            out.setdefault(t, f"the tier reads the causal LM's full fine-tunings of {', '.join(section['cka_tasks'])} "
                              "only (lm.cka_tasks)")
    return {t: why for t, why in out.items() if t in claim.protocol["benchmarks"]}


def role_skipped(claim: Claim, tier: dict, role: str) -> dict[str, str] | None:
    """The tasks a role's measurements leave out where they run under another family's budget (plan.skipped_tasks):
    a causal LM's CKA (lm_cka_skipped); None for the family's own encoders."""
    asset = tier["roles"].get(role, {}).get("asset")
    if asset is None or tier["assets"][asset]["kind"] != "causal-lm":
        return None
    return lm_cka_skipped(claim, tier)


def _plan_lm_cka(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, role: dict, layers: list[int]):
    """A causal LM's CKA points: per layer, one run per task and seed of the lm budget (lm.seeds), on the lm-tasks
    family's full fine-tuning with the tier's lm defaults for it, overridden by the claim's `lr`."""
    from ...tiers import instances

    section = tier.get("lm")
    if section is None:
        return None, f"tier {tier['name']} has no 'lm' budget (the causal LM's full fine-tuning)"
    skipped = lm_cka_skipped(claim, tier)
    tasks = [t for t in claim.protocol["benchmarks"] if t not in skipped]
    if not tasks:
        why = "; ".join(f"{t}: {w}" for t, w in skipped.items())
        return None, f"the causal LM's CKA runs none of the claim's tasks: {why}"
    params = {k: v for k, v in m.params.items() if k != "layer"}  # the claim's: cka_run lays them on the recipe
    instance = instances(tier, role["asset"])[0].name
    return {layer: [cka_layer_run(tier, instance, t, s, layer, params) for t in tasks for s in section["seeds"]]
            for layer in layers}, ""


def plan_cka(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, role: dict) -> PlannedMeasurement:
    """One cka-layer run per task and seed at the measurement's layer, or a curve over every layer (`layer: all`).
    The fine-tuning is full fine-tuning with the tier's recipe for it, overridden by the claim's `lr`."""
    n = depth(tier, role["asset"])
    if n is None:
        return pm.not_run(f"tier {tier['name']} does not state how many layers '{role['asset']}' has "
                          f"(probing.layers.{role['asset']})")
    if tier["assets"][role["asset"]]["kind"] == "causal-lm":
        curve = m.params["layer"] == "all"
        layers = list(range(n + 1)) if curve else [resolve_layer(m.params["layer"], n)]
        points, why = _plan_lm_cka(claim, m, tier, pm, role, layers)
        if points is None:
            return pm.not_run(why)
        return pm.set_curve(points) if curve else _with_runs(pm, points[layers[0]])
    params = {k: v for k, v in m.params.items() if k != "layer"}  # the claim's: cka_run lays them on the recipe

    def at(layer: int) -> PlannedMeasurement:
        one = PlannedMeasurement(pm.name, m)
        run_of = lambda instance, task, seed, _: cka_layer_run(tier, instance, task, seed, layer, params)  # noqa: E731
        return plan_task_runs(claim, m, tier, one, role, run_of, ENCODER_KINDS, recipe="full-finetuning")

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


def _plan_lm_seeds(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, role: dict) -> PlannedMeasurement:
    """A seed curve of a causal LM's full fine-tuning (Dodge et al.'s spread, P12): one point per seed of the lm
    budget (lm.seeds), each the lm-tasks family's run of that seed on every task the tier fine-tunes the LM on. The
    LM reads its labels through its own output layer, so no head seed exists apart from the training seed (data
    order, dropout): the curve has one factor where the encoder's grid has two."""
    from ...tiers import instances
    from ..lm_tasks.plan import lm_run

    section = tier.get("lm")
    if section is None:
        return pm.not_run(f"tier {tier['name']} has no 'lm' budget (the causal LM's full fine-tuning)")
    if m.method != "full-finetuning":
        return pm.not_run(f"a causal LM's seed curve is of its full fine-tuning, not {m.method}")
    skipped = lm_cka_skipped(claim, tier)
    tasks = [t for t in claim.protocol["benchmarks"] if t not in skipped]
    if not tasks:
        return pm.not_run("the causal LM is fine-tuned on none of the claim's tasks: "
                          + "; ".join(f"{t}: {w}" for t, w in skipped.items()))
    claim_params = {k: v for k, v in m.params.items() if k != "seeds"}
    instance = instances(tier, role["asset"])[0].name
    return pm.set_curve({x: [lm_run(tier, instance, "full-finetuning", t, int(s),
                                    lm_params(tier, instance, t, claim_params)) for t in tasks]
                         for x, s in enumerate(section["seeds"])})


def plan_measurement(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, role: dict) -> PlannedMeasurement:
    if m.method == CKA:
        return plan_cka(claim, m, tier, pm, role)
    if "seeds" in m.params and tier["assets"][role["asset"]]["kind"] == "causal-lm":
        return _plan_lm_seeds(claim, m, tier, pm, role)
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
    asset = instance.partition(".")[0]
    params = {t: {k: v for k, v in method_params(tier, "finetune", m, asset, t).items() if k != "seeds"} for t in tasks}
    return pm.set_curve({x: [grid_run(tier, instance, m.method, t, h, o, params[t]) for t in tasks]
                         for x, (h, o) in enumerate(points)})


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
