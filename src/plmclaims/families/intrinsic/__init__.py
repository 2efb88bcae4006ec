"""The intrinsic family (issue 11: T1 / P5, Ethayarajh 2019): the geometry of one layer's contextual word vectors.

Input: the probing family's forward pass (`probe-encode`: every layer's word vectors, sub-word tokens averaged per UD
word, for the seeded UD EWT sample of train and the scored split), shared, computed once. One `geometry` run per
(instance, split, layer) reads one layer of it (both parts: nothing is fitted, so the whole sample is the corpus; a
word type is its exact form) and scores the three benchmarks at once, each a mean of per-item values:

- `anisotropy`: items are seeded random pairs of occurrences of different words; the value is their cosine;
- `self-similarity`: items are the words with at least `intrinsic.min_occurrences` occurrences; the value is the
  mean cosine between the word's occurrences minus the layer's anisotropy (the paper's adjustment);
- `explainable-variance`: the same words; the share of the (uncentred) occurrence matrix's second moment that its
  first principal component takes (a static vector's best share), minus the same share for as many occurrences of
  other words (methods.geometry.adjusted_explainable_variance).

The metric is `mean`, with chance floor 0: isotropic vectors give cosines of 0 on average, and with the adjustments
a word's occurrences that are no more alike than random ones score 0 on the other two. Layers are named as in the
probing family (`params: {layer: ...}`: an index, 'k/n' of a paper's stack, or 'all' for a curve)."""
from __future__ import annotations

from ...errors import UserError
from ..family import Family, Layout
from ..probing import ENCODER_KINDS, LAYER_WHAT, _is_layer, depth

BENCHMARKS = ("anisotropy", "self-similarity", "explainable-variance")
METHOD = "contextual-geometry"


def check_tier(claim, m, asset: str, spec: dict, arch: str | None, tier: dict) -> None:
    """The measurement names a layer, and an absolute one exists in the tier's model."""
    where = f"{claim.path}: field 'measurements.{m.name}.params"
    if "layer" not in m.params:
        raise UserError(f"{where}': {m.method} needs 'layer': {LAYER_WHAT}")
    layer = m.params["layer"]
    n = depth(tier, asset) if spec["kind"] in ENCODER_KINDS else None
    if isinstance(layer, int) and n is not None and layer > n:
        raise UserError(f"{where}.layer': got {layer}; tier {tier['name']} maps role '{m.role}' to '{asset}', "
                        f"which has layers 0-{n}: use 'k/n' to name a layer of a paper's stack")


FAMILY = Family(
    name="intrinsic",
    package="intrinsic",
    evaluators=("intrinsic",),
    metrics=("mean",),
    methods=(METHOD,),
    benchmarks=BENCHMARKS,
    method_params={METHOD: ("layer",)},
    param_types={"layer": (LAYER_WHAT, _is_layer)},
    protocol={"split": ("dev", "test"), "similarity": None, "text_form": None},
    axes={"layer": "layer"},
    layouts={"geometry": Layout("results", "runs/geometry/{instance}/{split}/l{layer}/{key}", "metrics.json")},
    check_tier=check_tier,
)
