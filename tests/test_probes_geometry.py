"""Ethayarajh's geometry measures and the probes (linear, scalar-mix, structural) on hand-made and synthetic data."""
from __future__ import annotations

import numpy as np
import pytest

from plmclaims.data import ud
from plmclaims.methods import geometry, probes

RNG = np.random.default_rng(0)


# ---------------------------------------------------------------- geometry

def test_anisotropy_hand_computed_and_extremes():
    # two vectors: every sampled pair is that pair, so the mean is their cosine
    assert geometry.anisotropy(np.array([[1.0, 0.0], [1.0, 1.0]]), n_pairs=50) == pytest.approx(1 / np.sqrt(2))
    iso = RNG.normal(size=(2000, 64))
    assert abs(geometry.anisotropy(iso, n_pairs=2000)) < 0.03
    common = iso + 4.0  # a shared direction of norm 32 against noise of norm ~8: cosines ~ 1024 / (1024 + 64)
    assert geometry.anisotropy(common, n_pairs=2000) > 0.8
    assert geometry.anisotropy(iso, seed=3) == geometry.anisotropy(iso, seed=3) != geometry.anisotropy(iso, seed=4)


def test_self_similarity_hand_computed():
    v = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 2.0], [5.0, 5.0], [3.0, -1.0]])
    ids = np.array([7, 7, 7, 9, 9, 4])  # word 4 occurs once: no self-similarity
    sims = geometry.self_similarity(v, ids)
    assert sims.keys() == {7, 9}
    assert sims[7] == pytest.approx((0 + 2 / np.sqrt(2)) / 3)  # cosines 0, 1/sqrt2, 1/sqrt2
    assert sims[9] == pytest.approx(1.0)  # identical directions
    same = np.tile(RNG.normal(size=(1, 16)), (6, 1))
    assert geometry.self_similarity(same, np.zeros(6, int))[0] == pytest.approx(1.0)
    assert geometry.mean_self_similarity(v, ids, min_occurrences=2) == pytest.approx((sims[7] + 1) / 2)
    assert geometry.mean_self_similarity(v, ids, 2, adjust_by=0.25) == pytest.approx((sims[7] + 1) / 2 - 0.25)
    with pytest.raises(ValueError, match="no word occurs at least 5 times"):
        geometry.mean_self_similarity(v, ids)


def test_intra_sentence_similarity_hand_computed():
    v = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 2.0]])
    # sentence 0: mean (.5, .5), each cosine 1/sqrt2; sentence 1: parallel tokens, 1
    assert geometry.intra_sentence_similarity(v, np.array([0, 0, 1, 1])) == pytest.approx((1 / np.sqrt(2) + 1) / 2)


def test_explainable_variance():
    u = RNG.normal(size=32)
    rank1 = RNG.normal(size=(10, 1)) * u
    assert geometry.explainable_variance(rank1, np.zeros(10, int))[0] == pytest.approx(1.0)
    assert geometry.explainable_variance(np.eye(3), np.zeros(3, int))[0] == pytest.approx(1 / 3)
    # uncentred, as in the paper: occurrences (1, 0) and (1, 1) give singular values^2 (3 +- sqrt5) / 2
    assert geometry.explainable_variance(np.array([[1.0, 0], [1, 1]]), np.zeros(2, int))[0] == \
        pytest.approx((3 + np.sqrt(5)) / 2 / 3)


def test_anisotropy_pairs_only_different_words():
    # rows 0 and 1 (word 5) are both (1, 1); row 2 (word 6) is (1, 0): every admissible pair has cosine 1/sqrt2, while
    # pairing word 5 with itself (cosine 1) would raise the mean
    v = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0]])
    ids = np.array([5, 5, 6])
    i, j = geometry.different_word_pairs(ids, 200, seed=1)
    assert len(i) == 200 and (ids[i] != ids[j]).all()
    assert np.mean(i == 2) == pytest.approx(0.5, abs=0.1)  # uniform over the ordered pairs (0,2), (1,2), (2,0), (2,1)
    assert geometry.pair_cosines(v, i, j) == pytest.approx(np.full(200, 1 / np.sqrt(2)))
    assert np.array_equal(geometry.different_word_pairs(ids, 50, 3)[0], geometry.different_word_pairs(ids, 50, 3)[0])
    with pytest.raises(ValueError, match="two distinct words"):
        geometry.different_word_pairs(np.zeros(4, int), 10)


def test_adjusted_self_similarity_hand_computed():
    v = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 2.0], [5.0, 5.0], [3.0, -1.0]])
    ids = np.array([7, 7, 7, 9, 9, 4])
    adj = geometry.adjusted_self_similarity(v, ids, anisotropy=0.3, min_occurrences=2)
    assert adj == pytest.approx({7: (2 / np.sqrt(2)) / 3 - 0.3, 9: 1 - 0.3})
    assert geometry.adjusted_self_similarity(v, ids, 0.3, min_occurrences=3) == pytest.approx({7: np.sqrt(2) / 3 - 0.3})


def test_adjusted_explainable_variance_hand_computed():
    # word 0 occurs twice as e1 (MEV 1); the other words are e2 and e3, so any two of their occurrences are
    # orthogonal: singular values^2 (1, 1), baseline MEV 1/2 in every draw, adjusted 1 - 1/2
    v = np.array([[1.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
    out = geometry.adjusted_explainable_variance(v, np.array([0, 0, 1, 2]), min_occurrences=2, baseline_sets=3)
    assert out.keys() == {0} and out[0] == pytest.approx((1.0, 0.5))
    # word 0 as (1, 0), (1, 1): MEV (3 + sqrt5) / 6; four parallel occurrences of word 1: baseline 1 (with replacement)
    v2 = np.array([[1.0, 0], [1, 1], [0, 3], [0, 3], [0, 3], [0, 3]])
    out2 = geometry.adjusted_explainable_variance(v2, np.array([0, 0, 1, 1, 1, 1]), min_occurrences=2)
    assert out2[0] == pytest.approx(((3 + np.sqrt(5)) / 6, 1.0))
    # word 1 (four occurrences) has only two others' rows to draw from: with replacement, so each draw is some mix of
    # (1, 0) and (1, 1), whose MEV lies between that of the two distinct rows, (3 + sqrt5) / 6, and 1 (one row repeated)
    assert (3 + np.sqrt(5)) / 6 - 1e-9 <= out2[1][1] <= 1.0 and out2[1][0] == pytest.approx(1.0)
    # identical occurrences everywhere: nothing beyond the layer's shared direction, adjusted 0
    same = np.tile([[0.3, -2.0, 1.0]], (8, 1))
    out3 = geometry.adjusted_explainable_variance(same, np.repeat([0, 1], 4), min_occurrences=2)
    assert out3.keys() == {0, 1} and all(m == pytest.approx((1.0, 1.0)) for m in out3.values())


def test_layer_summary_keys_and_adjustment():
    v = RNG.normal(size=(300, 8)) + 2.0
    words, sents = RNG.integers(0, 20, 300), np.repeat(np.arange(30), 10)
    out = geometry.layer_summary(v, words, sents)
    assert out["adjusted_self_similarity"] == pytest.approx(out["self_similarity"] - out["anisotropy"])
    assert out["adjusted_intra_sentence_similarity"] == pytest.approx(out["intra_sentence_similarity"] - out["anisotropy"])
    assert 0 < out["max_explainable_variance"] <= 1 and out["anisotropy"] > 0.5


# ---------------------------------------------------------------- classifier probes

def planted(n, d=20, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    return x, np.where(x @ rng.normal(size=d) > 0, "a", "b")


def test_linear_probe_finds_a_planted_feature_and_not_noise():
    x, y = planted(1200)
    assert probes.linear_probe(x[:800], y[:800], x[800:], y[800:]) > 0.9
    noise = RNG.normal(size=(1200, 20))
    assert probes.linear_probe(noise[:800], y[:800], noise[800:], y[800:]) < 0.6
    layers = [noise, x, 0.5 * x + noise]
    acc = probes.layerwise_accuracy([a[:800] for a in layers], y[:800], [a[800:] for a in layers], y[800:])
    assert probes.best_layer(acc) == 1 and acc[0] < acc[2] < acc[1]
    assert probes.majority_baseline(["a", "a", "b"], ["a", "b", "b", "b"]) == 0.25


def test_expected_layer_and_centre_of_gravity_hand_computed():
    # Deltas .2, .1, 0 at layers 1, 2, 3: (1 * .2 + 2 * .1) / .3
    assert probes.expected_layer([0.5, 0.7, 0.8, 0.8]) == pytest.approx(4 / 3)
    assert probes.expected_layer([0.5, 0.4, 0.8]) == pytest.approx((1 * -0.1 + 2 * 0.4) / 0.3)  # negative Delta kept
    assert np.isnan(probes.expected_layer([0.9, 0.9, 0.9]))
    assert probes.centre_of_gravity([0.25, 0.25, 0.25, 0.25]) == pytest.approx(1.5)
    assert probes.centre_of_gravity([0, 0, 1.0]) == 2
    assert probes.best_layer([0.1, 0.5, 0.5]) == 1


@pytest.mark.slow
def test_scalar_mix_puts_its_weight_on_the_informative_layer():
    x, y = planted(900, d=10, seed=1)
    layers = [RNG.normal(size=(900, 10)), RNG.normal(size=(900, 10)), x]
    tr, dv = [a[:600] for a in layers], [a[600:] for a in layers]
    scores, weights = probes.cumulative_scores(tr, y[:600], dv, y[600:], epochs=15, batch_size=64)
    assert scores[0] < 0.65 and scores[2] > 0.9
    assert weights[2] > 0.7 and weights.sum() == pytest.approx(1.0)
    assert probes.expected_layer(scores) > 1.5 and probes.centre_of_gravity(weights) > 1.5
    again = probes.scalar_mix_probe(tr, y[:600], dv, y[600:], epochs=15, batch_size=64)
    assert again[0] == scores[2] and np.allclose(again[1], weights)  # deterministic per seed


# ---------------------------------------------------------------- structural probe

def test_tree_distances_and_gold_uuas_on_a_hand_made_tree():
    heads = np.array([2, 0, 2, 3, 3])  # 1 <- 2 -> 3 -> {4, 5}
    d = probes.tree_distances(heads)
    assert d[0].tolist() == [0, 1, 2, 3, 3] and d[3, 4] == 2
    assert probes.mst_edges(d) == {(0, 1), (1, 2), (2, 3), (2, 4)}
    assert probes.uuas([d], [d]) == 1.0
    # leaving out word 3 (say, punctuation) scores only the arcs among the others
    keep = np.array([True, True, True, False, True])
    assert probes.mst_edges(d, keep) == {(0, 1), (1, 2), (2, 4)}
    with pytest.raises(ValueError, match="one tree"):
        probes.tree_distances(np.array([0, 0]))


def test_uuas_hand_computed_and_punctuation_mask():
    gold = probes.tree_distances(np.array([0, 1, 2, 3]))  # chain 0-1-2-3
    pred = np.full((4, 4), 5.0)
    pred[0, 1] = pred[1, 0] = pred[1, 2] = pred[2, 1] = pred[0, 3] = pred[3, 0] = 0.0  # 0 = an edge, still kept
    assert probes.mst_edges(pred) == {(0, 1), (1, 2), (0, 3)}
    assert probes.uuas([pred, gold], [gold, gold]) == pytest.approx(5 / 6)  # corpus level: 2 + 3 of 3 + 3
    assert probes.punctuation_mask(["NN", ",", "HYPH", "-LRB-", "``", "."]).tolist() == \
        [True, False, True, False, False, False]


def test_distance_spearman_groups_by_length():
    g5 = probes.tree_distances(np.array([0, 1, 2, 3, 4]))
    g6 = probes.tree_distances(np.array([0, 1, 1, 2, 2, 3]))
    short = probes.tree_distances(np.array([0, 1, 2]))
    assert probes.distance_spearman([g5], [g5]) == pytest.approx(1.0)
    assert probes.distance_spearman([-g5], [g5]) == pytest.approx(-1.0)
    # length 5: mean of 1 and -1 = 0; length 6: 1; lengths averaged: 0.5 (not the sentence mean 1/3)
    assert probes.distance_spearman([g5, -g5, g6, short], [g5, g5, g6, short]) == pytest.approx(0.5)
    assert np.isnan(probes.distance_spearman([short], [short]))


def synthetic_trees(n_sentences, seed, encode=True, max_len=14, d=32):
    """Random trees; vectors hold the Pythagorean tree embedding (one axis per child position, a word's vector is
    the sum of the axes on its root path, so squared distances equal tree distances) under a fixed random map."""
    rng = np.random.default_rng(seed)
    mix = np.random.default_rng(99).normal(size=(max_len, d)) / np.sqrt(max_len)
    vectors, dists = [], []
    for _ in range(n_sentences):
        n = int(rng.integers(6, max_len + 1))
        pos = rng.permutation(n)  # node k sits at word position pos[k], so the root is not always the first word
        heads = np.zeros(n, dtype=int)
        for k in range(1, n):
            heads[pos[k]] = pos[int(rng.integers(0, k))] + 1  # node k attaches to an earlier node
        path = np.zeros((n, max_len))
        for i in range(n):
            j = i
            while heads[j]:
                path[i, j] = 1.0
                j = heads[j] - 1
        vectors.append(path @ mix if encode else rng.normal(size=(n, d)))
        dists.append(probes.tree_distances(heads))
    return vectors, dists


def test_structural_probe_recovers_an_encoded_tree_and_not_noise():
    tv, td = synthetic_trees(300, seed=0)
    dv, dd = synthetic_trees(60, seed=1)
    good = probes.structural_probe_scores(tv, td, dv, dd, rank=16, epochs=30, lr=0.01, seed=0)
    assert good["uuas"] > 0.9 and good["spearman"] > 0.85
    rv, rd = synthetic_trees(300, seed=0, encode=False)
    rdv, rdd = synthetic_trees(60, seed=1, encode=False)
    bad = probes.structural_probe_scores(rv, rd, rdv, rdd, rank=16, epochs=30, lr=0.01, seed=0)
    assert bad["uuas"] < 0.4 and bad["spearman"] < 0.4
    b1 = probes.fit_structural_probe(tv[:40], td[:40], rank=8, epochs=2, seed=5)
    assert np.array_equal(b1, probes.fit_structural_probe(tv[:40], td[:40], rank=8, epochs=2, seed=5))


def test_gold_uuas_on_real_ewt_with_punctuation_left_out(data_root):
    sents = ud.load(data_root, "dev").sentences[:200]
    gold = [probes.tree_distances(s.heads) for s in sents]
    keep = [probes.punctuation_mask(s.xpos) for s in sents]
    assert probes.uuas(gold, gold, keep) == 1.0
    # a chain over the words in order (a strong right-branching baseline) is far from the trees
    chain = [np.abs(np.subtract.outer(np.arange(len(s)), np.arange(len(s)))).astype(float) for s in sents]
    assert 0.3 < probes.uuas(chain, gold, keep) < 0.8
