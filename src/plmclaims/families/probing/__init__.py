"""The probing family (issue 11: T2, P1): what one layer's word vectors hold, read by a probe fitted on a seeded
sample of UD English EWT train and scored on dev (or test).

Runs: one forward pass per (instance, scored split) keeps the word vectors (sub-word tokens averaged per UD word) of
every layer for the sampled sentences; then one probe run per (instance, method, task, layer). `probe-linear` is a
logistic regression on standardised features (a word's vector; a dependency arc's head and dependent vectors side by
side; a sentence's mean word vector; for `bigram-shift` the mean word vector of the sentence as encoded, two
adjacent words swapped in a seeded half: its encode is a second forward pass over the same sample, keyed apart by
the run parameter `words: bigram-shift`, so the other tasks' encodes keep their keys); `structural-probe` is Hewitt & Manning's rank-k distance probe on the `tree`
benchmark. Both write per-item predictions in the score-run layout, judged as accuracy: for `tree` an item is a gold
undirected edge (punctuation left out), gold its length in words, prediction the same length if the minimum spanning
tree of the predicted distances has the edge and 0 if not, so accuracy is UUAS and the majority-class floor is the
share of gold edges between adjacent words: exactly the UUAS of the chain that links each word to the next.
Every item also carries its sentence (`<task>::groups` in predictions.npz): the words of one sentence are not
independent draws, so a bootstrap that honours the groups resamples sentences, not words.

A measurement picks its layer with `params: {layer: ...}`: an index (0 = the embeddings), or 'k/n', layer k of a
paper's n-layer stack, scaled to the tier's model (round(k * L / n), and at least 1 when k > 0), so a claim about
bert-base's layer 7 ('7/12') reads layer 2 of the 4-layer micro-BERT."""
from __future__ import annotations

import re

from ...errors import UserError
from ..family import Family, Layout

LINEAR_TASKS = ("upos", "dependency", "length", "depth", "tense", "subject-number", "bigram-shift")  # data.ud.TASKS, '_' -> '-'
STRUCTURAL_TASKS = ("tree",)
METHOD_TASKS = {"probe-linear": LINEAR_TASKS, "structural-probe": STRUCTURAL_TASKS}
# the kinds whose layers give word vectors: encoders, and decoders (a causal LM's word vector is the mean of its
# tokens', as for BERT; <bos> belongs to no word: plmclaims.decoders)
LAYER_KINDS = ("pretrain-mlm", "transformer", "causal-lm")
SHIFTED_WORDS = "bigram-shift"  # the encode variant whose sample has two adjacent words swapped in a seeded half
LAYER_WHAT = ("a layer index (0: the embeddings), 'k/n' (layer k of a paper's n-layer stack, e.g. '7/12'), 'all' "
              "(every layer, 0 to the top: a curve for layer trends) or 'contextual' (every layer above the embeddings)")
CURVES = ("all", "contextual")  # layer values that make a measurement a curve


def _is_layer(v) -> bool:
    if v in CURVES:
        return True
    if isinstance(v, int) and not isinstance(v, bool):
        return v >= 0
    m = re.fullmatch(r"(\d+)/(\d+)", v) if isinstance(v, str) else None
    return bool(m) and 0 < int(m[2]) and int(m[1]) <= int(m[2])


def depth(tier: dict, asset: str) -> int | None:
    """Transformer layers of an asset: a workflow-built model's config, else the tier's probing.layers entry."""
    spec = tier["assets"][asset]
    if spec["kind"] == "pretrain-mlm" or (spec["kind"] == "causal-lm" and spec.get("source") == "workflow"):
        return int(spec["model"]["layers"])
    return tier.get("probing", {}).get("layers", {}).get(asset)


def resolve_layer(value, n_layers: int) -> int:
    """The hidden-state index a measurement's `layer` names for a model of n_layers layers."""
    if isinstance(value, int):
        return value
    k, n = map(int, value.split("/"))
    return 0 if k == 0 else max(1, int(k * n_layers / n + 0.5))


STEP_WHAT = "'all': every checkpoint the workflow's pre-training saves, with the random initialisation as step 0"


def check_tier(claim, m, asset: str, spec: dict, arch: str | None, tier: dict) -> None:
    """The method scores its own tasks only, and an absolute layer must exist in the tier's model."""
    where = f"{claim.path}: field 'measurements.{m.name}"
    wrong = [b for b in claim.protocol["benchmarks"] if b not in METHOD_TASKS[m.method]]
    if wrong:
        raise UserError(f"{where}.method': {m.method} does not score {', '.join(wrong)}; it scores "
                        f"{', '.join(METHOD_TASKS[m.method])} (one claim per method)")
    if "layer" not in m.params:
        raise UserError(f"{where}.params': {m.method} needs 'layer': {LAYER_WHAT}")
    layer = m.params["layer"]
    if m.params.get("step") == "all" and layer == "all":
        raise UserError(f"{where}.params': a curve sweeps one axis: 'step: all' needs one layer, not 'layer: all'")
    n = depth(tier, asset) if spec["kind"] in LAYER_KINDS else None
    if isinstance(layer, int) and n is not None and layer > n:
        raise UserError(f"{where}.params.layer': got {layer}; tier {tier['name']} maps role '{m.role}' to '{asset}', "
                        f"which has layers 0-{n}: use 'k/n' to name a layer of a paper's stack")


FAMILY = Family(
    name="probing",
    package="probing",
    evaluators=("probe",),
    metrics=("accuracy",),
    methods=tuple(METHOD_TASKS),
    benchmarks=LINEAR_TASKS + STRUCTURAL_TASKS,
    method_params={"probe-linear": ("layer", "step"), "structural-probe": ("layer", "step")},
    param_types={"layer": (LAYER_WHAT, _is_layer), "step": (STEP_WHAT, lambda v: v == "all")},
    protocol={"split": ("dev", "test"), "similarity": None, "text_form": None},
    axes={"layer": "layer", "step": "step"},
    layouts={
        "probe-encode": Layout("results", "runs/probe-encode/{instance}/{split}/{key}", "words.npz"),
        "probe": Layout("results", "runs/probe/{instance}/{method}/{task}/{split}/l{layer}/{key}", "metrics.json"),
    },
    check_tier=check_tier,
)
