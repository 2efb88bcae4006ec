"""Compression measurements to runs: one run per (instance, method, setting) that compresses the encoder, encodes
the STS sentences and scores them; the lexical cosines (and, for a raw encoder, its random-weights twin compressed
the same way) beside it. A GLUE claim (evaluator glue-dev): one run per (task, method, setting) that compresses the
glue family's fine-tuned model of the task and scores its dev split."""
from __future__ import annotations

from ...claims import Claim, Measurement
from ...data import glue, verify
from ...encoders import POOLINGS
from ...errors import UserError
from ...data import sts
from ...data.sts import SOURCE_OF_EVALUATOR
from ...plan import PlannedMeasurement, Run, asset_view, make_run, merge, model_run, pick, skipped_tasks
from ...tiers import instances, random_twins
from ..sts import plan as sts_plan
from . import FAMILY, GLUE_METHODS, ONNX_PACKAGE

ENCODER_KINDS = {"pretrain-mlm", "transformer"}
DISTILL_SOURCES = ("STSBenchmark", "SICK-R")  # their train splits: the distillation sentences, never a test set


def setting(method: str, params: dict) -> str:
    """The run folder's name for the method's setting (its one parameter), e.g. 'fraction-0.4', 'backend-torch'."""
    return "-".join(f"{k}-{v}" for k, v in sorted(params.items())) or "none"


# Methods whose one parameter is the share of the encoder taken away (the family's declaration): at 0 they mask no
# head and zero no weight.
FRACTION_METHODS = tuple(m for m, ps in FAMILY.method_params.items() if ps == ("fraction",))


def as_compressed(method: str, params: dict) -> tuple[str, dict]:
    """The (method, params) the plan runs for a measurement's setting: a fraction of 0 is the encoder as it is, so a
    curve's first point is the uncompressed run itself (the same vectors, computed once and shared) rather than a
    second run under another name. tests/test_compression_family.py runs both pruners at 0 and checks that they
    score as the uncompressed model."""
    if method in FRACTION_METHODS and float(params.get("fraction", 1.0)) == 0.0:
        return "uncompressed", {}
    return method, params


def compress_run(tier: dict, evaluator: str, instance: str, form: str, method: str, params: dict) -> Run:
    source = SOURCE_OF_EVALUATOR[evaluator]
    view = merge(pick(tier, f"data.{source}", "data.max_pairs", "encode", "compression"), asset_view(tier, instance))
    if method != "distillation":  # the distillation budget changes only the distilled runs
        view.get("compression", {}).pop("distill", None)
    view.get("compression", {}).pop("max_curve_points", None)  # which points a curve has, not what one point is
    model = model_run(tier, instance)
    fields = {"evaluator": evaluator, "instance": instance, "form": form, "method": method, "setting": setting(method, params)}
    return make_run("compress", fields, view, (model,) if model else (), params)


FINETUNING = "full-finetuning"  # how the compressed GLUE model is trained: the papers compress fully fine-tuned BERT


def compress_glue_run(tier: dict, instance: str, task: str, seed: int, method: str, params: dict) -> Run:
    """Compress the glue family's fine-tuned model of `task` (full fine-tuning, `seed`) and score the task's dev split.
    Its view is the fine-tuned run's (which it reads) plus the head-importance sample; its upstream that run."""
    from ..glue.plan import finetuned_run, recipe_params

    model = finetuned_run(tier, instance, FINETUNING, task, seed, recipe_params(tier, instance, FINETUNING, task, {}))
    view = merge(model.spec["tier"], pick(tier, "compression.importance_pairs", "compression.importance_batch")
                 if method == "head-pruning" else {})
    fields = {"instance": instance, "task": task, "method": method, "setting": setting(method, params), "seed": int(seed)}
    return make_run("compress-glue", fields, view, (model,), params)


def offline_unavailable(claim: Claim, tier: dict) -> dict[str, str]:
    """A GLUE claim's tasks that the tier's GLUE source lacks (MNLI and QQP are hub-only), with the reason: the
    planner and the verdict leave them out alike (plan.skipped_tasks), so a tier runs the claim on what it has. A
    task the local source lists in `hub_tasks` is read from the hub (verify.glue_source), so it is available."""
    if claim.protocol.get("evaluator") != "glue-dev" or "glue" not in tier.get("data", {}):
        return {}
    return {t: f"{t} is hub-only: the tier reads GLUE from the local release (data.glue); list it in data.glue.hub_tasks "
               "to read it from the hub"
            for t in claim.protocol["benchmarks"]
            if verify.glue_source(tier, t)["source"] == "local" and (t, "train") not in glue.KNOWN_COUNTS}


grid_skipped = offline_unavailable  # the name plan.skipped_tasks looks up in a family's plan module


def plan_glue(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, role: dict) -> PlannedMeasurement:
    """One compress-glue run per task the tier runs (a curve: per task at each point), on the first instance of the
    role's asset fine-tuned with the tier's first fine-tuning seed."""
    if claim.controls:
        raise UserError(f"{claim.path}: field 'controls': the lexical and random-weights controls are STS runs, and a "
                        "glue-dev claim has none (its floor is the metric's chance score); remove it")
    if claim.protocol.get("split") != "dev":
        raise UserError(f"{claim.path}: field 'protocol.split': got {claim.protocol.get('split')!r}; a glue-dev claim "
                        "scores the dev split (GLUE test labels are not public); allowed values: dev")
    if m.method not in GLUE_METHODS:
        return pm.not_run(f"method {m.method} compresses a sentence encoder, not a fine-tuned classifier; allowed on GLUE: "
                          f"{', '.join(GLUE_METHODS)}")
    if m.method == "quantisation" and m.params.get("backend") == "onnx":
        return pm.not_run("the int8 ONNX build on PyPI is the sentence encoder, not a model fine-tuned on the task")
    if not tier.get("finetune", {}).get("seeds"):
        return pm.not_run(f"tier {tier['name']} has no 'finetune' budget with seeds to fine-tune the model it compresses")
    skipped = skipped_tasks(claim, tier)
    tasks = [t for t in claim.protocol["benchmarks"] if t not in skipped]
    if not tasks:
        return pm.not_run(f"tier {tier['name']} runs none of the claim's tasks: " + "; ".join(f"{t}: {w}" for t, w in skipped.items()))
    instance = instances(tier, role["asset"])[0].name
    seed = int(tier["finetune"]["seeds"][0])

    def runs(params: dict) -> list[Run]:
        return [compress_glue_run(tier, instance, t, seed, *as_compressed(m.method, params)) for t in tasks]

    if isinstance(m.params.get("fraction"), list):
        points = sweep_points(m.params["fraction"], tier["compression"].get("max_curve_points"))
        return pm.set_curve({f: runs({**m.params, "fraction": f}) for f in points})
    pm.runs = runs(m.params)
    return pm


def plan_measurement(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, role: dict) -> PlannedMeasurement:
    if "compression" not in tier:
        return pm.not_run(f"tier {tier['name']} has no 'compression' section")
    pooling = tier["compression"].get("pooling", "mean")
    if pooling not in POOLINGS:
        raise UserError(f"{tier.get('_path', tier['name'])}: field 'compression.pooling': got {pooling!r}; allowed values: "
                        f"{', '.join(POOLINGS)}")
    asset = role["asset"]
    spec = tier["assets"][asset]
    if spec["kind"] not in ENCODER_KINDS:
        return pm.not_run(f"role '{m.role}' maps to asset '{asset}' of kind {spec['kind']}, which has no weights to compress")
    if claim.protocol.get("evaluator") == "glue-dev":
        return plan_glue(claim, m, tier, pm, role)
    if claim.protocol.get("split", "test") != "test":
        raise UserError(f"{claim.path}: field 'protocol.split': got {claim.protocol['split']!r}; an STS claim scores the "
                        "test split; allowed values: test")
    if m.method == "quantisation" and m.params.get("backend") == "onnx" and spec.get("package") != ONNX_PACKAGE:
        return pm.not_run(f"the int8 ONNX build on PyPI is of all-MiniLM-L6-v2; tier {tier['name']} maps role "
                          f"'{m.role}' to '{asset}'")
    if m.method == "distillation" and "distill" not in tier["compression"]:
        return pm.not_run(f"tier {tier['name']} has no 'compression.distill' budget (sentences, steps, batch_size, lr, seed)")
    evaluator, form = sts_plan.evaluator_and_form(claim)
    twins = "random-weights" in claim.controls and m.role == "raw-encoder"

    def runs(params: dict) -> tuple[list[Run], list[Run]]:
        method, params = as_compressed(m.method, params)
        made = [compress_run(tier, evaluator, inst.name, form, method, params) for inst in instances(tier, asset)]
        return made, [compress_run(tier, evaluator, i.name, form, method, params) for i in random_twins(tier, asset)] if twins else []

    if isinstance(m.params.get("fraction"), list):  # a curve along the sparsity axis
        both = {f: runs({**m.params, "fraction": f})
                for f in sweep_points(m.params["fraction"], tier["compression"].get("max_curve_points"))}
        return pm.set_curve({f: made for f, (made, _) in both.items()},
                            {f: twin for f, (_, twin) in both.items() if twin})
    pm.runs, pm.controls = runs(m.params)
    return pm


def sweep_points(values: list, most: int | None) -> list:
    """The sweep's values, thinned to at most `most` evenly spaced ones (both ends kept) on a tier that caps curves."""
    if not most or len(values) <= most:
        return list(values)
    picks = sorted({round(i * (len(values) - 1) / (most - 1)) for i in range(most)})
    return [values[i] for i in picks]


def controls(claim: Claim, tier: dict) -> dict[str, Run]:
    """The bag-of-words and TF-IDF cosines on the same STS pairs: the floor an encoder must beat (none on GLUE)."""
    return {} if claim.protocol.get("evaluator") == "glue-dev" else sts_plan.controls(claim, tier)


def data_files(run: Run, tier: dict, data_root: str | None) -> list[str]:
    if run.kind == "compress-glue":  # head importance reads the task's train split; every method scores dev
        return verify.glue_files(tier, run.task, data_root, ("train", "dev") if run.method == "head-pruning" else ("dev",))
    files = verify.sts_files(tier, run.evaluator, run.form, data_root)
    source = tier["data"][SOURCE_OF_EVALUATOR[run.evaluator]]
    if run.method == "head-pruning" and source["source"] == "local":  # importance is computed on STS-B train
        files += [str(p) for p in sts.local_files(sts.local_root(source, data_root), "STSBenchmark", run.form, "train")]
    if run.method == "distillation" and source["source"] == "local":  # the student is trained on the train sentences
        files += [str(p) for name in DISTILL_SOURCES
                  for p in sts.local_files(sts.local_root(source, data_root), name, run.form, "train")]
    return files
