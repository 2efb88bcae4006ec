"""The intrinsic family (issue 11): the geometry of one layer's contextual word vectors (T1 / P5, Ethayarajh 2019)
and where one layer's attention goes (P6, Clark et al. 2019).

Input: the probing family's forward pass (`probe-encode`: every layer's word vectors, sub-word tokens averaged per UD
word, for the seeded UD EWT sample of train and the scored split), shared, computed once. One `geometry` run per
(instance, split, layer) reads one layer of it (both parts: nothing is fitted, so the whole sample is the corpus; a
word type is its exact form) and scores the three benchmarks at once, each a mean of per-item values:

- `anisotropy`: items are seeded random pairs of occurrences of different words; the value is their cosine;
- `self-similarity`: items are the words with at least `intrinsic.min_occurrences` occurrences; the value is the
  mean cosine between the word's occurrences minus the layer's anisotropy (the paper's adjustment);
- `self-similarity-raw`: the same words and cosines, before the adjustment;
- `explainable-variance`: the same words; the share of the (uncentred) occurrence matrix's second moment that its
  first principal component takes (a static vector's best share), minus the same share for as many occurrences of
  other words (methods.geometry.adjusted_explainable_variance).

The metric is `mean`, with chance floor 0: isotropic vectors give cosines of 0 on average, and with the adjustments
a word's occurrences that are no more alike than random ones score 0 on the other two. Layers are named as in the
probing family (`params: {layer: ...}`: an index, 'k/n' of a paper's stack, or 'all' for a curve).

Attention to special tokens (issue 11: P6, Clark et al. 2019), method `attention-maps`: one `attention-maps` run per
(instance, scored split) passes each sentence of the probing family's seeded sample of that split through the model
with eager attention ("[CLS] words [SEP]" per sentence, in padded batches whose padding gets no attention) and
keeps, per sentence and layer, the share of attention (averaged over heads and query tokens) on [SEP], on [CLS] and
on periods and commas, and the magnitude of the masked-LM loss's gradient with respect to the attention on [SEP]
(15% of the words' sub-words masked, seeded by `intrinsic.seed`); where the model has no MLM head that gradient is
not taken. One `attention` run per (instance, split, layer) reads one layer of it (layers 1 to the top: the
embeddings attend nowhere):

- `attention-to-sep`, `attention-to-cls`, `attention-to-punctuation`: items are sentences (for punctuation, those
  with a period or comma); the value is the share minus what uniform attention gives the same tokens (|tokens| / T),
  so the chance floor 0 is uniform attention; the raw share and the uniform share are in metrics.json;
- `sep-attention-gradient`: items are sentences; the value is the mean |d loss / d attention weight| on [SEP]
  (methods.attention.gradient_magnitude);
- `attention-to-first`: the share on the sequence's first token ([CLS] in BERT; a decoder's <bos>, or its first word
  where the tokenizer adds none): a decoder's "attention sink", the analogue of Clark et al.'s no-op attention to
  [SEP] that a causal LM allows (it has no [SEP] or [CLS]). A decoder's sentences are its running text ("<bos> words",
  plmclaims.decoders), and its chance level is causal: query q sees keys 0..q only, so uniform attention gives the
  first token mean(1 / (q + 1)) (methods.attention.causal_uniform_share). A decoder has no masked-LM head, so no
  gradient is taken, and the [SEP] and [CLS] benchmarks are not run on it."""
from __future__ import annotations

from ...errors import UserError
from ..family import Family, Layout
from ..probing import LAYER_KINDS, LAYER_WHAT, _is_layer, depth

GEOMETRY_BENCHMARKS = ("anisotropy", "self-similarity", "self-similarity-raw", "explainable-variance")
SHARES = {"attention-to-sep": "sep", "attention-to-cls": "cls", "attention-to-punctuation": "punctuation",
          "attention-to-first": "first"}
DECODER_SHARES = ("attention-to-punctuation", "attention-to-first")  # what a causal LM's attention can be read for
GRADIENT = "sep-attention-gradient"
METHOD = "contextual-geometry"
ATTENTION = "attention-maps"
METHOD_BENCHMARKS = {METHOD: GEOMETRY_BENCHMARKS, ATTENTION: (*SHARES, GRADIENT)}
BENCHMARKS = GEOMETRY_BENCHMARKS + METHOD_BENCHMARKS[ATTENTION]


def check_tier(claim, m, asset: str, spec: dict, arch: str | None, tier: dict) -> None:
    """The method scores its own benchmarks; the measurement names a layer, and an absolute one exists in the tier's
    model (attention maps start at layer 1)."""
    wrong = [b for b in claim.protocol["benchmarks"] if b not in METHOD_BENCHMARKS[m.method]]
    if wrong:
        raise UserError(f"{claim.path}: field 'measurements.{m.name}.method': {m.method} does not score "
                        f"{', '.join(wrong)}; it scores {', '.join(METHOD_BENCHMARKS[m.method])} (one claim per method)")
    where = f"{claim.path}: field 'measurements.{m.name}.params"
    if "layer" not in m.params:
        raise UserError(f"{where}': {m.method} needs 'layer': {LAYER_WHAT}")
    layer = m.params["layer"]
    if m.method == ATTENTION and layer != "all" and str(layer).split("/")[0] == "0":
        raise UserError(f"{where}.layer': got {layer!r}; layer 0 is the embeddings, which attend nowhere: "
                        "attention maps are layers 1 to the top (an index >= 1, 'k/n' with k >= 1, or 'all')")
    n = depth(tier, asset) if spec["kind"] in LAYER_KINDS else None
    if isinstance(layer, int) and n is not None and layer > n:
        raise UserError(f"{where}.layer': got {layer}; tier {tier['name']} maps role '{m.role}' to '{asset}', "
                        f"which has layers 0-{n}: use 'k/n' to name a layer of a paper's stack")


FAMILY = Family(
    name="intrinsic",
    package="intrinsic",
    evaluators=("intrinsic",),
    metrics=("mean",),
    methods=(METHOD, ATTENTION),
    benchmarks=BENCHMARKS,
    method_params={METHOD: ("layer",), ATTENTION: ("layer",)},
    param_types={"layer": (LAYER_WHAT, _is_layer)},
    protocol={"split": ("dev", "test"), "similarity": None, "text_form": None},
    axes={"layer": "layer"},
    layouts={"geometry": Layout("results", "runs/geometry/{instance}/{split}/l{layer}/{key}", "metrics.json"),
             "attention-maps": Layout("results", "runs/attention-maps/{instance}/{split}/{key}", "attention.npz"),
             "attention": Layout("results", "runs/attention/{instance}/{split}/l{layer}/{key}", "metrics.json")},
    check_tier=check_tier,
)
