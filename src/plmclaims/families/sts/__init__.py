"""The STS family: sentence vectors from a model (or a lexical control), scored by cosine on STS12-16, STS-B and
SICK-R. Runs: one forward pass per (evaluator's data, instance, text form), then one score run per pooling and
post-processing; the random-weights twins and the bag-of-words and TF-IDF cosines are its controls."""
from __future__ import annotations

from ...data.sts import BENCHMARKS
from ...decoders import POOLINGS as DECODER_POOLINGS
from ...encoders import POOLINGS
from ...errors import UserError
from ..family import Family, Layout

LEXICAL = ("bow-cosine", "tfidf-cosine")
METHODS = POOLINGS + ("static-average",) + LEXICAL
ENCODER_POOLINGS = tuple(p for p in POOLINGS if p != "last-token")
METHODS_BY_KIND = {  # the methods each asset kind's vectors give
    "pretrain-mlm": ENCODER_POOLINGS, "transformer": ENCODER_POOLINGS, "causal-lm": DECODER_POOLINGS,
    "static-vectors": ("static-average",), "lexical": LEXICAL,
}
CONTRASTIVE = ()  # T8's objectives are the contrastive family's methods (families/contrastive)


def check_tier(claim, m, asset: str, spec: dict, arch: str | None, tier: dict) -> None:
    """A pooling needs vectors the tier's asset gives (no [CLS] pooling of GloVe, no cosine of a lexical control's vectors)."""
    if m.method not in METHODS:
        return
    gives = METHODS_BY_KIND.get(spec["kind"], ())
    if m.method not in gives:
        raise UserError(f"{claim.path}: field 'measurements.{m.name}.method': got {m.method!r}; tier {tier['name']} maps "
                        f"role '{m.role}' to '{asset}' ({spec['kind']}), which gives: {', '.join(gives) or 'no STS vectors'}")


FAMILY = Family(
    name="sts",
    package="sts",
    evaluators=("senteval", "mteb"),
    metrics=("spearman", "pearson"),
    methods=METHODS,
    planned_methods=CONTRASTIVE,
    benchmarks=BENCHMARKS,
    method_params={m: () for m in METHODS},  # poolings and lexical cosines take no parameters
    protocol={"split": ("test",), "similarity": ("cosine",)},
    postprocess_methods=POOLINGS,
    layouts={
        "encode": Layout("results", "runs/encode/{evaluator}/{instance}/{form}/{key}", "vectors.npz"),
        "score": Layout("results", "runs/score/{evaluator}/{instance}/{form}/{method}/{post}/{key}", "metrics.json"),
        "fitencode": Layout("results", "runs/fit-encode/{instance}/{corpus}/{key}", "vectors.npz"),
    },
    check_tier=check_tier,
)
