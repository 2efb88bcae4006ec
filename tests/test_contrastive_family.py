"""The contrastive family (issue 10, T8): what each claim plans at each tier (training runs with their random-weights
controls, released checkpoints through the sts family's own runs, DINO not-run with its reason), what moves a run's
key, the one-line refusals of bad parameters, and real runs on a small encoder that the verdict engine reads."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import yaml

from plmclaims import plan as P
from plmclaims.claims import load_claim
from plmclaims.errors import UserError
from plmclaims.tiers import load_tier, with_overrides

HEADLINE = "contrastive/simcse-beats-declutr"


def _claim(repo, cid=HEADLINE):
    return load_claim(repo / "replications" / f"{cid}.yaml", repo / "replications")


def _edited(repo, tmp_path, edit, cid=HEADLINE):
    """A copy of a shipped claim with `edit(data)` applied, loaded from a claims folder under tmp_path."""
    data = yaml.safe_load((repo / "replications" / f"{cid}.yaml").read_text())
    edit(data)
    path = tmp_path / "claims" / f"{cid}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return lambda: load_claim(path, tmp_path / "claims")


def test_micro_plans_training_runs_with_controls_and_the_sts_baseline(repo):
    tier = load_tier("micro")
    ms = P.plan_claim(_claim(repo), tier).measurements
    simcse, declutr, mean = ms["simcse"], ms["declutr"], ms["encoder_mean"]
    section = tier["contrastive"]
    assert [(r.kind, r.instance, r.method, r.seed) for r in simcse.runs] == [
        ("contrastive", "micro-bert.s1", "simcse", s) for s in section["seeds"]]
    # at micro a mechanics check: one training seed for each side; the spread over seeds is the paper tier's
    assert len(section["seeds"]) == len(section["control_seeds"]) == 1 <= len(section["seeds"]) < len(
        load_tier("paper")["contrastive"]["seeds"])
    assert [(r.instance, r.seed) for r in simcse.controls] == [("micro-bert.random-s1", s) for s in section["control_seeds"]]
    assert simcse.runs[0].upstream[0].kind == "pretrain" and simcse.controls[0].upstream[0].kind == "tokenizer"
    # the same budget for every objective: the runs differ by objective and seed only
    assert simcse.runs[0].spec["tier"] == declutr.runs[0].spec["tier"] and simcse.runs[0].key != declutr.runs[0].key
    # mean pooling of the starting encoder is the sts family's score run, shared with sts claims
    assert {r.kind for r in mean.runs} == {"score"} and mean.runs[0].method == "mean"
    for released in ("simcse_released", "declutr_released"):
        assert ms[released].status == "not-run" and "hub" in ms[released].reason
    files = P.data_files(simcse.runs[0], tier, "/data")
    assert "/data/senteval/STS/STSBenchmark/sts-dev.csv" in files and "/data/senteval/SICK/SICK_test_annotated.txt" in files


def test_dino_is_not_run_and_consert_transductive_is_its_own_run(repo):
    ms = P.plan_claim(_claim(repo, "contrastive/simcse-beats-consert-bsl-dino"), load_tier("micro")).measurements
    assert ms["dino"].status == "not-run" and "generat" in ms["dino"].reason
    plain, trans = ms["consert"], ms["consert_transductive"]
    assert trans.runs[0].params.get("transductive") is True and "transductive" not in plain.runs[0].params
    assert {r.key for r in plain.runs}.isdisjoint(r.key for r in trans.runs)


def test_paper_evaluates_released_checkpoints_through_the_sts_runs(repo):
    tier = load_tier("paper")
    ours = P.plan_claim(_claim(repo, "contrastive/released-checkpoints-reproduce"), tier).measurements
    sts = P.plan_claim(_claim(repo, "sts/released-simcse-reproduces"), tier).measurements["simcse"]
    assert [r.key for r in ours["simcse_bert"].runs] == [r.key for r in sts.runs]  # one run for both families
    assert ours["declutr"].runs[0].kind == "score" and ours["declutr"].runs[0].method == "mean"
    assert ours["diffcse"].runs[0].method == "cls-before-pooler"
    prompt = ours["promptbert"].runs[0]  # no template pooling in the sts family: a contrastive run without training
    assert prompt.kind == "contrastive" and prompt.params == {"released": True} and prompt.instance == "promptbert-bert-base"
    headline = P.plan_claim(_claim(repo), tier).measurements
    assert {r.instance for r in headline["simcse"].runs} == {"roberta-base"}
    assert {r.instance for r in headline["simcse"].controls} == {"roberta-base.random-s1"}


def test_a_runs_key_covers_budget_corpus_and_params_but_not_the_seed_list(repo):
    tier = load_tier("micro")
    claim = _claim(repo)
    base = P.plan_claim(claim, tier).measurements["simcse"].runs[0]

    def first(**overrides):
        return P.plan_claim(claim, with_overrides(tier, overrides)).measurements["simcse"].runs[0]

    assert first(**{"contrastive.budget.steps": 7}).key != base.key
    assert first(**{"contrastive.corpus.max_sentences": 10}).key != base.key
    assert first(**{"contrastive.methods": {"simcse": {"temperature": 0.1}}}).key != base.key
    assert first(**{"contrastive.seeds": [1, 5, 9]}).key == base.key  # more seeds add runs, they do not move seed 1
    mean = P.plan_claim(claim, with_overrides(tier, {"contrastive.budget.steps": 7})).measurements["encoder_mean"]
    assert mean.runs == P.plan_claim(claim, tier).measurements["encoder_mean"].runs  # the sts runs do not move


@pytest.mark.parametrize("edit, field, allowed", [
    (lambda d: d["measurements"]["simcse"].update(params={"transductive": True}), "measurements.simcse.params.transductive",
     "allowed: weights, lr"),
    (lambda d: d["measurements"]["simcse"].update(params={"weights": "frozen"}), "measurements.simcse.params.weights",
     "'pretrained'"),
    (lambda d: d["measurements"]["simcse"].update(method="simcse-v2"), "measurements.simcse.method", "declutr"),
])
def test_bad_params_are_refused_in_one_line(repo, tmp_path, edit, field, allowed):
    with pytest.raises(UserError) as err:
        _edited(repo, tmp_path, edit)()
    msg = str(err.value)
    assert "\n" not in msg and "simcse-beats-declutr.yaml" in msg and f"field '{field}'" in msg and allowed in msg


def test_a_released_checkpoint_is_never_trained(repo, tmp_path):
    tier = load_tier("paper")
    wrong = _edited(repo, tmp_path, lambda d: d["measurements"]["simcse_released"].update(method="declutr"))()
    with pytest.raises(UserError, match=r"field 'measurements.simcse_released.method'.*allowed values: simcse"):
        P.plan_claim(wrong, tier)
    trained = _edited(repo, tmp_path, lambda d: d["measurements"]["simcse_released"].update(params={"lr": 1.0e-5}))()
    with pytest.raises(UserError, match=r"field 'measurements.simcse_released.params'.*evaluated, not trained"):
        P.plan_claim(trained, tier)


def _minilm_tier():
    """The tiny tier with all-MiniLM-L6-v2 (a packaged encoder) as the encoder to train, and also as a 'released
    PromptBERT' (so the no-training path with a template runs offline)."""
    tier = load_tier("tiny")
    return with_overrides(tier, {
        "roles.contrastive-roberta": {"asset": "all-minilm-l6-v2"},
        "roles.released-promptbert": {"asset": "minilm-as-promptbert"},
        "assets.minilm-as-promptbert": copy.deepcopy(tier["assets"]["all-minilm-l6-v2"]),
        "contrastive.released": {"minilm-as-promptbert": "promptbert"},
        "contrastive.budget": {"steps": 2, "batch_size": 8, "max_length": 16, "lr": 1.0e-4, "eval_every": 1},
        "contrastive.corpus": {"sources": ["ptb-train"], "max_sentences": 64, "seed": 0},
        "data.max_pairs": 40,
    })


@pytest.mark.slow
def test_real_runs_write_what_the_verdict_engine_reads(repo, tmp_path, data_root):
    from plmclaims.families.contrastive.runs import contrastive
    from plmclaims.families.sts.runs import encode, score
    from plmclaims.verdicts import decide_claim

    tier = _minilm_tier()
    claim = _edited(repo, tmp_path, lambda d: d["measurements"].update(promptbert_released={
        "role": "released-promptbert", "method": "promptbert"}))()
    cplan = P.plan_claim(claim, tier)
    ms = cplan.measurements
    assert ms["declutr"].status == "ok" and ms["promptbert_released"].runs[0].params == {"released": True}
    results, resources = tmp_path / "results", str(tmp_path / "resources")
    wanted = [r for n in ("simcse", "promptbert_released", "encoder_mean") for r in ms[n].runs + ms[n].controls]
    wanted += list(cplan.lexical.values())
    order = {"encode": 0, "contrastive": 1, "score": 2}  # a score run reads its encode run's vectors
    for run in sorted((r for r in P.all_runs(wanted).values() if r.kind in order), key=lambda r: order[r.kind]):
        out = results / run.path(".")
        run, view = P.run_from_json(run.to_json(tier))  # as the CLI hands it over (--spec)
        if run.kind == "contrastive":
            contrastive(view, run, str(data_root), resources, out, threads=1)
        elif run.kind == "encode":
            encode(view, run.instance, run.evaluator, run.form, str(data_root), resources, out.parent / "vectors.npz", 1)
        elif run.kind == "score":
            up = next((u for u in P.all_runs(wanted).values() if u.key == run.spec["upstream"].get("encode")), None)
            score(view, run, str(data_root), results / up.path(".") if up else None, out)
    trained = json.loads((results / ms["simcse"].runs[0].path(".")).read_text())["values"]
    assert [h["step"] for h in trained["history"]] == [0, 1, 2] and trained["best_step"] in (1, 2)
    assert trained["sentences_seen"] == 16 and trained["steps_per_second"] > 0 and trained["budget"]["steps"] == 2
    assert set(trained["benchmarks"]) == set(claim.protocol["benchmarks"]) and trained["corpus"]["sentences"] == 64
    released = json.loads((results / ms["promptbert_released"].runs[0].path(".")).read_text())["values"]
    assert released["released"] and released["history"][0]["step"] == 0 and released["sentences_seen"] == 0
    # the pairs are the sts score run's pairs, so the engine pairs them item by item
    a = np.load(results / ms["simcse"].runs[0].path(".").replace("metrics.json", "predictions.npz"))
    b = np.load(results / ms["encoder_mean"].runs[0].path(".").replace("metrics.json", "predictions.npz"))
    np.testing.assert_array_equal(a["STS12::gold"], b["STS12::gold"])
    np.testing.assert_array_equal(a["STS12::index"], b["STS12::index"])
    # decide the checks that these runs cover (DeCLUTR's runs are left out: the test budget is one objective)
    cplan.measurements = {n: ms[n] for n in ("simcse", "encoder_mean", "promptbert_released")}
    claim.data["checks"] = [c for c in claim.checks if {c.get("a"), c.get("b")} <= set(cplan.measurements)]
    result = decide_claim(cplan, tier, str(results))
    assert result["verdict"] in ("reproduced", "direction-holds", "not-reproduced", "inconclusive")
    check = result["checks"][0]
    assert check["outcome"] in ("holds", "contradicted", "inconclusive") and "random-weights" in str(result["measurements"]["simcse"]["floors"])
    # the verdict carries each trained run's budget, and the report shows it (acceptance: steps, batch, length,
    # sentences seen); the released checkpoint trained nothing, so it has no training record
    from plmclaims.report import markdown

    rows = result["measurements"]["simcse"]["training"]
    assert [(t["steps"], t["batch_size"], t["sentences_seen"]) for t in rows] == [(2, trained["budget"]["batch_size"], 16)]
    assert rows[0]["best_step"] == trained["best_step"] and "training" not in result["measurements"]["encoder_mean"]
    assert "training" not in result["measurements"]["promptbert_released"]
    md = markdown([result], tier)
    assert "## Training budgets" in md and f"| 2 x {trained['budget']['batch_size']}, " in md


def test_rankencoder_runs_score_with_its_own_similarity(tmp_path, data_root, monkeypatch):
    """RankEncoder's test-time score is 0.9 cos + 0.1 rank Spearman (its inference script), not plain cosine: the run
    writes the objective's similarity as its predictions and names the score in metrics.json."""
    from plmclaims.evaluation.senteval import cosine
    from plmclaims.families.contrastive.runs import contrastive
    from plmclaims.methods.contrastive import rankencoder

    seen = []
    real = rankencoder.Objective.similarity

    def spy(self, a, b, *args, **kwargs):
        seen.append((real(self, a, b, *args, **kwargs), cosine(a, b)))
        return seen[-1][0]

    monkeypatch.setattr(rankencoder.Objective, "similarity", spy)
    tier = with_overrides(_minilm_tier(), {"contrastive.budget.steps": 1, "data.max_pairs": 20})
    from plmclaims.families.contrastive.plan import contrastive_run

    run, view = P.run_from_json(contrastive_run(tier, "all-minilm-l6-v2", "rankencoder", "tokenised", 1, {}).to_json(tier))
    out = tmp_path / "r" / "metrics.json"
    contrastive(view, run, str(data_root), str(tmp_path / "resources"), out, threads=1)
    values = json.loads(out.read_text())["values"]
    assert "rank vectors" in values["score"]
    preds = np.load(out.with_name("predictions.npz"))
    assert len(seen) == len(values["benchmarks"]) == 7
    for ours, plain in seen:
        assert not np.allclose(ours, plain)  # the rank term moves every benchmark's scores
    # each benchmark's written predictions are what the objective's similarity returned for it
    for name in values["benchmarks"]:
        assert any(np.array_equal(preds[f"{name}::pred"], ours) for ours, _ in seen), name


# --- DiffCSE's generator: an asset the tier names (paper: distilbert-base-uncased, run_diffcse.sh --generator_name)

DIFFCSE = "contrastive/diffcse-beats-simcse"
GENERATOR = "distilbert-base-uncased"


def _diffcse_runs(repo, tier, name="diffcse"):
    pm = P.plan_claim(_claim(repo, DIFFCSE), tier).measurements[name]
    return pm.runs + pm.controls


def test_paper_diffcse_runs_carry_the_generator_asset_and_it_moves_their_keys(repo):
    tier = load_tier("paper")
    assert tier["contrastive"]["methods"]["diffcse"]["generator"] == GENERATOR
    runs = _diffcse_runs(repo, tier)
    assert runs and {r.instance for r in runs} == {"bert-base-uncased", "bert-base-uncased.random-s1"}
    for r in runs:  # the generator's name in the params, its asset (hub id, revision) in the view the key hashes
        assert r.params["generator"] == GENERATOR
        assert r.spec["tier"]["assets"][GENERATOR]["id"] == "distilbert/distilbert-base-uncased"
    assert all(GENERATOR not in r.spec["tier"]["assets"] for r in _diffcse_runs(repo, tier, "simcse"))
    keys = {r.key for r in runs}
    pinned = with_overrides(tier, {f"assets.{GENERATOR}.revision": "0" * 40})
    other = with_overrides(tier, {"contrastive.methods.diffcse.generator": "bert-base-uncased"})
    assert keys.isdisjoint(r.key for r in _diffcse_runs(repo, pinned))  # another commit of the generator
    assert keys.isdisjoint(r.key for r in _diffcse_runs(repo, other))  # another generator
    # SimCSE reads no generator: its runs stay where they are
    assert [r.key for r in _diffcse_runs(repo, pinned, "simcse")] == [r.key for r in _diffcse_runs(repo, tier, "simcse")]


def test_micro_diffcse_uses_the_encoders_own_head_and_an_explicit_empty_generator_is_the_same_run(repo):
    tier = load_tier("micro")
    runs = _diffcse_runs(repo, tier)
    assert runs and all("generator" not in r.params and set(r.spec["tier"]["assets"]) == {"micro-bert"} for r in runs)
    spelt = with_overrides(tier, {"contrastive.methods": {**tier["contrastive"].get("methods", {}),
                                                          "diffcse": {**tier["contrastive"].get("methods", {}).get("diffcse", {}), "generator": ""}}})
    assert [r.key for r in _diffcse_runs(repo, spelt)] == [r.key for r in runs]


def test_prefetch_lists_the_generator_at_paper_only(repo, tmp_path, monkeypatch):
    from plmclaims.assets import needed_assets

    monkeypatch.setenv("PLMCLAIMS_HUB_DIR", str(tmp_path))  # no prefetch folder: the stand-in guard has nothing to compare
    paper = load_tier("paper")
    found = {a.repo_id: a for a in needed_assets([P.plan_claim(_claim(repo, DIFFCSE), paper)], paper)}
    assert found["distilbert/distilbert-base-uncased"].why == f"asset {GENERATOR}"
    assert "google-bert/bert-base-uncased" in found
    without = with_overrides(paper, {"contrastive.methods.diffcse": {"lr": 7.0e-6}})
    assert "distilbert/distilbert-base-uncased" not in {
        a.repo_id for a in needed_assets([P.plan_claim(_claim(repo, DIFFCSE), without)], without)}


@pytest.mark.parametrize("name, why", [("nosuch-model", "not a transformer asset"), ("lexical", "not a transformer asset"),
                                       ("t5-small-lm-adapt", "a t5 model, which has no masked-LM head"),
                                       ("gpt2-medium", "not a transformer asset")])
def test_a_generator_that_is_not_a_masked_lm_asset_is_refused_in_one_line(repo, name, why):
    tier = with_overrides(load_tier("paper"), {"contrastive.methods.diffcse.generator": name})
    with pytest.raises(UserError) as err:
        P.plan_claim(_claim(repo, DIFFCSE), tier)
    msg = str(err.value)
    assert "\n" not in msg and "paper.yaml" in msg and "field 'contrastive.methods.diffcse.generator'" in msg
    assert f"got {name!r}, {why}" in msg and GENERATOR in msg and "leave it out" in msg
    allowed = msg.split("allowed values: ")[1]  # masked LMs of the BERT encoder's family only
    assert "bert-base-uncased" in allowed and GENERATOR in allowed
    assert not {"t5-small-lm-adapt", "roberta-base", "gpt2-medium"} & set(allowed.split(", "))


def test_a_generator_of_another_family_than_the_encoder_is_refused_at_plan_time(repo):
    """DiffCSE's generator reads the encoder tokenizer's ids: a RoBERTa generator for the BERT encoder is refused
    when the tier is planned, naming both."""
    tier = with_overrides(load_tier("paper"), {"contrastive.methods.diffcse.generator": "roberta-base"})
    with pytest.raises(UserError) as err:
        P.plan_claim(_claim(repo, DIFFCSE), tier)
    msg = str(err.value)
    assert "\n" not in msg and "got 'roberta-base', a roberta model, whose vocabulary is not the bert encoder" in msg


def test_a_generator_of_the_encoders_family_with_another_vocabulary_is_refused_at_plan_time(repo):
    """bert-large-cased is a BERT masked LM, but its 28996 cased word pieces are not bert-base-uncased's 30522 ids:
    refused when the tier is planned (the published tokenizers are known offline), and not offered as allowed."""
    cased = {"kind": "transformer", "source": "hub", "id": "google-bert/bert-large-cased", "max_length": 512}
    tier = with_overrides(load_tier("paper"), {"contrastive.methods.diffcse.generator": "bert-large-cased",
                                               "assets.bert-large-cased": cased})
    with pytest.raises(UserError) as err:
        P.plan_claim(_claim(repo, DIFFCSE), tier)
    msg = str(err.value)
    assert "\n" not in msg and "got 'bert-large-cased', a bert model with the wordpiece-cased tokenizer of 28996 ids" in msg
    assert "not the wordpiece tokenizer of 30522 ids the encoder 'bert-base-uncased" in msg
    allowed = msg.split("allowed values: ")[1].split(", or leave")[0].split(", ")
    assert "bert-large-cased" not in allowed and {GENERATOR, "bert-base-uncased"} <= set(allowed)


def test_a_diffcse_run_loads_its_generator_from_the_tiers_asset(repo, tmp_path, data_root):
    """The run resolves the generator asset to its folder (here a local tiny DistilBERT MLM with MiniLM's vocabulary),
    hands it to the objective, and records which generator it read."""
    from transformers import AutoTokenizer, DistilBertConfig, DistilBertForMaskedLM

    from plmclaims import runs
    from plmclaims.families.contrastive.plan import contrastive_run
    from plmclaims.families.contrastive.runs import contrastive
    from plmclaims.tiers import Instance

    tier = _minilm_tier()
    gen = tmp_path / "gen"
    tok = AutoTokenizer.from_pretrained(runs.model_source(tier, Instance.parse("all-minilm-l6-v2", tier), str(tmp_path)))
    DistilBertForMaskedLM(DistilBertConfig(vocab_size=len(tok), dim=32, n_layers=1, n_heads=2, hidden_dim=64,
                                           max_position_embeddings=64)).save_pretrained(gen)
    tok.save_pretrained(gen)
    tier = with_overrides(tier, {"assets.tiny-generator": {"kind": "transformer", "source": "local", "path": str(gen)},
                                 "contrastive.budget.steps": 1, "data.max_pairs": 20})
    planned = contrastive_run(tier, "all-minilm-l6-v2", "diffcse", "tokenised", 1, {"generator": "tiny-generator"})
    run, view = P.run_from_json(planned.to_json(tier))
    assert view["assets"]["tiny-generator"]["path"] == str(gen)  # the rule's tier is the run's view: it holds the asset
    out = tmp_path / "r" / "metrics.json"
    contrastive(view, run, str(data_root), str(tmp_path / "resources"), out, threads=1)
    values = json.loads(out.read_text())["values"]
    assert values["generator"] == {"asset": "tiny-generator", "model": str(gen), "revision": None}
    assert values["objective_params"]["generator"] == str(gen) and values["best_step"] in (0, 1)


def test_training_figure_draws_each_measure_from_the_runs_that_recorded_it(tmp_path):
    from plmclaims import report

    def run(name, history, random=False):
        path = tmp_path / "runs" / "contrastive" / ("m.random-s1" if random else "m.s1") / name / "s1" / "metrics.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"values": {"history": history, "random_weights": random}}))
        return str(path)

    new = [{"step": s, "stsb_dev_spearman": 0.3, "alignment": 0.1, "uniformity": -0.5} for s in (0, 50, 100)]
    old = [{"step": s, "stsb_dev_spearman": 0.3} for s in (0, 50, 100)]  # a run from before the measures
    released = [{"step": 0, "stsb_dev_spearman": 0.7, "alignment": 0.1, "uniformity": -1.0}]  # evaluated, not trained
    runs = [run("simcse", new), run("simcse", new, random=True), run("declutr", old), run("diffcse", released),
            str(tmp_path / "runs" / "contrastive" / "gone" / "metrics.json")]
    verdicts = [{"protocol": {"family": "contrastive"}, "runs": runs}, {"protocol": {"family": "sts"}, "runs": runs}]
    drawn = report.training_plot(verdicts, tmp_path / "fig.png")
    assert drawn == {"stsb_dev_spearman": 3, "uniformity": 2, "alignment": 2}
    assert (tmp_path / "fig.png").stat().st_size > 0
    assert report.training_plot([verdicts[1]], tmp_path / "none.png") == {k: 0 for k in drawn}
