"""The GLUE family: an encoder fine-tuned with one method (full fine-tuning or a parameter-efficient one) on one GLUE
task per run and seed, scored on the dev split. The tier's `finetune` section holds its budget, seeds and method
defaults.

A run's seed drives everything; a head seed and an order seed can be told apart (training.run_seeds: the fresh
weights vs the training sample, data order and dropout). A measurement with `seeds: all` sweeps the tier's grid of
(head seed, order seed) pairs (finetune.seed_grid): a curve along the `seed` axis, one point per pair, judged by
trend checks such as `spreads` (Dodge et al. 2020, P12)."""
from __future__ import annotations

from ...data.glue import TASKS
from ...errors import UserError
from ...methods import FINETUNING_METHODS
from ..family import LORA_PARAMS, PREFIX_PARAMS, Family, Layout

CORRELATION = ("pearson", "spearman")
CLASSIFICATION = ("accuracy", "f1", "matthews")


SEEDS_WHAT = ("'all' (every (head seed, order seed) pair of the tier's finetune.seed_grid) or a list of at least two "
              "[head_seed, order_seed] pairs of integers")


def _is_seeds(v) -> bool:
    if v == "all":
        return True
    pair = lambda p: (isinstance(p, list) and len(p) == 2  # noqa: E731
                      and all(isinstance(s, int) and not isinstance(s, bool) for s in p))
    return isinstance(v, list) and len(v) >= 2 and all(pair(p) for p in v) and len({tuple(p) for p in v}) == len(v)


def check_tier(claim, m, asset: str, spec: dict, arch: str | None, tier: dict) -> None:
    if m.method == "prefix-tuning" and arch in ("bert", "roberta"):
        raise UserError(f"{claim.path}: field 'measurements.{m.name}.method': got 'prefix-tuning'; peft cannot prefix-tune "
                        f"{arch} encoders ('{asset}' at tier {tier['name']}) under transformers 5: use family lm-tasks")


FAMILY = Family(
    name="glue",
    package="glue",
    evaluators=("glue-dev",),
    metrics=CORRELATION + CLASSIFICATION,
    methods=tuple(FINETUNING_METHODS),
    benchmarks=tuple(TASKS),
    # a regression task (one label) is scored by correlation, the others as classification
    benchmark_metrics={t: CORRELATION if n == 1 else CLASSIFICATION for t, (_, n) in TASKS.items()},
    # every method reads `seeds` (a sweep of the seed grid): training.init_model draws any method's fresh weights
    method_params={m: ps + ("seeds",) for m, ps in {
        "full-finetuning": ("lr",), "bitfit": ("lr",), "adapter": ("size", "lr"), "lora": LORA_PARAMS,
        "prefix-tuning": PREFIX_PARAMS, "prompt-tuning": ("virtual_tokens", "lr")}.items()},
    param_types={"seeds": (SEEDS_WHAT, _is_seeds)},
    axes={"seed": "seeds"},
    protocol={"split": ("dev",), "similarity": None, "text_form": None},
    controls=False,
    # `finetuned`: the same run as `finetune` (same fields, tier view and parameters, so the same training and dev
    # predictions) that also keeps the trained model in model/ beside its metrics.json; planned only for a run that
    # reads the weights (plan.finetuned_run)
    layouts={"finetune": Layout("results", "runs/finetune/{instance}/{method}/{task}/s{seed}/{key}", "metrics.json"),
             "finetuned": Layout("results", "runs/finetuned/{instance}/{method}/{task}/s{seed}/{key}", "metrics.json")},
    trains=True,
    tier_section="finetune",
    check_tier=check_tier,
)
