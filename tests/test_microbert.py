"""The micro-BERT: deterministic for a seed, saves its weights along the way, resumes exactly after interruption."""
from __future__ import annotations

import json
import os
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


def _train(corpus, tok, out, steps=8, checkpoints=(4,), seed=3, resume=None):
    train = {"steps": steps, "batch_size": 4, "lr": 1e-3, "warmup": 2, "checkpoints": list(checkpoints)}
    return microbert.pretrain(corpus, tok, ARCH, train, seed, out, progress=False, resume=resume)


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


def test_interrupted_run_resumes_exactly(small_corpus, tmp_path, monkeypatch):
    """Stopped after step 6 with its resume state saved every 4 steps: run again, it continues from step 4 and ends
    with the loss history and the weights (every saved step's) of a run never stopped."""
    from plmclaims.checkpoint import Resume

    corpus, tok = small_corpus
    full = _train(corpus, tok, tmp_path / "full")
    step = Resume.step

    def crash_after_6(self, n, loop=None):
        step(self, n, loop)
        if n == 6:
            raise KeyboardInterrupt

    monkeypatch.setattr(Resume, "step", crash_after_6)
    state = tmp_path / "state"
    with pytest.raises(KeyboardInterrupt):
        _train(corpus, tok, tmp_path / "resumed", resume=Resume(state, "k", "pretrain", every_steps=4))
    assert not (tmp_path / "resumed" / "checkpoints" / "step-8").exists()
    monkeypatch.setattr(Resume, "step", step)
    resumed = _train(corpus, tok, tmp_path / "resumed", resume=Resume(state, "k", "pretrain", every_steps=4))
    assert resumed["loss_history"] == full["loss_history"]
    for saved in ("step-4", "step-8"):  # the saved weights are outputs (probing reads them), apart from resume state
        wf = _weights(tmp_path / "full" / "checkpoints" / saved)
        wr = _weights(tmp_path / "resumed" / "checkpoints" / saved)
        assert all(torch.equal(wf[k], wr[k]) for k in wf)  # bit-identical, not merely close
    saved = (tmp_path / "resumed" / "checkpoints" / "step-8").iterdir()
    assert not any(p.name.startswith("trainer_state") for p in saved)  # weights only: the resume state lives apart


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
