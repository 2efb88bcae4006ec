"""The GLUE family: an encoder fine-tuned with one method (full fine-tuning or a parameter-efficient one) on one GLUE
task per run and seed, scored on the dev split. The tier's `finetune` section holds its budget, seeds and method
defaults."""
from __future__ import annotations

from ...data.glue import TASKS
from ...errors import UserError
from ...methods import FINETUNING_METHODS
from ..family import LORA_PARAMS, PREFIX_PARAMS, Family, Layout

CORRELATION = ("pearson", "spearman")
CLASSIFICATION = ("accuracy", "f1", "matthews")


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
    method_params={"full-finetuning": ("lr",), "bitfit": ("lr",), "adapter": ("size", "lr"), "lora": LORA_PARAMS,
                   "prefix-tuning": PREFIX_PARAMS, "prompt-tuning": ("virtual_tokens", "lr")},
    protocol={"split": ("dev",), "similarity": None, "text_form": None},
    controls=False,
    layouts={"finetune": Layout("results", "runs/finetune/{instance}/{method}/{task}/s{seed}/{key}", "metrics.json")},
    trains=True,
    tier_section="finetune",
    check_tier=check_tier,
)
