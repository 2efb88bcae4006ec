"""The GLUE family: an encoder fine-tuned with one method (full fine-tuning or a parameter-efficient one) on one GLUE
task per run and seed, scored on the dev split. The tier's `finetune` section holds its budget, seeds and method
defaults.

A run's seed drives everything; a head seed and an order seed can be told apart (training.run_seeds: the fresh
weights vs the training sample, data order and dropout). A measurement with `seeds: all` sweeps the tier's grid of
(head seed, order seed) pairs (finetune.seed_grid): a curve along the `seed` axis, one point per pair, judged by
trend checks such as `spreads` (Dodge et al. 2020, P12).

`linear-cka` (P7: Merchant et al. 2020) measures what full fine-tuning changed, per layer: linear CKA between the
pre-trained and the fine-tuned encoder's token vectors on the task's scored dev examples (for a causal LM, such as
SmolLM2: its lm-tasks full fine-tuning, over the prompts of the dev sample lm-eval scored). Its metric is `mean`: the
mean of per-example jackknife pseudo-values (methods/cka.py), one point per layer with `layer: all`."""
from __future__ import annotations

from ...data.glue import TASKS
from ...errors import UserError
from ...methods import FINETUNING_METHODS
from ..family import LORA_PARAMS, PREFIX_PARAMS, Family, Layout
from ..probing import LAYER_WHAT, _is_layer, depth

CORRELATION = ("pearson", "spearman")
CLASSIFICATION = ("accuracy", "f1", "matthews")
CKA = "linear-cka"  # what full fine-tuning changed per layer; metric `mean` (of jackknife pseudo-values), and only it


SEEDS_WHAT = ("'all' (every (head seed, order seed) pair of the tier's finetune.seed_grid) or a list of at least two "
              "[head_seed, order_seed] pairs of integers")


def _is_seeds(v) -> bool:
    if v == "all":
        return True
    pair = lambda p: (isinstance(p, list) and len(p) == 2  # noqa: E731
                      and all(isinstance(s, int) and not isinstance(s, bool) for s in p))
    return isinstance(v, list) and len(v) >= 2 and all(pair(p) for p in v) and len({tuple(p) for p in v}) == len(v)


def check_tier(claim, m, asset: str, spec: dict, arch: str | None, tier: dict) -> None:
    where = f"{claim.path}: field 'measurements.{m.name}"
    metrics = {claim.protocol.get("task_metrics", {}).get(b, claim.protocol["metric"]) for b in claim.protocol["benchmarks"]}
    if (m.method == CKA) != (metrics == {"mean"}):
        raise UserError(f"{where}.method': got {m.method!r} with metric(s) {', '.join(sorted(metrics))}; 'mean' is the "
                        f"metric of {CKA} (mean jackknife CKA) and of nothing else: one claim per kind of measurement")
    if m.method == CKA:
        layer = m.params.get("layer")
        if layer is None:
            raise UserError(f"{where}.params': {CKA} needs 'layer': {LAYER_WHAT}")
        n = depth(tier, asset) if spec["kind"] in ("pretrain-mlm", "transformer", "causal-lm") else None
        if isinstance(layer, int) and n is not None and layer > n:
            raise UserError(f"{where}.params.layer': got {layer}; tier {tier['name']} maps role '{m.role}' to '{asset}', "
                            f"which has layers 0-{n}: use 'k/n' to name a layer of a paper's stack")
    if m.method == "prefix-tuning" and arch in ("bert", "roberta"):
        raise UserError(f"{claim.path}: field 'measurements.{m.name}.method': got 'prefix-tuning'; peft cannot prefix-tune "
                        f"{arch} encoders ('{asset}' at tier {tier['name']}) under transformers 5: use family lm-tasks")


FAMILY = Family(
    name="glue",
    package="glue",
    evaluators=("glue-dev",),
    metrics=CORRELATION + CLASSIFICATION + ("mean",),
    methods=tuple(FINETUNING_METHODS) + (CKA,),
    benchmarks=tuple(TASKS),
    # a regression task (one label) is scored by correlation, the others as classification
    benchmark_metrics={t: (CORRELATION if n == 1 else CLASSIFICATION) + ("mean",) for t, (_, n) in TASKS.items()},
    # every method reads `seeds` (a sweep of the seed grid): training.init_model draws any method's fresh weights
    method_params={m: ps + ("seeds",) for m, ps in {
        "full-finetuning": ("lr",), "bitfit": ("lr",), "adapter": ("size", "lr"), "lora": LORA_PARAMS,
        "prefix-tuning": PREFIX_PARAMS, "prompt-tuning": ("virtual_tokens", "lr")}.items()} | {CKA: ("layer", "lr")},
    param_types={"seeds": (SEEDS_WHAT, _is_seeds), "layer": (LAYER_WHAT, _is_layer)},
    axes={"seed": "seeds", "layer": "layer"},
    protocol={"split": ("dev",), "similarity": None, "text_form": None},
    controls=False,
    # `finetuned`: the same run as `finetune` (same fields, tier view and parameters, so the same training and dev
    # predictions) that also keeps the trained model in model/ beside its metrics.json; planned only for a run that
    # reads the weights (plan.finetuned_run)
    layouts={"finetune": Layout("results", "runs/finetune/{instance}/{method}/{task}/s{seed}/{key}", "metrics.json"),
             "finetuned": Layout("results", "runs/finetuned/{instance}/{method}/{task}/s{seed}/{key}", "metrics.json"),
             # linear-cka: every layer's CKA for one fine-tuned model (cka.npz: per-example pseudo-values), then one
             # run per layer in the score-run layout, which the verdict reads
             "cka": Layout("results", "runs/cka/{instance}/{method}/{task}/s{seed}/{key}", "metrics.json"),
             "cka-layer": Layout("results", "runs/cka-layer/{instance}/{method}/{task}/s{seed}/l{layer}/{key}",
                                 "metrics.json")},
    trains=True,
    tier_section="finetune",
    check_tier=check_tier,
)
