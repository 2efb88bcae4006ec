"""The micro-BERT: deterministic for a seed, checkpoints along the way, resumes exactly after interruption."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from plmclaims.models import microbert

ARCH = {"layers": 1, "hidden": 16, "heads": 2, "ffn": 32, "vocab": 400, "max_length": 16}


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    import treebank

    root = tmp_path_factory.mktemp("corpus")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(treebank.penn["train"].split("\n")[:800]).replace("<unk>", "[UNK]"))
    microbert.train_tokenizer(corpus, ARCH["vocab"], root / "tok", ARCH["max_length"])
    return corpus, root / "tok"


def _train(corpus, tok, out, steps=8, checkpoints=(4,), seed=3):
    train = {"steps": steps, "batch_size": 4, "lr": 1e-3, "warmup": 2, "checkpoints": list(checkpoints)}
    return microbert.pretrain(corpus, tok, ARCH, train, seed, out, progress=False)


def _weights(path):
    from transformers import BertForMaskedLM

    return BertForMaskedLM.from_pretrained(str(path)).state_dict()


def test_tokenizer_is_lowercasing_wordpiece(small_corpus):
    from transformers import AutoTokenizer

    _, tok_dir = small_corpus
    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    ids = tok("The Company said")["input_ids"]
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
    assert tok.decode(ids[1:-1]) == "the company said"
    assert len(tok) <= ARCH["vocab"]


def test_same_seed_same_model_and_checkpoints(small_corpus, tmp_path):
    corpus, tok = small_corpus
    a = _train(corpus, tok, tmp_path / "a")
    b = _train(corpus, tok, tmp_path / "b")
    assert a["loss_history"] == b["loss_history"]
    assert (tmp_path / "a" / "checkpoints" / "step-4" / "config.json").exists()
    wa, wb = _weights(tmp_path / "a" / "checkpoints" / "step-8"), _weights(tmp_path / "b" / "checkpoints" / "step-8")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    c = _train(corpus, tok, tmp_path / "c", seed=4)
    assert c["loss_history"] != a["loss_history"]
    assert a["unigram_loss"] > 0 and np.isfinite(a["train_loss_last50"])


def test_interrupted_run_resumes_exactly(small_corpus, tmp_path):
    corpus, tok = small_corpus
    full = _train(corpus, tok, tmp_path / "full")
    # an interrupted run: killed after its step-4 checkpoint, so only that one exists when it is started again
    import shutil

    _train(corpus, tok, tmp_path / "resumed")
    shutil.rmtree(tmp_path / "resumed" / "checkpoints" / "step-8")
    resumed = _train(corpus, tok, tmp_path / "resumed")
    assert resumed["loss_history"] == full["loss_history"]
    wf, wr = _weights(tmp_path / "full" / "checkpoints" / "step-8"), _weights(tmp_path / "resumed" / "checkpoints" / "step-8")
    assert all(torch.allclose(wf[k], wr[k]) for k in wf)


def test_corpus_sources_are_recorded(tmp_path):
    info = microbert.build_corpus(tmp_path / "corpus.txt")
    assert info["sentences"]["ptb-train"] == 42068
    assert info["sentences"]["gensim-enwiki"] > 1000
    assert len(info["sha256"]) == 64 and all(len(v) == 64 for v in info["sources"].values())
    lines = (tmp_path / "corpus.txt").read_text().splitlines()
    assert len(lines) == sum(info["sentences"].values())
