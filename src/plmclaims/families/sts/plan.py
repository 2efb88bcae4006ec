"""STS measurements to runs: one encode run per (evaluator's data, instance, text form), shared by every pooling,
and one score run per (instance, form, pooling, post-processing); random-weights twins and lexical cosines beside."""
from __future__ import annotations

from ...claims import Claim, Measurement
from ...data import verify
from ...data.sts import SOURCE_OF_EVALUATOR  # evaluator -> the tier's data source it reads
from ...plan import PlannedMeasurement, Run, asset_view, make_run, merge, model_run, pick, wants_twins
from ...tiers import instances, random_twins

POSTPROCESS = {"whitening", "flow"}  # flow: BERT-flow (methods/flow.py), its settings from the tier's postprocess.flow


def encode_run(tier: dict, evaluator: str, instance: str, form: str) -> Run:
    """One forward pass per (evaluator's data, instance, text form), shared by every pooling."""
    view = merge(pick(tier, f"data.{SOURCE_OF_EVALUATOR[evaluator]}", "data.max_pairs", "encode"), asset_view(tier, instance))
    model = model_run(tier, instance)
    return make_run("encode", {"evaluator": evaluator, "instance": instance, "form": form}, view, (model,) if model else ())


def fit_encode_run(tier: dict, instance: str, corpus: str) -> Run:
    """One forward pass of `instance` over a fit corpus's sentences (NLI from the hub; a local GLUE task's train
    sentences at tiny), which post-processings are fitted on."""
    glue = ("data.glue",) if tier["fit_corpora"][corpus]["use"] == "glue" else ()
    view = merge(pick(tier, f"fit_corpora.{corpus}", "encode", *glue), asset_view(tier, instance))
    model = model_run(tier, instance)
    return make_run("fitencode", {"instance": instance, "corpus": corpus}, view, (model,) if model else ())


def hub_corpus(tier: dict, post: str) -> str | None:
    """The fit corpus with its own encode run that a post-processing key ('<name>-<corpus>[-k<dim>]') is fitted on;
    None: no post-processing, or fitted on the target sentences."""
    corpus = post.partition("-")[2].partition("-k")[0]
    return corpus if tier.get("fit_corpora", {}).get(corpus, {}).get("use") in ("hub", "glue") else None


def score_run(tier: dict, evaluator: str, instance: str, form: str, method: str, post: str = "none") -> Run:
    """Cosine scores of one (instance, text form, pooling, post-processing) on every STS benchmark."""
    asset = instance.partition(".")[0]
    view = merge(pick(tier, f"data.{SOURCE_OF_EVALUATOR[evaluator]}", "data.max_pairs"), asset_view(tier, instance))
    if post.startswith("flow"):  # the flow's architecture and training budget are part of the run's key
        view = merge(view, pick(tier, "postprocess.flow"))
    fields = {"evaluator": evaluator, "instance": instance, "form": form, "method": method, "post": post}
    up = () if tier["assets"][asset]["kind"] == "lexical" else (encode_run(tier, evaluator, instance, form),)
    if (corpus := hub_corpus(tier, post)) is not None:  # fitted on another corpus's vectors of the same model
        up += (fit_encode_run(tier, instance, corpus),)
    return make_run("score", fields, view, up)


def _post_key(m: Measurement, tier: dict) -> str | None:
    """The score run's post-processing key: '<name>-target' or '<name>-<hub corpus>' (plus '-k<dim>'); None: the
    tier has no such fit corpus."""
    if not m.postprocess:
        return "none"
    fit_on = m.postprocess.get("fit_on", "target")
    corpus = tier.get("fit_corpora", {}).get(fit_on)
    if corpus is None:
        return None
    k = f"-k{m.postprocess['k']}" if m.postprocess.get("k") else ""
    # a tier may stand the target sentences in for a corpus it lacks offline (micro: 'nli' -> target)
    return f"{m.postprocess['name']}-{'target' if corpus['use'] == 'target' else fit_on}{k}"


def evaluator_and_form(claim: Claim) -> tuple[str, str]:
    """The claim's evaluator and text form (MTEB reads raw text, SentEval its tokenised files, unless stated)."""
    evaluator = claim.protocol.get("evaluator", "senteval")
    return evaluator, claim.protocol.get("text_form", "raw" if evaluator == "mteb" else "tokenised")


def plan_measurement(claim: Claim, m: Measurement, tier: dict, pm: PlannedMeasurement, role: dict) -> PlannedMeasurement:
    if m.postprocess and m.postprocess["name"] not in POSTPROCESS:
        return pm.not_run(f"post-processing '{m.postprocess['name']}' is not implemented yet")
    post = _post_key(m, tier)
    if post is None:
        return pm.not_run(f"tier {tier['name']} has no fit corpus '{m.postprocess.get('fit_on')}'")
    asset = role["asset"]
    evaluator, form = evaluator_and_form(claim)
    pm.runs = [score_run(tier, evaluator, inst.name, form, m.method, post) for inst in instances(tier, asset)]
    if wants_twins(claim, m):
        pm.controls = [score_run(tier, evaluator, inst.name, form, m.method, post) for inst in random_twins(tier, asset)]
    return pm


def controls(claim: Claim, tier: dict) -> dict[str, Run]:
    """Bag-of-words and TF-IDF cosine on the claim's benchmarks and text form."""
    role = tier["roles"].get("lexical", {})
    if "asset" not in role:
        return {}
    evaluator, form = evaluator_and_form(claim)
    wanted = {"bow": "bow-cosine", "tfidf": "tfidf-cosine"}
    # same evaluator as the claim: its benchmarks (e.g. MTEB's 9927-pair SICK-R) must be the same pairs
    return {c: score_run(tier, evaluator, role["asset"], form, wanted[c]) for c in claim.controls if c in wanted}


def data_files(run: Run, tier: dict, data_root: str | None) -> list[str]:
    if run.kind == "fitencode":  # a hub corpus is prefetched and checked against its manifest: no local files
        spec = tier["fit_corpora"][run.corpus]
        return verify.glue_files(tier, spec["task"], data_root, ("train",)) if spec["use"] == "glue" else []
    return verify.sts_files(tier, run.evaluator, run.form, data_root)
