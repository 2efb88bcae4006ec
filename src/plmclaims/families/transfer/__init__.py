"""The transfer family (issue 11: T4, Lu et al. 2021 "Pretrained Transformers as Universal Computation Engines"):
a pre-trained transformer frozen except its input layer, output head, position embeddings and LayerNorms (the
Frozen Pretrained Transformer), trained on non-language tasks the workflow generates itself (data.synthetic:
bit memory, bit XOR, ListOps), against the same architecture with random weights frozen the same way.

One `transfer` run per (instance, task, seed): the tier's `transfer` section holds the budget (steps, batch size,
training and test examples), the task sizes and the data seed (the same generated items for every run, so a
pre-trained run and its twin are paired item by item). A run scores the held-out generated test items as accuracy;
chance is the majority class of the gold items (bits: 50%, ListOps' balanced answers: 10%).

A measurement's `params: {weights: random}` measures the random-weights twins (the tier's
controls.random_weights_seeds) instead of the role's pre-trained instances, so a claim can set the two side by side
in a `greater` check; `controls: [random-weights]` also plans the twins beside the pre-trained measurement (its floor)."""
from __future__ import annotations

from ...data.synthetic import TASKS
from ..family import Family, Layout

METHOD = "frozen-transfer"
ENCODER_KINDS = ("pretrain-mlm", "transformer", "causal-lm")  # Lu et al. froze GPT-2, a decoder
WEIGHTS_WHAT = ("'pretrained' (the role's weights; the default) or 'random' (the same architecture with random "
                "weights: the tier's random-weights twins)")

FAMILY = Family(
    name="transfer",
    package="transfer",
    evaluators=("synthetic",),
    metrics=("accuracy",),
    methods=(METHOD,),
    benchmarks=tuple(TASKS),
    method_params={METHOD: ("weights", "lr")},
    param_types={"weights": (WEIGHTS_WHAT, lambda v: v in ("pretrained", "random"))},
    protocol={"split": ("test",), "similarity": None, "text_form": None},
    layouts={"transfer": Layout("results", "runs/transfer/{instance}/{task}/s{seed}/{key}", "metrics.json")},
    # its runs train (and record) parameters, but no claim asks for a trained-params ratio yet: left off so the
    # refusal message of such a ratio elsewhere (tests/bad_claims/EXPECTED.yaml) keeps naming glue and lm-tasks
    trains=False,
    tier_section="transfer",
)
