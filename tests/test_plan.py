"""Planning: claims expand into shared runs; roles a tier lacks become not-run with the reason."""
from __future__ import annotations

from plmclaims import plan as P
from plmclaims.claims import load_claims
from plmclaims.tiers import Instance, load_tier


def _plans(repo, tier):
    return {p.claim.id: p for p in P.plan_all(load_claims(repo / "replications"), load_tier(tier))}


def test_claims_share_encodes_and_seeds_expand(repo):
    tier = load_tier("micro")
    plans = _plans(repo, "micro")
    glove, whiten = plans["sts/glove-avg-beats-bert-avg"], plans["sts/whitening-improves-bert"]
    assert [r.instance for r in glove.measurements["bert_avg"].runs] == ["micro-bert.s1", "micro-bert.s2"]
    assert [r.instance for r in glove.measurements["bert_avg"].controls] == ["micro-bert.random-s1", "micro-bert.random-s2"]
    encodes = {P.encode_path("r", r) for p in (glove, whiten) for r in p.score_runs() if P.needs_encode(r, tier)}
    assert encodes == {f"r/runs/encode/senteval/{i}/tokenised/vectors.npz" for i in
                       ("micro-bert.s1", "micro-bert.s2", "micro-bert.random-s1", "micro-bert.random-s2", "glove-6b-50d")}
    # the lexical controls are one run shared by both claims
    assert glove.lexical["tfidf"] == whiten.lexical["tfidf"]


def test_fit_corpus_substitution_and_unsupported(repo):
    micro = _plans(repo, "micro")["sts/whitening-improves-bert"].measurements["bert_whitening"]
    assert micro.status == "ok" and {r.post for r in micro.runs} == {"whitening-target"}
    paper = _plans(repo, "paper")["sts/whitening-improves-bert"].measurements["bert_whitening"]
    assert paper.status == "not-run" and "not implemented" in paper.reason


def test_unavailable_role_is_not_run_never_substituted(repo):
    simcse = _plans(repo, "micro")["sts/released-simcse-reproduces"].measurements["simcse"]
    assert simcse.status == "not-run" and simcse.runs == [] and "SimCSE" in simcse.reason
    paper = _plans(repo, "paper")["sts/released-simcse-reproduces"].measurements["simcse"]
    assert [r.instance for r in paper.runs] == ["unsup-simcse-bert-base"]


def test_instance_names_round_trip():
    tier = load_tier("micro")
    for inst in (Instance("micro-bert", "pretrain-mlm", 2), Instance("micro-bert", "pretrain-mlm", 1, random=True),
                 Instance("all-minilm-l6-v2", "transformer")):
        assert Instance.parse(inst.name, tier) == inst


def test_encode_inputs_point_at_the_right_assets():
    tier = load_tier("micro")
    assert P.encode_inputs("res", tier, "micro-bert.s1") == ["res/models/micro-bert.s1/metrics.json"]
    assert P.encode_inputs("res", tier, "micro-bert.random-s2") == ["res/tokenizers/micro-bert/tokenizer.json"]
    assert P.encode_inputs("res", tier, "glove-6b-50d") == []
    assert P.model_dir("res", tier, "micro-bert.s1") == "res/models/micro-bert.s1/checkpoints/step-600"


def test_lexical_controls_score_the_claims_own_pairs(repo):
    """An MTEB-protocol claim's controls must score MTEB's pairs (raw text, 9927-pair SICK-R), not SentEval's."""
    from plmclaims.claims import load_claim

    claim = load_claim(repo / "replications" / "sts" / "released-checkpoint-reproduces.yaml")
    claim.data["controls"] = ["bow", "tfidf"]
    lexical = P.plan_claim(claim, load_tier("micro")).lexical
    assert {(r.evaluator, r.form, r.method) for r in lexical.values()} == {("mteb", "raw", "bow-cosine"), ("mteb", "raw", "tfidf-cosine")}
