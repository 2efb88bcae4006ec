"""The micro-BERT: deterministic for a seed, checkpoints along the way, resumes exactly after interruption."""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

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
    assert len(tok) == ARCH["vocab"]
    spec = json.loads((tok_dir / "tokenizer.json").read_text())
    assert spec["model"]["type"] == "WordPiece" and spec["model"]["continuing_subword_prefix"] == "##"
    # the continuation pieces handed to the trainer up front are ordinary vocabulary, not special tokens
    assert [t["content"] for t in spec["added_tokens"]] == microbert.SPECIAL_TOKENS
    assert any(t.startswith("##") and len(t) > 3 for t in spec["model"]["vocab"])  # merged pieces, not just characters
    assert tok.tokenize("##e")[-1] == "e"  # split like any text, not matched whole as a special token would be


def test_tokenizer_training_is_byte_identical_across_processes(small_corpus, tmp_path):
    corpus, _ = small_corpus
    code = ("import sys; from pathlib import Path; from plmclaims.models import microbert; "
            "microbert.train_tokenizer(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), 16)")
    outs = []
    for i, hashseed in enumerate(["1", "2"]):  # separate processes: hash-map order differs between them
        out = tmp_path / f"tok{i}"
        subprocess.run([sys.executable, "-c", code, str(corpus), str(ARCH["vocab"]), str(out)], check=True,
                       env={**os.environ, "PYTHONHASHSEED": hashseed})
        outs.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert "tokenizer.json" in outs[0] and outs[0] == outs[1]


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
    assert all(torch.equal(wf[k], wr[k]) for k in wf)  # bit-identical, not merely close


class _Planted:
    """Unpickling this creates a file: the proof that a loader executed code it was handed."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_planted_pickle_in_resume_location_is_refused(small_corpus, tmp_path):
    corpus, tok = small_corpus
    ckpt = tmp_path / "run" / "checkpoints" / "step-4"
    ckpt.mkdir(parents=True)
    marker = tmp_path / "pwned"
    (ckpt / "trainer_state.pt").write_bytes(pickle.dumps(_Planted(marker)))
    with pytest.raises(microbert.UserError, match=r"step-4 holds a pickled trainer_state.pt, which plmclaims never loads"):
        _train(corpus, tok, tmp_path / "run")
    assert not marker.exists()
    torch.save({"state": _Planted(marker)}, ckpt / "trainer_state.pt")  # the same, written the way torch writes it
    with pytest.raises(microbert.UserError):
        _train(corpus, tok, tmp_path / "run")
    assert not marker.exists()


def test_damaged_resume_state_is_a_one_line_error(small_corpus, tmp_path):
    corpus, tok = small_corpus
    _train(corpus, tok, tmp_path / "run")
    ckpt = tmp_path / "run" / "checkpoints" / "step-8"
    (ckpt / "trainer_state.json").write_text("{not json")
    with pytest.raises(microbert.UserError, match=r"step-8: unreadable resume state \(JSONDecodeError"):
        _train(corpus, tok, tmp_path / "run")
    (ckpt / "trainer_state.json").unlink()  # without its JSON half a checkpoint does not count: resume from step 4
    assert _train(corpus, tok, tmp_path / "run")["loss_history"] == _train(corpus, tok, tmp_path / "fresh")["loss_history"]


def test_corpus_sources_are_recorded(tmp_path):
    info = microbert.build_corpus(tmp_path / "corpus.txt")
    assert info["sentences"]["ptb-train"] == 42068
    assert info["sentences"]["gensim-enwiki"] == 20840
    # the hash every published micro-BERT pre-training recorded (resources/micro/corpus/pretrain.json at 34b43df):
    # moving the readers to plmclaims.data.sentences (shared with the contrastive corpus) changed no byte
    assert info["sha256"] == "c8817d72fd7faf45b422f2a564b180d3c916efa4e18e333569a8d147ecf86b5d"
    assert len(info["sha256"]) == 64 and all(len(v) == 64 for v in info["sources"].values())
    lines = (tmp_path / "corpus.txt").read_text().splitlines()
    assert len(lines) == sum(info["sentences"].values())


def test_masked_positions_loss_equals_the_full_head_loss_and_gradients():
    """Pre-training scores only the masked positions; that must be BertForMaskedLM's own loss, gradients included."""
    from transformers import BertForMaskedLM

    torch.manual_seed(0)
    model = BertForMaskedLM(microbert.bert_config({"hidden": 32, "layers": 2, "heads": 2, "ffn": 64, "max_length": 16}, 50))
    model.eval()  # no dropout: both losses see the same forward pass
    ids = torch.randint(5, 50, (3, 16))
    labels = torch.full_like(ids, -100)
    chosen = torch.rand(ids.shape, generator=torch.Generator().manual_seed(1)) < 0.15
    labels[chosen] = ids[chosen]
    assert 0 < int(chosen.sum()) < ids.numel()

    full = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss
    full.backward()
    full_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    ours = microbert.masked_lm_loss(model, ids, labels)
    ours.backward()
    assert torch.allclose(ours, full, atol=1e-6)
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert grads.keys() == full_grads.keys()
    for name, g in grads.items():
        assert torch.allclose(g, full_grads[name], atol=1e-6), name

    # a batch with nothing masked carries no signal rather than a NaN that would poison the weights
    empty = microbert.masked_lm_loss(model, ids, torch.full_like(ids, -100))
    assert float(empty) == 0.0
