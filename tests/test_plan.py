"""Planning: claims expand into shared runs; roles a tier lacks become not-run with the reason."""
from __future__ import annotations

import pytest

from plmclaims import plan as P
from plmclaims.families.glue.plan import finetune_run
from plmclaims.families.lm_tasks.plan import lm_run, lm_tasks_dir
from plmclaims.families.sts.plan import encode_run, score_run
from plmclaims.claims import load_claims
from plmclaims.errors import UserError
from plmclaims.tiers import Instance, load_tier, with_overrides


def _plans(repo, tier):
    return {p.claim.id: p for p in P.plan_all(load_claims(repo / "replications"), load_tier(tier))}


def test_claims_share_encodes_and_seeds_expand(repo):
    tier = load_tier("micro")
    plans = _plans(repo, "micro")
    glove, whiten = plans["sts/glove-avg-beats-bert-avg"], plans["sts/whitening-improves-bert"]
    assert [r.instance for r in glove.measurements["bert_avg"].runs] == ["micro-bert.s1", "micro-bert.s2"]
    assert [r.instance for r in glove.measurements["bert_avg"].controls] == ["micro-bert.random-s1", "micro-bert.random-s2"]
    encodes = {u for p in (glove, whiten) for r in p.score_runs() for u in r.upstream if u.kind == "encode"}
    # both claims are measured on the pre-trained LM too (their models: section), with its one twin
    assert {(u.evaluator, u.instance, u.form) for u in encodes} == {("senteval", i, "tokenised") for i in
                       ("micro-bert.s1", "micro-bert.s2", "micro-bert.random-s1", "micro-bert.random-s2", "glove-6b-50d",
                        "gemma-3-270m", "gemma-3-270m.random-s1")}
    # every pooling of one instance reads the same encode run (one forward pass)
    assert len(encodes) == 7
    # the lexical controls are one run shared by both claims
    assert glove.lexical["tfidf"] == whiten.lexical["tfidf"]


def test_fit_corpus_substitution_and_unsupported(repo):
    micro = _plans(repo, "micro")["sts/whitening-improves-bert"].measurements["bert_whitening"]
    assert micro.status == "ok" and {r.post for r in micro.runs} == {"whitening-target"}
    paper = _plans(repo, "paper")["sts/whitening-improves-bert"].measurements["bert_whitening"]
    assert paper.status == "ok" and {r.post for r in paper.runs} == {"whitening-nli"}
    # fitted once per model on the NLI sentences, which prefetch fetches at their pinned revision
    fits = {u for r in paper.runs for u in r.upstream if u.kind == "fitencode"}
    assert {u.corpus for u in fits} == {"nli"}
    from plmclaims.assets import needed_assets
    from plmclaims.tiers import load_tier

    nli = load_tier("paper")["fit_corpora"]["nli"]
    wanted = [a for a in needed_assets([_plans(repo, "paper")["sts/whitening-improves-bert"]], load_tier("paper"))
              if a.repo_id == nli["id"]]
    assert [(a.repo_type, a.revision) for a in wanted] == [("dataset", nli["revision"])]


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


def test_encode_reads_the_right_upstream_runs():
    tier = load_tier("micro")
    trained = encode_run(tier, "senteval", "micro-bert.s1", "tokenised").upstream
    assert [(u.kind, u.asset, u.seed) for u in trained] == [("pretrain", "micro-bert", 1)]
    assert trained[0].path("res") == f"res/models/micro-bert.s1/{trained[0].key}/metrics.json"
    random = encode_run(tier, "senteval", "micro-bert.random-s2", "tokenised").upstream
    assert [(u.kind, u.asset) for u in random] == [("tokenizer", "micro-bert")]
    assert encode_run(tier, "senteval", "glove-6b-50d", "tokenised").upstream == ()
    assert P.model_dir("res", tier, "micro-bert.s1") == f"{trained[0].dir('res')}/checkpoints/step-600"


def test_lexical_controls_score_the_claims_own_pairs(repo):
    """An MTEB-protocol claim's controls must score MTEB's pairs (raw text, 9927-pair SICK-R), not SentEval's."""
    from plmclaims.claims import load_claim

    claim = load_claim(repo / "replications" / "sts" / "released-checkpoint-reproduces.yaml")
    claim.data["controls"] = ["bow", "tfidf"]
    lexical = P.plan_claim(claim, load_tier("micro")).lexical
    assert {(r.evaluator, r.form, r.method) for r in lexical.values()} == {("mteb", "raw", "bow-cosine"), ("mteb", "raw", "tfidf-cosine")}


# ---------------------------------------------------------------- run identity

def _finetune(tier, params=None, seed=1):
    return finetune_run(tier, "micro-bert.s1", "lora", "RTE", seed, params or {"r": 8, "lr": 1e-3})


def _score(tier, instance="micro-bert.s1"):
    return score_run(tier, "senteval", instance, "tokenised", "mean")


@pytest.mark.parametrize("override", [
    {"finetune.budget.max_train": 17},                     # the budget
    {"finetune.budget.max_dev": 25},                       # dev sampling
    {"data.glue.path": "{data_root}/glue-other"},           # the data source
    {"assets.micro-bert.train.steps": 601},                 # the pre-training it starts from
    {"assets.micro-bert.model.vocab": 3000},                # ... through the tokenizer too
])
def test_finetune_key_follows_every_ingredient(override):
    tier = load_tier("micro")
    assert _finetune(tier).key != _finetune(with_overrides(tier, override)).key


def test_finetune_key_follows_method_params_and_seed():
    tier = load_tier("micro")
    base = _finetune(tier)
    assert base.key == _finetune(tier, {"lr": 1e-3, "r": 8}).key  # order of keys is no difference
    assert base.key != _finetune(tier, {"r": 16, "lr": 1e-3}).key
    assert base.key != _finetune(tier, seed=2).key
    assert base.key != finetune_run(tier, "micro-bert.s1", "adapter", "RTE", 1, {"r": 8, "lr": 1e-3}).key


@pytest.mark.parametrize("override", [
    {"lm.budget.max_train": 3},                            # another family's budget
    {"finetune.methods.adapter.lr": 0.5},                  # another method's defaults
    {"finetune.seeds": [1, 2, 3]},                         # more seeds: the existing ones stay
    {"assets.micro-bert.seeds": [1, 2, 3]},                # more pre-training seeds
    {"encode.max_length": 64},                             # encode settings the run never reads
    {"bootstrap.resamples": 7},                            # judging, not running
    {"name": "renamed", "_path": "/elsewhere/tier.yaml"},  # where the tier file lives
])
def test_finetune_key_ignores_what_cannot_change_it(override):
    tier = load_tier("micro")
    assert _finetune(tier).key == _finetune(with_overrides(tier, override)).key


@pytest.mark.parametrize("override, changes", [
    ({"encode.max_length": 64}, True),                     # truncation changes the vectors
    ({"data.max_pairs": 100}, True),                       # sampling
    ({"data.sts.path": "{data_root}/other"}, True),        # data source
    ({"assets.micro-bert.train.lr": 1e-4}, True),          # the model it encodes with
    ({"encode.batch_size": 7}, False),                     # numerics only: decided not to rerun for it
    ({"data.glue.path": "{data_root}/x"}, False),
])
def test_score_key_follows_encode_settings_through_its_encode_run(override, changes):
    tier = load_tier("micro")
    assert (_score(tier).key != _score(with_overrides(tier, override)).key) == changes


def test_random_twin_ignores_the_training_schedule_but_not_the_tokenizer():
    tier = load_tier("micro")
    twin = lambda t: _score(t, "micro-bert.random-s1").key  # noqa: E731
    assert twin(tier) == twin(with_overrides(tier, {"assets.micro-bert.train.steps": 5}))
    assert twin(tier) != twin(with_overrides(tier, {"assets.micro-bert.model.vocab": 3000}))


def test_lm_zero_shot_ignores_the_training_budget_but_not_eval_limit():
    tier = load_tier("tiny")
    zs = lambda t: lm_run(t, "tiny-lm", "zero-shot", "RTE", 0, {}).key  # noqa: E731
    trained = lambda t: lm_run(t, "tiny-lm", "prefix-tuning", "RTE", 1, {"lr": 1e-3}).key  # noqa: E731
    more = with_overrides(tier, {"lm.budget.max_train": 32})
    assert zs(tier) == zs(more) and trained(tier) != trained(more)
    limit = with_overrides(tier, {"lm.eval_limit": 12})
    assert zs(tier) != zs(limit) and trained(tier) != trained(limit)
    assert zs(tier) == zs(with_overrides(tier, {"lm.eval_batch_size": 3}))


def test_pretrain_key_covers_model_and_train_spec():
    tier = load_tier("micro")
    key = lambda t: P.pretrain_run(t, "micro-bert", 1).key  # noqa: E731
    for override in ({"assets.micro-bert.train.steps": 601}, {"assets.micro-bert.model.layers": 3}):
        assert key(tier) != key(with_overrides(tier, override))
    assert key(tier) != P.pretrain_run(tier, "micro-bert", 2).key
    assert key(tier) == key(with_overrides(tier, {"assets.micro-bert.seeds": [1]}))


def test_layouts_give_both_the_rule_pattern_and_the_path(repo):
    """The rule's output pattern, filled with a run's fields, is the run's path: one definition for both."""
    import re

    tier = load_tier("tiny")
    plans = P.plan_all(load_claims(repo / "replications"), tier)
    runs = P.all_runs(r for p in plans for r in p.score_runs())
    # the tiny tier plans every run kind the families declare (verdicts are not runs; the corpus is the tokenizer
    # rule's input file, not a planned run; a GGUF joined from package parts is the micro tier's Gemma, whose plan
    # tests/test_pretrained_lm.py checks)
    assert {r.kind for r in runs.values()} == set(P.LAYOUTS) - {"verdict", "corpus", "gguf"}
    for run in runs.values():
        pattern = run.layout().pattern("ROOT")
        regex = re.sub(r"\\\{(\w+)\\\}", lambda m: f"(?P<{m.group(1)}>[^/]+)", re.escape(pattern))
        match = re.fullmatch(regex, run.path("ROOT"))
        assert match and match.group("key") == run.key, (pattern, run.path("ROOT"))
        assert {k: v for k, v in match.groupdict().items() if k != "key"} == {k: str(v) for k, v in run.spec["fields"].items()}


def test_spec_round_trips_through_the_cli_and_cannot_be_forged():
    tier = load_tier("tiny")
    run = finetune_run(tier, "micro-bert.s1", "lora", "RTE", 1, {"r": 4, "lr": 1e-3})
    back, view = P.run_from_json(run.to_json(tier))
    assert back == run and back.params == {"r": 4, "lr": 1e-3} and view["name"] == "tiny"
    # the run sees the budget it was planned with, and no other section of the tier
    assert view["finetune"] == {"budget": tier["finetune"]["budget"]} and "lm" not in view
    with pytest.raises(UserError, match="--spec: not JSON"):
        P.run_from_json("{oops")


def test_verdict_params_follow_the_claim_and_the_bootstrap_only(repo):
    tier = load_tier("tiny")
    claims = load_claims(repo / "replications")
    cplan = P.plan_claim(claims[0], tier)
    base = P.verdict_params(cplan, tier)
    assert base == P.verdict_params(cplan, with_overrides(tier, {"finetune.budget.max_train": 3}))
    assert base != P.verdict_params(cplan, with_overrides(tier, {"bootstrap.resamples": 7}))
    claims[0].data["tolerance"] = 9.0
    assert base != P.verdict_params(P.plan_claim(claims[0], tier), tier)


def test_a_run_finds_its_upstream_runs_from_its_own_spec(repo):
    """runs.py locates the runs a run reads from the tier view in its --spec: those folders must be the planned ones."""
    tier = load_tier("tiny")
    plans = P.plan_all(load_claims(repo / "replications"), tier)
    for run in P.all_runs(r for p in plans for r in p.score_runs()).values():
        back, view = P.run_from_json(run.to_json(tier))
        for up in run.upstream:
            if up.kind == "pretrain":
                assert P.model_dir("R", view, run.instance).startswith(up.dir("R") + "/")
            elif up.kind == "tokenizer" and run.kind != "pretrain":
                assert P.tokenizer_dir("R", view, up.asset) == up.dir("R")
            elif up.kind == "lm_model":
                assert P.lm_model_dir("R", view, run.instance) == f"{up.dir('R')}/model"
            elif up.kind == "lm_tasks":
                assert lm_tasks_dir("R", back) == up.dir("R")


def test_a_family_without_a_rule_chain_is_not_run_with_the_reason(tmp_path):
    """A claim of a catalog family with no rule chain (generation) validates and plans as not-run, never as another
    family's runs (they would fail after compute)."""
    import yaml

    from plmclaims.claims import load_claim

    data = {"id": "generation/synthetic", "version": 1, "statement": "Prefix tuning rises with the prefix length.",
            "seed_point": "T12", "source": {"paper": "Test", "table": "T1"},
            "protocol": {"family": "generation", "evaluator": "lm-eval", "benchmarks": ["e2e"], "split": "test", "metric": "bleu"},
            "measurements": {"probe": {"role": "causal-lm", "method": "prefix-tuning"}},
            "checks": [{"type": "trend", "measurement": "probe", "axis": "layer", "shape": "rises", "scope": "mechanics"}]}
    path = tmp_path / "claims" / "generation" / "synthetic.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(data))
    claim = load_claim(path, tmp_path / "claims")
    pm = P.plan_claim(claim, load_tier("micro")).measurements["probe"]
    assert pm.status == "not-run" and pm.runs == [] and "generation family is not built yet" in pm.reason
