"""The paper tier runs the papers' recipes (issue 35): every trained method has a complete recipe, a missing one is
refused before anything runs, recipes narrow by model and task, a test tier caps them, and docs/recipes.md sets every
setting beside its source (plmclaims.recipes, plmclaims.recipes_doc)."""
from __future__ import annotations

import copy

import pytest

from plmclaims import recipes, recipes_doc
from plmclaims.claims import load_claims
from plmclaims.errors import UserError
from plmclaims.plan import all_runs, plan_all
from plmclaims.tiers import load_tier


@pytest.fixture(scope="module")
def paper():
    return load_tier("paper")


def _cases(tier, section, method):
    body = tier[section]["methods"][method] or {}
    cases = [(None, None)] + [(None, t) for t in body.get("tasks", {})]
    for asset, at in body.get("assets", {}).items():
        cases += [(asset, None)] + [(asset, t) for t in {**body.get("tasks", {}), **at.get("tasks", {})}]
    return cases


def test_every_paper_method_states_every_setting_of_its_recipe(paper):
    """Each method entry of each trained section, and each of its model and task entries resolved as a run resolves
    them, states every setting recipes.SECTIONS requires, in the entry itself (never the shared budget)."""
    assert paper["recipes"] == "complete"
    seen = 0
    for section, spec in recipes.SECTIONS.items():
        for method in paper.get(section, {}).get("methods", {}):
            for asset, task in _cases(paper, section, method):
                recipe = recipes.entry(paper, section, method, asset, task)
                assert recipes.missing(recipe, section) == [], (section, method, asset, task)
                for key, allowed in spec.choices.items():
                    assert recipe[key] in allowed, (section, method, key)
                seen += 1
    assert seen >= 20  # the contrastive objectives, GLUE methods with their models and tasks, the LM and FPT recipes


def test_every_trained_method_the_paper_claims_plan_has_a_recipe(repo, paper):
    """Planning every claim resolves every trained run's recipe; each fine-tuning run's view holds its recipe's budget
    and each contrastive run its objective's (the run reads nothing else)."""
    plans = plan_all(load_claims(repo / "replications"), paper)
    runs = all_runs(r for p in plans for r in p.score_runs()).values()
    tuned = [r for r in runs if r.kind in ("finetune", "finetuned")]
    assert tuned
    for r in tuned:
        budget = r.spec["tier"]["finetune"]["budget"]
        assert recipes.missing({**budget, **r.params}, "finetune") == [], r
    trained = [r for r in runs if r.kind == "contrastive" and not r.params.get("released")]
    assert {r.method for r in trained} == {"simcse", "diffcse", "declutr", "consert", "bsl", "promptbert", "rankencoder"}
    for r in trained:
        assert recipes.missing({**r.spec["tier"]["contrastive"]["budget"], **r.params}, "contrastive") == [], r


def test_a_method_without_a_recipe_is_refused_at_validation_in_one_line(repo, paper):
    tier = copy.deepcopy(paper)
    del tier["contrastive"]["methods"]["promptbert"]
    with pytest.raises(UserError) as err:
        plan_all(load_claims(repo / "replications", ["contrastive/promptbert-beats-simcse"]), tier)
    msg = str(err.value)
    assert "\n" not in msg and "paper.yaml" in msg and "field 'contrastive.methods.promptbert': missing" in msg
    assert "recipes: complete" in msg and "lr, epochs/steps, batch_size" in msg
    assert "methods with a recipe: bsl, consert, declutr, diffcse, rankencoder, simcse" in msg


def test_without_complete_recipes_a_method_takes_the_shared_budget(repo):
    """The micro tier runs one budget for every objective: a method without an entry is no error there, and its runs'
    budget is the section's, exactly as planned before recipes existed."""
    micro = load_tier("micro")
    assert "recipes" not in micro and "simcse" not in micro["contrastive"]["methods"]
    assert recipes.budget(micro, "contrastive", "simcse") == micro["contrastive"]["budget"]
    assert recipes.params(micro, "contrastive", "declutr") == {"lr": 1.0e-3}
    assert recipes.budget(micro, "finetune", "lora", "all-minilm-l6-v2", "SST-2") == micro["finetune"]["budget"]


def _overlay(tmp_path, text):
    path = tmp_path / "t.yaml"
    path.write_text(f"base: {recipes_doc.SOURCES_DIR.parent / 'tiers' / 'paper.yaml'}\nname: t\n{text}")
    return path


def test_an_incomplete_or_unknown_setting_is_refused_when_the_tier_loads(tmp_path):
    with pytest.raises(UserError) as err:
        load_tier(str(_overlay(tmp_path, "contrastive: {methods: {bsl: {lr: null}}}\n")))
    msg = str(err.value)
    assert "\n" not in msg and "field 'contrastive.methods.bsl'" in msg and "does not state lr" in msg
    with pytest.raises(UserError) as err:
        load_tier(str(_overlay(tmp_path, "finetune: {methods: {lora: {tasks: {RTE: {optimizer: sgd}}}}}\n")))
    assert "field 'finetune.methods.lora.tasks.RTE.optimizer': got 'sgd'; allowed values: adamw, adafactor" in str(err.value)
    with pytest.raises(UserError) as err:
        load_tier(str(_overlay(tmp_path, "finetune: {methods: {lora: {assets: {nosuch: {lr: 1.0}}}}}\n")))
    assert "field 'finetune.methods.lora.assets.nosuch': no such asset" in str(err.value)


def test_a_recipe_narrows_by_model_and_task(paper):
    """Full fine-tuning follows the paper that fine-tuned each model; LoRA's scripts set rate, epochs and batch per
    task; a model's task entry narrows the model's entry."""
    base = recipes.budget(paper, "finetune", "full-finetuning", "bert-base-uncased", "MNLI")
    assert (base["epochs"], base["batch_size"], base["max_length"], base["selection"]) == (3, 32, 128, "last")
    rte = recipes.budget(paper, "finetune", "full-finetuning", "roberta-base", "RTE")
    assert (rte["epochs"], rte["batch_size"], rte["warmup_ratio"], rte["selection"]) == (10, 16, 0.06, "best-dev")
    assert recipes.params(paper, "finetune", "full-finetuning", "roberta-base", "RTE") == {"lr": 2.0e-5}
    assert recipes.params(paper, "finetune", "full-finetuning", "roberta-base", "SST-2") == {"lr": 1.0e-5}
    lora = recipes.budget(paper, "finetune", "lora", "roberta-base", "RTE")
    assert (lora["epochs"], lora["batch_size"]) == (80, 256)
    assert recipes.params(paper, "finetune", "lora", "roberta-base", "RTE") == {"lr": 5.0e-4}
    t5 = recipes.budget(paper, "finetune", "prompt-tuning", "t5-base-lm-adapt", "RTE")
    assert (t5["optimizer"], t5["schedule"], t5["steps"], t5["head_lr"]) == ("adafactor", "constant", 30000, 1.0e-3)
    assert "epochs" not in t5
    roberta = recipes.budget(paper, "contrastive", "simcse", "roberta-base")
    assert (roberta["batch_size"], recipes.params(paper, "contrastive", "simcse", "roberta-base")["lr"]) == (512, 1.0e-5)
    assert recipes.budget(paper, "contrastive", "simcse", "bert-base-uncased")["batch_size"] == 64


def test_a_recipes_own_corpus_replaces_the_sections_and_keeps_its_sample():
    tier = {"contrastive": {"corpus": {"sources": ["wiki1m"], "revision": "a" * 40, "max_sentences": 256, "seed": 3},
                            "methods": {"declutr": {"corpus": {"sources": ["wikitext-103"], "revision": "b" * 40}}}}}
    assert recipes.corpus(tier, "contrastive", "declutr") == {"sources": ["wikitext-103"], "revision": "b" * 40,
                                                                "max_sentences": 256, "seed": 3}
    assert recipes.corpus(tier, "contrastive", "simcse") == tier["contrastive"]["corpus"]
    assert "corpus" not in recipes.params(tier, "contrastive", "declutr")


def test_a_test_tiers_limit_caps_every_recipe():
    """The rehearsal runs the paper tier's recipes for a few steps: numbers capped, a cap on steps bounding a recipe in
    epochs, everything else as at the paper tier."""
    tier = load_tier("rehearsal")
    lora = recipes.budget(tier, "finetune", "lora", "roberta-base", "RTE")
    assert (lora["epochs"], lora["steps"], lora["batch_size"], lora["max_length"], lora["max_train"]) == (1, 2, 4, 32, 8)
    assert (lora["weight_decay"], lora["warmup_ratio"], lora["selection"]) == (0.1, 0.06, "best-dev")
    prompt = recipes.budget(tier, "finetune", "prompt-tuning", "t5-small-lm-adapt", "SST-2")
    assert (prompt["steps"], prompt["optimizer"]) == (2, "adafactor")
    promptbert = recipes.budget(tier, "contrastive", "promptbert", "bert-base-uncased")
    assert (promptbert["epochs"], promptbert["steps"], promptbert["batch_size"], promptbert["eval_max_length"]) == (1, 2, 4, 32)
    assert recipes.budget(tier, "transfer", "frozen-transfer")["steps"] == 2


def test_contrastive_epochs_become_steps_over_the_corpus_read():
    from plmclaims.data.sentences import Corpus
    from plmclaims.families.contrastive.plan import estimated_steps
    from plmclaims.families.contrastive.runs import schedule

    corpus = Corpus(sentences=[f"s{i}" for i in range(100)], documents=[["d"]] * 9)
    budget = {"epochs": 2, "batch_size": 8, "warmup_ratio": 0.25, "lr": 1e-5, "max_length": 32, "eval_every": 5}
    out = schedule(budget, corpus, "simcse")
    assert (out["steps"], out["warmup"]) == (24, 6) and "epochs" not in out and "warmup_ratio" not in out
    assert schedule({**budget, "steps": 5}, corpus, "simcse")["steps"] == 5  # a cap binds
    assert schedule(budget, corpus, "declutr")["steps"] == 2  # documents: 9 // 8 a pass
    assert estimated_steps({"epochs": 2, "batch_size": 64}, {"sources": ["wiki1m"]}) == 2 * 15625
    assert estimated_steps({"steps": 7, "batch_size": 64}, {"sources": ["wiki1m"]}) == 7


def test_docs_recipes_is_what_the_tier_and_its_sources_make(repo, paper):
    sources = recipes_doc.load_sources(paper)
    assert recipes_doc.check(paper, sources) == []
    committed = (repo / "docs" / "recipes.md").read_text()
    assert committed == recipes_doc.render(paper, sources), "docs/recipes.md is stale: run `plmclaims recipes`"
    for case in recipes_doc.recipe_cases(paper):  # every recipe of the tier's methods has its table
        assert any(e["recipe"].get("method") == case[1] and e["recipe"]["section"] == case[0]
                   for e in sources["recipes"] if "method" in e["recipe"])


def test_the_sources_check_finds_gaps_and_unexplained_differences(paper):
    sources = recipes_doc.load_sources(paper)
    broken = copy.deepcopy(sources)
    simcse = next(e for e in broken["recipes"] if e["id"] == "contrastive/simcse")
    simcse["rows"]["batch"]["value"] = {"batch_size": 128}
    del simcse["rows"]["precision"]
    simcse["rows"]["lr"]["ref"] = "nosuch"
    broken["recipes"] = [e for e in broken["recipes"] if e["id"] != "contrastive/bsl"]
    problems = "\n".join(recipes_doc.check(paper, broken))
    assert "contrastive/simcse: row 'batch' differs from its source (batch_size: tier 64, source 128)" in problems
    assert "contrastive/simcse: row 'precision' missing" in problems
    assert "row 'lr' cites 'nosuch', not in links" in problems
    assert "recipe ('contrastive', 'bsl', None) of tier paper has no sources entry" in problems
    explained = copy.deepcopy(sources)
    row = next(e for e in explained["recipes"] if e["id"] == "contrastive/simcse")["rows"]["batch"]
    row["value"], row["differs"] = {"batch_size": 128}, "a stated reason"
    assert recipes_doc.check(paper, explained) == []


# ---------------------------------------------------------------- the loops honour the recipe

@pytest.fixture(scope="module")
def rte(data_root):
    from plmclaims import training
    from plmclaims.data import glue

    train = glue.load_local(data_root / "glue", "RTE", "train")
    return train, training.sample(glue.load_local(data_root / "glue", "RTE", "dev"), 40, 0)


def test_best_dev_selection_reports_the_best_epoch_and_a_step_budget_cuts_the_last(minilm_path, rte):
    """selection best-dev scores dev after every epoch and keeps the best epoch's predictions (the same as a run that
    stops there would give); a recipe in steps trains exactly that many, the last epoch cut short."""
    import numpy as np

    from plmclaims import training

    train, dev = rte
    budget = {"epochs": 3, "batch_size": 8, "max_length": 48, "max_train": 24, "selection": "best-dev"}
    values, preds = training.finetune(minilm_path, "full-finetuning", {"lr": 5e-5}, train, dev, budget, seed=1,
                                      progress=False)
    sel = values["selection"]
    assert sel["rule"] == "best-dev" and sel["metric"] == "accuracy" and len(sel["dev_by_epoch"]) == 3
    assert sel["epoch"] == 1 + int(np.argmax(sel["dev_by_epoch"]))
    assert values["benchmarks"]["RTE"]["accuracy"] == pytest.approx(max(sel["dev_by_epoch"]))
    steps, _ = training.finetune(minilm_path, "full-finetuning", {"lr": 5e-5}, train, dev,
                                 {**budget, "steps": 7, "selection": "last"}, seed=1, progress=False)
    assert steps["steps"] == 7 and len(steps["loss_history"]) == 7  # 3 a pass: 3 passes, the last cut to 1


def test_a_head_rate_and_adafactor_are_the_recipes():
    """head_lr puts the task head in its own parameter group; optimizer adafactor is transformers' Adafactor at the
    recipe's fixed rate (no relative step, no parameter scaling); constant keeps the rate."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from plmclaims import optim, training

    model = BertForSequenceClassification(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                                     num_attention_heads=2, intermediate_size=32, num_labels=2))
    groups = training.param_groups(model, 0.3, 1e-3)
    head = {id(p) for p in groups[1]["params"]}
    names = {n for n, p in model.named_parameters() if id(p) in head}
    assert names == {"bert.pooler.dense.weight", "bert.pooler.dense.bias", "classifier.weight", "classifier.bias"}
    assert (groups[0]["lr"], groups[1]["lr"]) == (0.3, 1e-3)
    assert all(isinstance(p, torch.Tensor) for p in training.param_groups(model, 0.3, None))  # no head rate: one list
    opt = optim.build(groups, 0.3, {"optimizer": "adafactor", "weight_decay": 1e-5})
    assert type(opt).__name__ == "Adafactor"
    assert not opt.defaults["relative_step"] and not opt.defaults["scale_parameter"]
    assert [g["lr"] for g in opt.param_groups] == [0.3, 1e-3]
    sched = optim.schedule(opt, 0, 100, "constant")
    for _ in range(5):
        opt.step()
        sched.step()
    assert [g["lr"] for g in opt.param_groups] == [0.3, 1e-3]
    with pytest.raises(ValueError):
        optim.build(groups, 0.3, {"optimizer": "sgd"})
    assert isinstance(optim.build(list(model.parameters()), 0.1, {}), torch.optim.AdamW)


def test_consert_can_train_as_its_script_does(minilm_path):
    """train_pooling mean and dropout off (ConSERT's main.py and --no_dropout); the defaults keep the test pooling
    and dropout, as runs planned before these settings existed."""
    import torch

    from plmclaims.methods.contrastive import consert

    default = consert.Objective(minilm_path, {}, 0)
    assert default.params["train_pooling"] == "" and default.params["dropout"] is True
    assert any(m.p > 0 for m in default.encoder.modules() if isinstance(m, torch.nn.Dropout))
    script = consert.Objective(minilm_path, {"train_pooling": "mean", "dropout": False}, 0)
    assert all(m.p == 0 for m in script.encoder.modules() if isinstance(m, torch.nn.Dropout))
    calls = []
    original = consert.Objective.encode
    script.encode = lambda batch, pooling, **kw: calls.append(pooling) or original(script, batch, pooling, **kw)
    import numpy as np

    batch = script.make_batch(["a short sentence", "another one here"], np.random.default_rng(0), 16)
    script.loss(batch)
    assert calls == ["mean", "mean"] and script.params["pooling"] == "last-two-avg"  # test pooling unchanged


def test_declutr_reads_wikitext_articles_at_the_pinned_commit(tmp_path, monkeypatch, repo):
    """DeCLUTR's paper-tier corpus: WikiText-103's articles without their section titles, those of at least the
    recipe's words, read from the prefetched release (here the rehearsal's stand-in, through the real prefetch code);
    the plan lists the dataset for prefetch at its pin."""
    import subprocess
    import sys

    from plmclaims import hub, standins
    from plmclaims.assets import needed_assets
    from plmclaims.data import sentences
    from plmclaims.fakehub import FakeHub

    paper = load_tier("paper")
    spec = paper["contrastive"]["methods"]["declutr"]["corpus"]
    folder = tmp_path / "standin" / sentences.WIKITEXT_ID
    lines = [" ".join(f"w{i}x{j}" for j in range(5 + i % 7)) for i in range(2000)]
    standins.build_wikitext(folder, lines, articles=6, words=2100)
    root = tmp_path / "hub"
    code = ("import sys; from pathlib import Path; from plmclaims import hub; "
            f"hub.prefetch([hub.HubAsset({sentences.WIKITEXT_ID!r}, 'dataset', {spec['revision']!r}, 'd')], "
            "Path(sys.argv[1]), 'paper')")
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "PLMCLAIMS_HUB_DIR")}
    with FakeHub({("dataset", sentences.WIKITEXT_ID): folder}) as fake:
        res = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=300,
                             env={**env, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_DISABLE_XET": "1", "HF_ENDPOINT": fake.url})
    assert res.returncode == 0, res.stderr[-2000:]
    monkeypatch.setenv("PLMCLAIMS_HUB_DIR", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    corpus = sentences.load_corpus(spec)
    assert len(corpus.documents) == 6 and all(sum(len(p.split()) for p in d) >= 2048 for d in corpus.documents)
    assert not any(p.startswith("=") or "= =" in p for d in corpus.documents for p in d)  # titles left out
    assert corpus.documents[0][0] == lines[0] and corpus.sentences == [p for d in corpus.documents for p in d]
    assert list(corpus.provenance["sources"])[0].startswith(f"{sentences.WIKITEXT_ID}@{spec['revision']}:")
    fewer = sentences.load_corpus({**spec, "min_document_words": 10**6})
    assert fewer.documents == [] and hub.commit(sentences.WIKITEXT_ID, "dataset", spec["revision"]) == spec["revision"]
    claims = load_claims(repo / "replications", ["contrastive/simcse-beats-declutr"])
    monkeypatch.setenv("PLMCLAIMS_HUB_DIR", str(tmp_path / "empty"))
    found = {a.repo_id: a for a in needed_assets(plan_all(claims, paper), paper)}
    assert found[sentences.WIKITEXT_ID].revision == spec["revision"]
    assert found[sentences.WIKITEXT_ID].why == "contrastive corpus wikitext-103"
    assert found["princeton-nlp/datasets-for-simcse"].why == "contrastive corpus wiki1m"  # SimCSE's own, beside it
