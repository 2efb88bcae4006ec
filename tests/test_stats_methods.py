"""Statistics, whitening and the lexical controls."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from plmclaims import stats
from plmclaims.methods import lexical, whitening


def test_spearman_matches_scipy_with_ties():
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 5, 200).astype(float), rng.normal(size=200)
    assert stats.spearman(x, y) == pytest.approx(spearmanr(x, y)[0])


def test_three_aggregations_differ_as_defined():
    # subset A: perfect ranking at a low score range; subset B: reversed, larger
    pred = np.r_[np.arange(10.0), -np.arange(30.0)]
    gold = np.r_[np.arange(10.0), np.arange(30.0) + 100]
    subsets = np.array(["A"] * 10 + ["B"] * 30)
    assert stats.aggregate(pred, gold, subsets, "mean") == pytest.approx(0.0)
    assert stats.aggregate(pred, gold, subsets, "wmean") == pytest.approx((10 * 1 + 30 * -1) / 40)
    assert stats.aggregate(pred, gold, subsets, "all") == pytest.approx(stats.spearman(pred, gold))
    with pytest.raises(ValueError, match="allowed values: all, wmean, mean"):
        stats.aggregate(pred, gold, subsets, "median")


def test_stratified_indices_stay_within_subsets():
    subsets = np.array(["a"] * 5 + ["b"] * 7)
    idx = stats.stratified_indices(subsets, 100, np.random.default_rng(0))
    assert idx.shape == (100, 12)
    assert (subsets[idx[:, :5]] == "a").all() and (subsets[idx[:, 5:]] == "b").all()


def test_paired_bootstrap_separates_a_real_difference():
    rng = np.random.default_rng(1)
    gold = rng.normal(size=400)
    better, worse = gold + rng.normal(scale=0.5, size=400), gold + rng.normal(scale=1.5, size=400)
    subsets = np.array(["x"] * 400)
    idx = stats.stratified_indices(subsets, 300, rng)
    diff = stats.bootstrap_scores([better], gold, subsets, "all", idx) - stats.bootstrap_scores([worse], gold, subsets, "all", idx)
    lo, hi = stats.interval(diff)
    assert lo > 0
    same = stats.bootstrap_scores([better], gold, subsets, "all", idx) - stats.bootstrap_scores([better], gold, subsets, "all", idx)
    assert stats.interval(same) == (0.0, 0.0)  # paired: identical predictions give an exactly-zero difference


def test_whitening_gives_identity_covariance_and_truncates():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 8)) @ rng.normal(size=(8, 8)) + 3.0
    mu, w = whitening.fit(x)
    z = whitening.apply(x, mu, w)
    np.testing.assert_allclose(z.mean(0), 0, atol=1e-8)
    np.testing.assert_allclose(np.cov(z.T), np.eye(8), atol=1e-6)
    mu, w = whitening.fit(x, k=3)
    assert whitening.apply(x, mu, w).shape == (500, 3)


def test_lexical_cosines():
    s1 = ["the cat sat on the mat", "a dog", "completely different words"]
    s2 = ["the cat sat on the mat", "a dog barks", "nothing shared here"]
    bow = lexical.cosine_scores(s1, s2, "bow")
    assert bow[0] == pytest.approx(1.0) and 0 < bow[1] < 1 and bow[2] == 0
    tfidf = lexical.cosine_scores(s1, s2, "tfidf")
    assert tfidf[0] == pytest.approx(1.0) and tfidf[2] == 0
    with pytest.raises(ValueError, match="allowed values: bow, tfidf"):
        lexical.cosine_scores(s1, s2, "bm25")


def test_bootstrap_with_classification_metric():
    """The same paired bootstrap decides GLUE relations: accuracy of a better vs a worse classifier."""
    rng = np.random.default_rng(2)
    gold = rng.integers(0, 2, 500).astype(float)
    good = np.where(rng.random(500) < 0.9, gold, 1 - gold)
    bad = np.where(rng.random(500) < 0.6, gold, 1 - gold)
    subsets = np.array(["RTE"] * 500)
    idx = stats.stratified_indices(subsets, 300, rng)
    acc = stats.metric_function("accuracy")
    diff = (stats.bootstrap_scores([good], gold, subsets, "all", idx, metric=acc)
            - stats.bootstrap_scores([bad], gold, subsets, "all", idx, metric=acc))
    lo, hi = stats.interval(diff)
    assert 20 < lo < hi < 40  # true gap 30 points
    with pytest.raises(ValueError, match="allowed values"):
        stats.metric_function("bleu")


def test_constant_predictions_have_zero_correlation():
    """A fine-tuned regression head can collapse to a constant: it scores 0, not NaN (which would poison averages)."""
    from plmclaims import stats

    gold = np.arange(10.0)
    assert stats.pearson(np.ones(10), gold) == 0.0 and stats.spearman(np.ones(10), gold) == 0.0
    assert stats.pearson(gold * 2, gold) == pytest.approx(1.0)
