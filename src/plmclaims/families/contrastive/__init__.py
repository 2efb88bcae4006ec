"""The contrastive family (issue 10, CATALOG T8): sentence encoders trained with a contrastive objective (SimCSE,
DeCLUTR, ConSERT, BSL, DiffCSE, PromptBERT, RankEncoder), scored on STS12-16, STS-B and SICK-R in the sts family's
score layout, so the verdict engine (paired bootstrap, floors) reads both alike. The score is cosine except where the
objective's paper scores otherwise (RankEncoder: 0.9 cosine + 0.1 rank Spearman, its `similarity`); metrics.json
names it.

One `contrastive` run per (instance, objective, text form, seed): it trains the objective from the role's encoder
(or, with `params: {weights: random}`, from its random-weights twin) on the tier's corpus with the tier's budget (the
same steps, batch and length for every objective; a recipe's own learning rate where the tier gives one), selects
the checkpoint on STS-B dev, and scores the STS test sets with that checkpoint's test-time pooling. A claim's
`controls: [random-weights]` also plans the same training from the random-weights twin: the floor every trained side
must beat.

A role the tier maps to a released checkpoint (the tier's `contrastive.released` names the objective each was trained
with) is evaluated, not trained: through the sts family's encode/score runs with the objective's test pooling (the
same run keys as an sts claim of that checkpoint, so they are shared), or, where the sts family has no such pooling
(PromptBERT's template), through a contrastive run with no training steps.

Poolings of an encoder that is not trained here (BERT mean pooling, whitening, flow) are sts measurements planned by
the sts family's planner, so a contrastive claim can set a trained objective beside them."""
from __future__ import annotations

from ...data.sts import BENCHMARKS
from ...encoders import POOLINGS
from ...errors import UserError
from ..family import Family, Layout
from ..sts import check_tier as sts_check_tier

# the objectives plmclaims.methods.contrastive registers (OBJECTIVES there: name -> module)
OBJECTIVES = ("simcse", "declutr", "consert", "bsl", "diffcse", "promptbert", "rankencoder")
# methods of the catalog this family names but cannot run, with the reason (planned not-run at every tier)
NOT_RUN = {
    "dino": "DINO trains on sentence pairs that GPT2-XL generates from instructions; no generator of that size runs "
            "offline within the micro budget, and its released generated data sets (STS-x1x2) are not a tier asset yet",
}
# the test-time pooling of each objective's released checkpoint where the sts family computes it (SimCSE and DiffCSE:
# the last layer's [CLS] before the MLP pooler, SimCSE section 3 and its evaluation.py; DeCLUTR: the token mean,
# DeCLUTR's README); an objective missing here (PromptBERT: its template's [MASK] vector, minus the template's own
# vector) is evaluated by a contrastive run with no training steps, through the objective's own embed
RELEASED_POOLING = {"simcse": "cls-before-pooler", "diffcse": "cls-before-pooler", "declutr": "mean"}
ENCODER_KINDS = ("pretrain-mlm", "transformer")
WEIGHTS_WHAT = ("'pretrained' (the role's weights; the default) or 'random' (the same architecture with random "
                "weights: the tier's random-weights twin)")
METHODS = OBJECTIVES + tuple(NOT_RUN) + POOLINGS


def check_tier(claim, m, asset: str, spec: dict, arch: str | None, tier: dict) -> None:
    """A pooling is the sts family's business; an objective needs an encoder to train (or a released checkpoint)."""
    if m.method in POOLINGS:
        return sts_check_tier(claim, m, asset, spec, arch, tier)
    if m.method in OBJECTIVES and spec["kind"] not in ENCODER_KINDS:
        raise UserError(f"{claim.path}: field 'measurements.{m.name}.role': tier {tier['name']} maps role '{m.role}' to "
                        f"'{asset}' ({spec['kind']}); {m.method} trains an encoder: allowed kinds: {', '.join(ENCODER_KINDS)}")


FAMILY = Family(
    name="contrastive",
    package="contrastive",
    evaluators=("senteval",),
    metrics=("spearman", "pearson"),
    methods=METHODS,
    benchmarks=BENCHMARKS,
    method_params={**{o: ("weights", "lr") for o in OBJECTIVES}, "consert": ("weights", "lr", "transductive"),
                   **{m: () for m in NOT_RUN}, **{p: () for p in POOLINGS}},
    param_types={
        "weights": (WEIGHTS_WHAT, lambda v: v in ("pretrained", "random")),
        # ConSERT's own setting: it trains on the unlabelled sentences of the STS test sets (shown flagged, never the
        # default; the default trains on the tier's corpus like every objective)
        "transductive": ("true or false", lambda v: isinstance(v, bool)),
    },
    protocol={"split": ("test",), "similarity": ("cosine",)},
    postprocess_methods=POOLINGS,
    layouts={"contrastive": Layout("results", "runs/contrastive/{instance}/{method}/{form}/s{seed}/{key}", "metrics.json")},
    tier_section="contrastive",
    check_tier=check_tier,
)
