"""The contrastive family's shared machinery (issue 10): losses on hand-checkable batches, the augmentations, the
training loop's determinism and checkpoint selection, the corpus. Tiny BERTs keep every test to seconds."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from plmclaims.data.sentences import Corpus, load_corpus
from plmclaims.methods import contrastive
from plmclaims.methods.contrastive import base, train
from samples import TOY_SENTENCES, save_tiny_mlm_bert, stsb_dev_head

SENTENCES = TOY_SENTENCES


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return save_tiny_mlm_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="module")
def dev(data_root):
    return stsb_dev_head(data_root, 120)


BUDGET = {"steps": 3, "batch_size": 8, "max_length": 16, "lr": 1e-3, "eval_every": 1}


# --- losses on hand-checkable batches

# unit vectors with cosines 0.8 (0-1), 0.6 (0-2), 0.96 (1-2); at temperature 0.05 a cosine c scores 20c
Z = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.6, 0.8]])
COS = {(0, 1): 0.8, (0, 2): 0.6, (1, 2): 0.96}


def cos(i, j):
    return 1.0 if i == j else COS[min(i, j), max(i, j)]


@pytest.mark.slow
def test_simcse_loss_on_identical_views_equals_hand_computed_infonce():
    # each view identical to its twin: row i's positive scores 20, its in-batch negatives 20 c_ij, so
    # loss_i = -log(e^20 / (e^20 + sum_j e^(20 c_ij))) = log(1 + sum_{j != i} e^(20 (c_ij - 1)))
    rows = [math.log(1 + sum(math.exp(20 * (cos(i, j) - 1)) for j in range(3) if j != i)) for i in range(3)]
    assert rows[1] > 0.3  # the near-duplicate negative (cos 0.96) makes the batch hard: the value is not ~0
    assert base.info_nce(Z, Z.clone(), 0.05).item() == pytest.approx(sum(rows) / 3, rel=1e-5)
    # scaled vectors give the same loss: the scores are cosines (MultipleNegativesRankingLoss's cos_sim)
    assert base.info_nce(3 * Z, Z.clone(), 0.05).item() == pytest.approx(sum(rows) / 3, rel=1e-5)


def test_nt_xent_counts_same_side_negatives():
    # NT-Xent: every other view on both sides is a negative, so each j != i appears twice (a_j and b_j)
    rows = [math.log(1 + 2 * sum(math.exp(20 * (cos(i, j) - 1)) for j in range(3) if j != i)) for i in range(3)]
    assert base.nt_xent(Z, Z.clone(), 0.05).item() == pytest.approx(sum(rows) / 3, rel=1e-5)


def test_params_override_only_recipe_keys(tiny_model):
    mod = contrastive.get("simcse")
    assert mod.Objective(tiny_model, {"temperature": 0.1}, 0).params["temperature"] == 0.1
    with pytest.raises(KeyError, match="allowed.*temperature"):
        mod.Objective(tiny_model, {"temprature": 0.1}, 0)
    with pytest.raises(KeyError, match="allowed: simcse"):
        contrastive.get("simcse2")


def test_pooling_by_name_matches_hand_pooling(tiny_model):
    obj = contrastive.get("simcse").Objective(tiny_model, {}, 0).eval()
    batch = obj.tokenize(["a man plays .", "the cat sat on a mat today"], 16)
    out = obj.encoder(**batch, output_hidden_states=True)
    m = batch["attention_mask"][1].bool()
    hs = out.hidden_states
    assert torch.allclose(base.pool(out, batch, "mean")[1], hs[-1][1][m].mean(0), atol=1e-6)
    assert torch.allclose(base.pool(out, batch, "last-two-avg")[1], (hs[-1][1][m].mean(0) + hs[-2][1][m].mean(0)) / 2, atol=1e-6)
    assert torch.allclose(base.pool(out, batch, "first-last-avg")[1], (hs[-1][1][m].mean(0) + hs[1][1][m].mean(0)) / 2, atol=1e-6)
    assert torch.equal(base.pool(out, batch, "cls-before-pooler"), hs[-1][:, 0])
    masked = obj.tokenize(["this means [MASK] .", "a [MASK] b [MASK] c"], 16)
    mo = obj.encoder(**masked, output_hidden_states=True)
    at = [(masked["input_ids"][i] == obj.tokenizer.mask_token_id).nonzero()[0, 0] for i in range(2)]  # the first [MASK]
    assert torch.equal(base.pool(mo, masked, "mask", obj.tokenizer.mask_token_id), torch.stack([mo.hidden_states[-1][i, at[i]] for i in range(2)]))
    with pytest.raises(ValueError, match="needs a .MASK. token"):
        base.pool(out, batch, "mask", obj.tokenizer.mask_token_id)
    # embed: one forward pass per batch, the same vectors whatever the batching and order
    a = obj.embed(["a man plays .", "the cat sat on a mat today"], 1, 16)
    b = obj.embed(["the cat sat on a mat today", "a man plays ."], 2, 16)
    assert np.allclose(a, b[::-1], atol=1e-5)
    assert np.allclose(a, hs[-1][:, 0].detach().numpy(), atol=1e-5)


# --- DeCLUTR's spans

def test_declutr_spans_stay_in_their_document_within_bounds_and_follow_the_beta_shapes():
    from plmclaims.methods.contrastive.declutr import sample_spans, span_bounds

    assert span_bounds(32, 512, 32) == (2, 30) and span_bounds(32, 512, 1024) == (32, 512)
    rng = np.random.default_rng(0)
    lo, hi = 4, 40
    anchors, positives = [], []
    for n_tokens in rng.integers(40, 200, size=400):
        (a0, a1), pos = sample_spans(int(n_tokens), rng, lo, hi, 2)
        assert 0 <= a0 < a1 <= n_tokens and lo <= a1 - a0 <= hi
        for p0, p1 in pos:
            assert 0 <= p0 < p1 <= n_tokens and lo <= p1 - p0 <= hi
            assert p0 <= a1 and p1 >= a0  # overlapping, adjacent or inside: never apart from the anchor
        anchors.append(a1 - a0)
        positives += [p1 - p0 for p0, p1 in pos]
    # Beta(4, 2) has mean 2/3, Beta(2, 4) mean 1/3 of the range (int() truncates: at most 1 token less)
    assert abs(np.mean(anchors) - (lo + 2 / 3 * (hi - lo))) < 1.5
    assert abs(np.mean(positives) - (lo + 1 / 3 * (hi - lo))) < 1.5
    # a document shorter than the longest span still yields spans inside it
    (a0, a1), pos = sample_spans(10, rng, lo, hi, 2)
    assert a1 <= 10 and all(p1 <= 10 for _, p1 in pos)


def test_declutr_batch_takes_anchor_and_positives_from_the_same_document(tiny_model):
    obj = contrastive.get("declutr").Objective(tiny_model, {}, 0)
    docs = [["the red dog sees a house .", "the red dog likes a tree ."] * 4, ["one two three four five six ."] * 6]
    batch = obj.make_batch(docs, np.random.default_rng(0), 16)
    labels = batch["mlm_labels"]
    anchors = torch.where(labels != -100, labels, batch["anchor_input_ids"])  # undo the masking
    special = set(obj.tokenizer.all_special_ids)

    def inside(row, doc_ids):
        toks = [t for t in row.tolist() if t not in special]
        return any(doc_ids[i:i + len(toks)] == toks for i in range(len(doc_ids) - len(toks) + 1))

    for d, doc in enumerate(docs):
        ids = obj.document_ids(doc)
        assert inside(anchors[d], ids)
        assert all(inside(batch["positive_input_ids"][2 * d + k], ids) for k in range(2))
    assert batch["anchor_input_ids"].shape[1] <= 16 and (labels != -100).any()
    # the loss's MLM part (head at the masked tokens only) equals the model's own MLM loss on the same batch
    obj.eval()
    own = obj.mlm(input_ids=batch["anchor_input_ids"], attention_mask=batch["anchor_attention_mask"], labels=labels).loss
    without = obj.loss({**batch, "mlm_labels": torch.full_like(labels, -100)})
    assert obj.loss(batch).item() == pytest.approx(without.item() + own.item(), rel=1e-5)


# --- ConSERT's augmentations

def test_consert_shuffle_permutes_positions_and_keeps_the_tokens(tiny_model):
    obj = contrastive.get("consert").Objective(tiny_model, {}, 0)
    batch = obj.make_batch(SENTENCES[:6], np.random.default_rng(1), 16)
    assert torch.equal(batch["input_ids"], obj.tokenize(SENTENCES[:6], 16)["input_ids"])  # tokens untouched
    pos = batch["shuffled_position_ids"]
    moved = 0
    for row, real in zip(pos, batch["attention_mask"].sum(1).tolist()):
        assert sorted(row[:real].tolist()) == list(range(real))  # a permutation of the real positions
        moved += row[:real].tolist() != list(range(real))
    assert moved == 6


def test_consert_cutoff_zeroes_exactly_the_planned_features(tiny_model):
    from plmclaims.methods.contrastive.consert import cutoff_plan

    obj = contrastive.get("consert").Objective(tiny_model, {}, 0).eval()
    plan = cutoff_plan(3, 32, 0.25, np.random.default_rng(0))
    assert ((plan == 0).sum(1) == 8).all()
    batch = obj.tokenize(SENTENCES[:3], 16)
    seen = []
    obj.encoder.embeddings.register_forward_hook(lambda m, i, o: seen.append(o.detach()))  # runs after the cutoff hook
    obj._cutoff = plan
    obj.encoder(**batch)
    obj._cutoff = None
    obj.encoder(**batch)
    cut, plain = seen
    zero = (plan == 0)[:, None, :].expand_as(cut)
    assert (cut[zero] == 0).all() and torch.equal(cut[~zero], plain[~zero]) and (plain[zero] != 0).all()
    assert obj.DEFAULTS["transductive"] is False and obj.params["lr"] == 5e-7


# --- the training loop

def corpus():
    return Corpus(SENTENCES, [], {"test": True})


def test_same_seed_same_bytes(tiny_model, dev):
    runs = [train.train("simcse", tiny_model, {}, corpus(), dev, BUDGET, seed=3, device="cpu", progress=False)
            for _ in range(2)]
    s0, s1 = (r["model"].state_dict() for r in runs)
    assert s0.keys() == s1.keys() and all(torch.equal(s0[k], s1[k]) for k in s0)
    assert runs[0]["history"] == runs[1]["history"] and runs[0]["losses"] == runs[1]["losses"]
    other = train.train("simcse", tiny_model, {}, corpus(), dev, BUDGET, seed=4, device="cpu", progress=False)
    assert other["losses"] != runs[0]["losses"]  # the seed does reach the batches/dropout


def test_checkpoint_selection_keeps_the_best_dev_step(tiny_model, dev):
    res = train.train("simcse", tiny_model, {}, corpus(), dev, {**BUDGET, "steps": 4, "lr": 5e-3}, seed=0, device="cpu",
                      progress=False)
    steps = [h["step"] for h in res["history"]]
    assert steps == [0, 1, 2, 3, 4]
    assert all(set(h) == {"step", "stsb_dev_spearman", "alignment", "uniformity"} for h in res["history"])
    assert all(0 <= h["alignment"] <= 4 and h["uniformity"] <= 0 for h in res["history"])
    scores = [h["stsb_dev_spearman"] for h in res["history"][1:]]
    assert len(set(scores)) > 1  # the dev score moves, so picking the best is a real choice
    assert res["best_step"] == 1 + int(np.argmax(scores)) and res["best_spearman"] == max(scores)
    # the returned model IS the best step's, not the last one's
    assert train.dev_spearman(res["model"], dev, 64, BUDGET["max_length"]) == pytest.approx(res["best_spearman"], abs=1e-6)
    assert set(res) >= {"objective", "history", "best_step", "best_spearman", "steps_per_second", "peak_memory_mb",
                        "sentences_seen", "budget", "seed", "objective_params", "model"}
    assert res["sentences_seen"] == 4 * BUDGET["batch_size"] and res["steps_per_second"] > 0


def test_dev_measures_alignment_and_uniformity_by_hand():
    from plmclaims.data.sts import StsData

    e1, e2 = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    vectors = {"a": 3 * e1, "b": e1 + e2, "c": e2, "d": -e2}  # unnormalised on purpose: the measures normalise

    class Fixed:
        def embed(self, sentences, batch_size, max_length):
            return np.stack([vectors[s] for s in sentences])

    # a-b is the only pair above 4 (SimCSE's positives), c-d a negative one
    dev = StsData("STSBenchmark", "raw", "dev", ["a", "c"], ["b", "d"], np.array([4.6, 1.0]), ["STSBenchmark"])
    got = train.dev_measures(Fixed(), dev, 8, 16)
    assert got["alignment"] == pytest.approx(2 - math.sqrt(2))  # |e1 - (e1+e2)/sqrt2|^2
    # squared distances of the 6 distinct pairs: ab 2-sqrt2, ac 2, ad 2, bc 2-sqrt2, bd 2+sqrt2, cd 4
    sq = [2 - math.sqrt(2), 2, 2, 2 - math.sqrt(2), 2 + math.sqrt(2), 4]
    assert got["uniformity"] == pytest.approx(math.log(np.mean(np.exp(-2 * np.array(sq)))))
    assert got["stsb_dev_spearman"] == pytest.approx(1.0)  # two pairs ranked as gold ranks them
    assert train.dev_spearman(Fixed(), dev, 8, 16) == got["stsb_dev_spearman"]


def test_simcse_training_lowers_its_loss(tiny_model, dev):
    res = train.train("simcse", tiny_model, {}, corpus(), dev, {**BUDGET, "steps": 12, "eval_every": 100, "lr": 3e-3},
                      seed=0, device="cpu", progress=False)
    first, last = np.mean(res["losses"][:3]), np.mean(res["losses"][-3:])
    assert last < first - 0.1, res["losses"]


@pytest.mark.parametrize("name", ["declutr", "consert"])
def test_each_core_objective_trains_through_the_loop(tiny_model, dev, name):
    docs = [SENTENCES[i:i + 12] for i in range(0, 48, 6)]
    res = train.train(name, tiny_model, {}, Corpus(SENTENCES, docs, {}), dev, {**BUDGET, "batch_size": 4}, seed=0,
                      device="cpu", progress=False)
    assert len(res["losses"]) == 3 and all(np.isfinite(res["losses"])) and res["best_step"] in (1, 2, 3)
    assert res["objective_params"]["pooling"] == {"declutr": "mean", "consert": "last-two-avg"}[name]


def test_budget_keys_are_checked_and_zero_steps_returns_the_untrained_model(tiny_model, dev):
    from plmclaims.errors import UserError

    with pytest.raises(KeyError, match="allowed"):
        train.train("simcse", tiny_model, {}, corpus(), dev, {**BUDGET, "epochs": 1}, seed=0, device="cpu")
    with pytest.raises(UserError, match="48 training sentences for a batch of 64"):
        train.train("simcse", tiny_model, {}, corpus(), dev, {**BUDGET, "batch_size": 64}, seed=0, device="cpu")
    res = train.train("simcse", tiny_model, {}, corpus(), dev, {**BUDGET, "steps": 0}, seed=0, device="cpu", progress=False)
    untrained = contrastive.get("simcse").Objective(tiny_model, {}, 0)
    assert res["best_step"] == 0 and res["losses"] == []
    assert res["best_spearman"] == pytest.approx(train.dev_spearman(untrained, dev, 64, BUDGET["max_length"]), abs=1e-6)


def test_random_weights_twin_differs_and_saved_model_reloads(tiny_model, tmp_path):
    mod = contrastive.get("simcse")
    trained, rand = mod.Objective(tiny_model, {}, 0), mod.Objective(tiny_model, {}, 0, random_weights=True)
    w = "embeddings.word_embeddings.weight"
    assert not torch.equal(trained.encoder.state_dict()[w], rand.encoder.state_dict()[w])
    trained.save(tmp_path / "out")
    again = mod.Objective(tmp_path / "out", {}, 0)
    assert np.allclose(trained.embed(SENTENCES[:4], 4, 16), again.embed(SENTENCES[:4], 4, 16), atol=1e-6)
    assert '"pooling": "cls-before-pooler"' in (tmp_path / "out" / "contrastive.json").read_text()


# --- the corpus

@pytest.mark.slow
def test_corpus_sample_is_seeded_and_documents_are_whole_articles():
    from plmclaims.data import sentences

    a, b = load_corpus({"max_sentences": 500, "seed": 1}), load_corpus({"max_sentences": 500, "seed": 1})
    c = load_corpus({"max_sentences": 500, "seed": 2})
    assert a.sentences == b.sentences and len(a.sentences) == 500 and a.sentences != c.sentences
    assert a.provenance["sha256"] == b.provenance["sha256"] != c.provenance["sha256"]
    assert a.documents and all(sum(len(s.split()) for s in d) >= 128 for d in a.documents)
    path = sentences.wiki_path()
    assert set(a.provenance["sources"]) == {"treebank:penn/train", str(path)}
    with pytest.raises(KeyError, match="allowed"):
        load_corpus({"max_sentence": 5})
