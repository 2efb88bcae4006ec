"""Statistics, whitening and the lexical controls."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import rankdata as scipy_rankdata
from scipy.stats import spearmanr

from plmclaims import stats
from plmclaims.methods import lexical, whitening


def test_spearman_matches_scipy_with_ties():
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 5, 200).astype(float), rng.normal(size=200)
    assert stats.spearman(x, y) == pytest.approx(spearmanr(x, y)[0])


@pytest.mark.parametrize("shape,values", [((200,), 5), ((7,), 100), ((1,), 3), ((0,), 3), ((6, 9), 4), ((3, 4, 5), 2)])
def test_rankdata_is_scipys_average_rank(shape, values):
    rng = np.random.default_rng(sum(shape))
    x = rng.integers(0, values, shape).astype(float)  # few distinct values: ties everywhere
    assert np.array_equal(stats.rankdata(x), scipy_rankdata(x))
    if x.ndim > 1:
        assert np.array_equal(stats.rankdata(x, axis=1), scipy_rankdata(x, axis=1))
        assert np.array_equal(stats.rankdata(x, axis=0), scipy_rankdata(x, axis=0))
    if x.size:
        x.flat[0] = np.nan
        assert np.isnan(stats.rankdata(x)).all() and np.isnan(scipy_rankdata(x)).all()


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
    # the paper's SVD of the covariance, up to each column's sign: the same whitened cosines, the same top-k columns
    u, s, _ = np.linalg.svd(np.cov((x - mu).T))
    np.testing.assert_allclose(np.abs(w), np.abs(u[:, :3] / np.sqrt(s[:3])), rtol=1e-6, atol=1e-9)


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


def test_bootstrap_metrics_agree_with_sklearn_and_scipy():
    """stats keeps closed forms for speed inside the bootstrap, and glue_metrics reports with them: sklearn's and scipy's
    numbers."""
    from scipy.stats import pearsonr
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    from plmclaims.evaluation import glue_metrics

    rng = np.random.default_rng(5)
    y, p = rng.integers(0, 2, 300).astype(float), rng.integers(0, 2, 300).astype(float)
    for name, ref in (("accuracy", accuracy_score), ("f1", f1_score), ("matthews", matthews_corrcoef)):
        assert stats.metric_function(name)(y, p) == pytest.approx(ref(y, p)), name
    g, s = rng.normal(size=300), rng.normal(size=300)
    assert stats.pearson(s, g) == pytest.approx(pearsonr(s, g)[0])
    assert glue_metrics.score("STS-B", g, s) == pytest.approx({"pearson": 100 * pearsonr(g, s)[0],
                                                               "spearman": 100 * spearmanr(g, s)[0]})
    assert glue_metrics.score("CoLA", y, p)["matthews"] == pytest.approx(100 * matthews_corrcoef(y, p))
    assert glue_metrics.score("MRPC", y, p) == pytest.approx({"accuracy": 100 * accuracy_score(y, p), "f1": 100 * f1_score(y, p)})
    assert glue_metrics.score("STS-B", g, np.ones(300)) == {"pearson": 0.0, "spearman": 0.0}  # collapsed head, as in stats
    assert stats.matthews(y, np.ones(300)) == 0.0 and stats.f1(y, np.zeros(300)) == 0.0


def test_chance_floor_is_the_best_input_blind_score():
    gold = np.array([1.0] * 70 + [0.0] * 30)
    assert stats.chance("accuracy", gold) == pytest.approx(0.7)
    assert stats.chance("f1", gold) == pytest.approx(stats.f1(gold, np.ones(100)))  # always predicting the positive class
    assert stats.chance("matthews", gold) == 0.0 and stats.chance("spearman", gold) == 0.0
    idx = stats.stratified_indices(np.array(["x"] * 100), 50, np.random.default_rng(0))
    floors = stats.chance_scores("accuracy", gold, idx)
    assert floors.shape == (50,) and np.allclose(floors, [100 * max(gold[i].mean(), 1 - gold[i].mean()) for i in idx])
    assert floors.std() > 0  # the majority share moves with the resample
    with pytest.raises(ValueError, match="allowed values"):
        stats.chance("bleu", gold)


def test_degenerate_predictions_and_losses():
    assert stats.degenerate(np.array([0.1, 0.5, 0.2])) is None
    assert stats.degenerate(np.array([0.1, np.nan, np.inf])) == "2 of 3 predictions are NaN or infinite"
    assert stats.degenerate(np.ones(5)) == "constant predictions (all 1)"
    assert stats.degenerate(np.arange(3.0), losses=[0.7, 0.6, float("nan")]) == "the training loss became NaN or infinite"
    assert "training diverged" in stats.degenerate(np.arange(3.0), losses=[0.7] * 8 + [5.0] * 8)
    assert stats.degenerate(np.arange(3.0), losses=[0.7] * 8 + [0.3] * 8) is None


def test_document_index_identifies_examples_not_labels():
    a = stats.document_index(["a cat", "a dog"], ["sat", "ran"])
    assert a.dtype == np.int64 and len(set(a)) == 2
    assert np.array_equal(a, stats.document_index(["a cat", "a dog"], ["sat", "ran"]))
    assert not np.array_equal(a, stats.document_index(["a cat", "a cow"], ["sat", "ran"]))
    assert np.array_equal(stats.document_index(["x", "y"], None), stats.document_index(["x", "y"]))


def test_grouped_indices_resample_whole_sentences_within_subsets():
    """A probe's words of one sentence are drawn together: every resample holds each drawn sentence's words
    complete, never a word without its sentence-mates, and stays within its subset; with one word per sentence it is
    item resampling (every length equal to n)."""
    subsets = np.array(["a"] * 6 + ["b"] * 3)
    groups = np.array([0, 0, 0, 1, 2, 2, 7, 7, 8])
    sizes = {0: 3, 1: 1, 2: 2, 7: 2, 8: 1}
    idx = stats.grouped_indices(subsets, groups, 200, np.random.default_rng(0))
    assert len(idx) == 200 and len({len(i) for i in idx}) > 1  # lengths vary with the sentences drawn
    for i in idx:
        drawn, counts = np.unique(groups[i], return_counts=True)
        assert all(c % sizes[g] == 0 for g, c in zip(drawn, counts))  # whole sentences only
        assert (subsets[i] == "a").sum() in range(3, 10) and np.isin(groups[i][subsets[i] == "b"], [7, 8]).all()
    flat = stats.grouped_indices(np.array(["x"] * 50), np.arange(50), 30, np.random.default_rng(1))
    assert all(len(i) == 50 for i in flat) and len(np.unique(np.concatenate(flat))) > 40


def test_counted_bootstrap_equals_scoring_each_resample():
    """bootstrap_scores' vectorised path (Spearman and Pearson from resample counts) against scoring every resample
    with aggregate(): ties in both arrays, several subsets, several seeds, every aggregation, stratified and plain
    resamples, including resamples that miss a subset."""
    rng = np.random.default_rng(7)
    for trial in range(12):
        n = int(rng.integers(3, 200))
        gold = np.round(rng.uniform(0, 5, n), int(trial % 2))  # ties in the gold
        preds = [np.round(gold + rng.normal(0, 2, n), int(trial % 3)) for _ in range(1 + trial % 3)]
        subsets = rng.choice(["a", "b", "c"][: 1 + trial % 3], n)
        for idx in (stats.stratified_indices(subsets, 40, rng), rng.integers(0, n, size=(40, n))):
            for how in stats.AGGREGATIONS:
                for metric in (stats.spearman, stats.pearson):
                    fast = stats.bootstrap_scores(preds, gold, subsets, how, idx, metric=metric)
                    slow = np.array([np.mean([stats.aggregate(p[i], gold[i], subsets[i], how, metric) for p in preds])
                                     for i in idx]) * 100
                    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-9)
    # chunked like a real verdict (more resamples x items than one chunk holds): the same numbers as in one piece
    gold = rng.uniform(0, 5, 3000)
    pred = gold + rng.normal(0, 1, 3000)
    subsets = np.array(["x"] * 3000)
    idx = stats.stratified_indices(subsets, 200, rng)
    whole = stats.bootstrap_scores([pred], gold, subsets, "all", idx)
    assert len(idx) * len(gold) > stats._CELLS_PER_CHUNK
    np.testing.assert_allclose(whole, [stats.spearman(pred[i], gold[i]) * 100 for i in idx], rtol=0, atol=1e-9)


@pytest.mark.parametrize("metric", [stats.spearman, stats.accuracy])  # the counted path and the per-resample loop
def test_seed_resampling_widens_the_interval_by_the_spread_between_seeds(metric):
    """The Multi-Bootstrap (Sellam et al. 2022): where two seeds disagree, resampling seeds as well as items widens the
    interval; where they agree, it changes nothing; the seed draws are shared by sides with the same number of seeds."""
    rng = np.random.default_rng(0)
    n, r = 400, 400
    gold = rng.integers(0, 2, n).astype(float)
    subsets = np.array(["a"] * n)
    idx = stats.stratified_indices(subsets, r, np.random.default_rng(1))

    def seed(noise, s):
        return gold + np.random.default_rng(s).normal(scale=noise, size=n) > 0.5 if metric is stats.accuracy \
            else gold + np.random.default_rng(s).normal(scale=noise, size=n)
    good, poor = seed(0.2, 2).astype(float), seed(2.0, 3).astype(float)
    w = stats.seed_resample_weights(2, r, np.random.default_rng(5))
    assert w.shape == (r, 2) and np.allclose(w.sum(1), 1) and set(np.unique(w)) == {0.0, 0.5, 1.0}
    assert stats.seed_resample_weights(1, r, np.random.default_rng(5)) is None
    assert np.array_equal(w, stats.seed_resample_weights(2, r, np.random.default_rng(5)))  # paired across sides
    width = lambda s: np.subtract(*stats.interval(s)[::-1])  # noqa: E731
    items_only = stats.bootstrap_scores([good, poor], gold, subsets, "all", idx, metric=metric)
    both = stats.bootstrap_scores([good, poor], gold, subsets, "all", idx, metric=metric, seed_weights=w)
    assert width(both) > 2 * width(items_only)
    assert abs(np.mean(both) - np.mean(items_only)) < width(both) / 4  # centred alike: the mean over seeds
    same = stats.bootstrap_scores([good, good], gold, subsets, "all", idx, metric=metric, seed_weights=w)
    assert np.allclose(same, stats.bootstrap_scores([good, good], gold, subsets, "all", idx, metric=metric))
