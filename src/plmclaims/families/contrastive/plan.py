"""Contrastive measurements to runs: one `contrastive` run per training seed from the first instance of the role's
encoder (or of its random-weights twin), the twin's runs beside as the floor where the claim asks for the
random-weights control; a released checkpoint through the sts family's score run of its test pooling (shared with
any sts claim of it) or a contrastive run with no training steps; poolings of an untrained encoder through the sts
family's planner."""
from __future__ import annotations

from ... import recipes
from ...claims import Claim, Measurement
from ...data import sts, verify
from ...data.sts import SOURCE_OF_EVALUATOR
from ...encoders import POOLINGS
from ...errors import UserError
from ...plan import PlannedMeasurement, Run, asset_view, make_run, merge, method_params, model_run, pick
from ...tiers import instances, random_twins
from ..sts import plan as sts_plan
from . import ENCODER_KINDS, NOT_RUN, RELEASED_POOLING

SECTION = "contrastive"
EVALUATOR = "senteval"  # the family's one evaluator: SentEval's files, 'all' aggregation, plain cosine


GENERATOR_KINDS = ("transformer",)  # a model loaded as it is (hub, package, local): no workflow run upstream
MLM_ARCHITECTURES = ("bert", "roberta")  # claims.architecture's names with a masked-LM head (DistilBERT reads as bert)


def _vocabulary(spec: dict) -> tuple[str, int] | None:
    """A hub checkpoint's published tokenizer (kind, size), from the table the rehearsal's stand-ins are built to;
    None where it is not known offline (an asset the workflow builds, a hub id the table does not list)."""
    from ...published import published

    pub = published(spec.get("id", "")) if spec.get("source") == "hub" else None  # a family's pattern or member too
    return (pub.tokenizer, pub.vocab) if pub else None


def generator_view(tier: dict, objective: str, params: dict, encoder: str) -> dict:
    """The view of the asset a recipe's `generator` names (DiffCSE's MLM generator: distilbert-base-uncased in the
    paper), so its id and revision are part of the run's key and prefetch finds it; {} for the encoder's own head."""
    from ...claims import architecture

    name = params.get("generator")
    if not name:
        return {}
    # what can be told offline from the assets (their hub ids) is refused here, not hours later when the run loads
    # the generator: a generator fills masked tokens, so it needs a masked-LM head (T5, GPT-2 and Llama have none),
    # and it reads the encoder tokenizer's ids, so it must be of the encoder's family (a RoBERTa generator's ids mean
    # other words to a BERT encoder) and, where both checkpoints' published tokenizers are known, have the same one
    # (bert-large-cased's 28996 cased word pieces are not bert-base-uncased's 30522); an asset the workflow builds is
    # checked when the run loads both
    enc_spec = tier["assets"][encoder.partition(".")[0]]
    enc, enc_vocab = architecture(enc_spec), _vocabulary(enc_spec)
    fits = (enc,) if enc in MLM_ARCHITECTURES else MLM_ARCHITECTURES

    def vocab_fits(spec) -> bool:
        vocab = _vocabulary(spec)
        return None in (enc_vocab, vocab) or vocab == enc_vocab

    allowed = sorted(a for a, s in tier["assets"].items()
                     if s["kind"] in GENERATOR_KINDS and architecture(s) in fits + (None,) and vocab_fits(s))
    if name not in allowed:
        spec = tier["assets"].get(name, {})
        arch = architecture(spec) if spec.get("kind") in GENERATOR_KINDS else None
        vocab = _vocabulary(spec)
        what = (f"not a {'/'.join(GENERATOR_KINDS)} asset of tier {tier['name']}" if spec.get("kind") not in GENERATOR_KINDS
                else f"a {arch} model, which has no masked-LM head" if arch not in MLM_ARCHITECTURES
                else f"a {arch} model, whose vocabulary is not the {enc} encoder {encoder!r}'s" if arch not in fits
                else (f"a {arch} model with the {vocab[0]} tokenizer of {vocab[1]} ids, not the "
                      f"{enc_vocab[0]} tokenizer of {enc_vocab[1]} ids the encoder {encoder!r} reads"))
        raise UserError(f"{tier.get('_path', tier['name'])}: field '{SECTION}.methods.{objective}.generator': got "
                        f"{name!r}, {what}; allowed values: {', '.join(allowed)}, or leave it out for the encoder's own "
                        "MLM head")
    return asset_view(tier, name)


BASE_KINDS = ("transformer", "pretrain-mlm")


def base_encoder_view(tier: dict, objective: str, params: dict, encoder: str) -> dict:
    """The view of the asset a recipe's `base_encoder` names (RankEncoder's frozen teacher: a trained unsupervised
    SimCSE in the paper), so its id and revision are part of the run's key and prefetch finds it; {} for the starting
    weights. The teacher encodes the batch as the encoder tokenised it, so both must read the same tokenizer (where
    the published tokenizers are known offline; an asset the workflow builds is checked when the run loads both)."""
    name = params.get("base_encoder")
    if not name:
        return {}
    enc_vocab = _vocabulary(tier["assets"][encoder.partition(".")[0]])

    def fits(spec) -> bool:
        vocab = _vocabulary(spec)
        return spec["kind"] in BASE_KINDS and (None in (enc_vocab, vocab) or vocab == enc_vocab)

    allowed = sorted(a for a, s in tier["assets"].items() if fits(s))
    if name not in allowed:
        spec = tier["assets"].get(name)
        what = (f"not an asset of tier {tier['name']}" if spec is None else f"a {spec['kind']} asset, no encoder"
                if spec["kind"] not in BASE_KINDS else f"read by another tokenizer than the encoder {encoder!r}")
        raise UserError(f"{tier.get('_path', tier['name'])}: field '{SECTION}.methods.{objective}.base_encoder': got "
                        f"{name!r}, {what}; allowed values: {', '.join(allowed)}, or leave it out for the starting "
                        "weights")
    return asset_view(tier, name)


def section_view(tier: dict, objective: str, instance: str) -> dict:
    """The contrastive settings one run reads: the objective's recipe over the tier's budget (plmclaims.recipes) and
    its training text (its recipe's own corpus, else the tier's)."""
    asset = instance.partition(".")[0]
    out = {"budget": recipes.budget(tier, SECTION, objective, asset)}
    corpus = recipes.corpus(tier, SECTION, objective, asset)
    return {SECTION: out | ({"corpus": corpus} if corpus is not None else {})}


# training examples of a hub corpus, for a cost estimate before it is read (the run counts the real ones:
# runs.schedule): wiki1m's 10^6 lines; WikiText-103's 28 475 train articles, an upper bound on those past a recipe's
# word minimum; ConSERT's transductive corpus, the distinct sentences of the seven STS test sets, at most 40 000
CORPUS_EXAMPLES = {"wiki1m": 1_000_000, "wikitext-103": 28_475}
TRANSDUCTIVE_EXAMPLES = 40_000


def estimated_steps(budget: dict, corpus: dict | None, transductive: bool = False) -> int:
    """The optimiser steps a run's budget will take, before its corpus is read: `steps`, or `epochs` over an estimate of
    the corpus (CORPUS_EXAMPLES, capped by its max_sentences), whichever is fewer where both are given."""
    if "epochs" not in budget:
        return int(budget["steps"])
    source = None if transductive else next(iter((corpus or {}).get("sources", ())), None)
    n = TRANSDUCTIVE_EXAMPLES if transductive else CORPUS_EXAMPLES.get(source, 0)
    if not transductive and (corpus or {}).get("max_sentences"):
        n = min(n, int(corpus["max_sentences"]))
    steps = int(budget["epochs"]) * max(1, n // int(budget["batch_size"]))
    return min(steps, int(budget["steps"])) if "steps" in budget else steps


def contrastive_run(tier: dict, instance: str, objective: str, form: str, seed: int, params: dict) -> Run:
    """Train `objective` from `instance` (params: the recipe's settings, `released`: evaluate only), select on STS-B
    dev, score the STS test sets. The view holds what changes the result: the corpus, the budget, the data source and
    sample, the encode length, the asset (and a generator asset the recipe names); the training seeds (how many runs)
    and the released map (which roles are trained) are the plan's business, not one run's."""
    source = SOURCE_OF_EVALUATOR[EVALUATOR]
    view = merge(pick(tier, f"data.{source}", "data.max_pairs", "encode.max_length"),
                 section_view(tier, objective, instance), asset_view(tier, instance),
                 generator_view(tier, objective, params, instance),
                 base_encoder_view(tier, objective, params, instance))
    model = model_run(tier, instance)
    fields = {"instance": instance, "method": objective, "form": form, "seed": int(seed)}
    return make_run("contrastive", fields, view, (model,) if model else (), params)


def _released(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, asset: str, objective: str,
              form: str) -> PlannedMeasurement:
    if objective != m.method:
        raise UserError(f"{claim.path}: field 'measurements.{m.name}.method': got {m.method!r}, but tier {tier['name']} "
                        f"maps role '{m.role}' to '{asset}', a released {objective} checkpoint; allowed values: {objective}")
    if m.params:
        raise UserError(f"{claim.path}: field 'measurements.{m.name}.params': role '{m.role}' is the released checkpoint "
                        f"'{asset}' at tier {tier['name']}, which is evaluated, not trained; remove "
                        f"{', '.join(sorted(m.params))}")
    pooling = RELEASED_POOLING.get(objective)
    if pooling:  # the sts family's own run of this checkpoint and pooling: one key for both families
        pm.runs = [sts_plan.score_run(tier, EVALUATOR, asset, form, pooling)]
    else:
        pm.runs = [contrastive_run(tier, asset, objective, form, 0, {"released": True})]
    return pm


def plan_measurement(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, role: dict) -> PlannedMeasurement:
    if m.method in POOLINGS:
        return sts_plan.plan_measurement(claim, m, tier, pm, role)
    if m.method in NOT_RUN:
        return pm.not_run(NOT_RUN[m.method])
    section = tier.get(SECTION)
    if section is None:
        return pm.not_run(f"tier {tier['name']} has no '{SECTION}' section (corpus, budget, seeds)")
    asset = role["asset"]
    _, form = sts_plan.evaluator_and_form(claim)
    released = section.get("released", {}).get(asset)
    if released is not None:
        return _released(claim, m, tier, pm, asset, released, form)
    if m.method in section.get("skip_objectives", {}):
        return pm.not_run(f"tier {tier['name']} does not train {m.method}: {section['skip_objectives'][m.method]}")
    if tier["assets"][asset]["kind"] not in ENCODER_KINDS:
        return pm.not_run(f"role '{m.role}' maps to '{asset}', not an encoder to train")
    params = {k: v for k, v in method_params(tier, SECTION, m, asset).items() if k != "weights"}
    if not params.get("transductive", True):
        params.pop("transductive")  # the default, spelt out: the same run (and key) as leaving it out
    for key in ("generator", "base_encoder"):  # the encoder's own MLM head or starting weights, spelt out: likewise
        if params.get(key) == "":
            params.pop(key)
    random = m.params.get("weights") == "random"
    # the first instance: the spread reported is over training seeds (dropout masks, batches, heads), as in the papers
    start = (random_twins if random else instances)(tier, asset)[0]

    def runs(inst, seeds) -> list[Run]:
        return [contrastive_run(tier, inst.name, m.method, form, s, params) for s in seeds]

    pm.runs = runs(start, section["seeds"])
    if not random and "random-weights" in claim.controls:
        twins = random_twins(tier, asset)
        if twins:  # a floor needs no spread of its own: a tier may train it with fewer seeds (control_seeds)
            pm.controls = runs(twins[0], section.get("control_seeds", section["seeds"]))
    return pm


def controls(claim: Claim, tier: dict) -> dict[str, Run]:
    """Bag-of-words and TF-IDF cosine on the claim's benchmarks and text form (the sts family's lexical runs)."""
    return sts_plan.controls(claim, tier)


def data_files(run: Run, tier: dict, data_root: str | None) -> list[str]:
    """The STS test files of the run's text form and STS-B dev (checkpoint selection); the corpus comes from packages."""
    files = verify.sts_files(tier, EVALUATOR, run.form, data_root)
    source = tier["data"][SOURCE_OF_EVALUATOR[EVALUATOR]]
    if source["source"] == "local":
        files += [str(p) for p in sts.local_files(sts.local_root(source, data_root), "STSBenchmark", run.form, "dev")]
    return files
