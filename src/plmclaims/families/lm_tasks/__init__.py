"""The lm-tasks family: a causal LM scored by lm-eval on multiple-choice tasks generated from the local GLUE files,
zero-shot or after training with one method per task and seed. The tier's `lm` section holds its budget, seeds,
method defaults and evaluation limit."""
from __future__ import annotations

from ...lm.tasks import TEMPLATES
from ...lm.train import METHODS
from ..family import LORA_PARAMS, PREFIX_PARAMS, Family, Layout

FAMILY = Family(
    name="lm-tasks",
    package="lm_tasks",
    evaluators=("lm-eval",),
    metrics=("accuracy", "f1", "matthews"),
    methods=("zero-shot",) + METHODS,
    benchmarks=tuple(TEMPLATES),  # the tasks lm/tasks.py has prompt templates for
    method_params={"full-finetuning": ("lr",), "zero-shot": (), "lora": LORA_PARAMS, "prefix-tuning": PREFIX_PARAMS,
                   "prompt-tuning": ("virtual_tokens", "init_text", "lr")},
    protocol={"split": ("dev",), "similarity": None, "text_form": None},
    controls=False,
    layouts={
        "lm_tasks": Layout("results", "runs/lm-tasks/{task}/{key}", "tasks.json"),
        "lm": Layout("results", "runs/lm/{instance}/{method}/{task}/s{seed}/{key}", "metrics.json"),  # + train.json, model/
    },
    trains=True,
    tier_section="lm",
)
