"""Trends along a curve (layers, steps): the shapes judged on synthetic curves whose truth we set (rising, falling,
peaked, flat within noise, and a peak drowned in noise), and Tenney's expected layer against hand-computed values."""
from __future__ import annotations

import math

import numpy as np
import pytest

from plmclaims import stats
from plmclaims.verdicts import curve_shape, expected_position, ordered_peaks

R = 400  # bootstrap resamples per point
XS = np.arange(5, dtype=float)  # layers 0-4


class Interval:
    """What the shape functions read from the evidence: the confidence and the percentile interval."""

    confidence = 0.95

    def ci(self, samples):
        return stats.interval(samples, self.confidence)


def curve(values, noise=0.5, seed=0):
    """Bootstrap samples (points, resamples) around the given point values, and the points."""
    pts = np.asarray(values, float)
    rng = np.random.default_rng(seed)
    return pts[:, None] + rng.normal(scale=noise, size=(len(pts), R)), pts


def judge(shape, values, noise=0.5, delta=None):
    vals, pts = curve(values, noise)
    return curve_shape(shape, XS, vals, pts, Interval(), "tree", delta)


RISING, FALLING, PEAKED = [50, 55, 60, 65, 70], [70, 65, 60, 55, 50], [50, 60, 70, 60, 50]
FLAT = [60.0, 60.2, 59.9, 60.1, 60.0]


@pytest.mark.parametrize("shape,values,outcome", [
    ("rises", RISING, "holds"), ("falls", RISING, "contradicted"),
    ("falls", FALLING, "holds"), ("rises", FALLING, "contradicted"),
    ("peaks", PEAKED, "holds"), ("peaks-middle", PEAKED, "holds"),
    ("peaks-early", PEAKED, "contradicted"), ("peaks-late", PEAKED, "contradicted"),
    ("peaks-late", RISING, "holds"), ("peaks-early", FALLING, "holds"), ("peaks", RISING, "contradicted"),
    ("rises", PEAKED, "inconclusive"),  # the ends are level: no rise to credit
    ("rises", FLAT, "inconclusive"), ("peaks-middle", FLAT, "inconclusive"),
])
def test_shapes_on_clean_curves(shape, values, outcome):
    d = judge(shape, values)
    assert d.outcome == outcome, d
    assert d.extra["values"] == pytest.approx(values)


def test_flat_within_noise_holds_and_a_peak_is_not_flat():
    assert judge("flat", FLAT, noise=0.3, delta=2.0).outcome == "holds"
    assert judge("flat", PEAKED, noise=0.3, delta=2.0).outcome == "contradicted"
    # a spread near delta, measured with noise, is neither
    assert judge("flat", [60, 61.8, 60, 60, 60], noise=1.0, delta=2.0).outcome == "inconclusive"


def test_a_peak_drowned_in_noise_is_inconclusive_not_credited():
    d = judge("peaks-middle", [50, 52, 53, 52, 50], noise=5.0)
    assert d.outcome == "inconclusive" and d.ci_low < 0 < d.ci_high


def test_a_rise_with_a_significant_dip_is_not_credited():
    d = judge("rises", [50, 60, 52, 65, 70], noise=0.5)
    assert d.outcome == "inconclusive" and "other way" in d.reason
    assert [s["outcome"] for s in d.extra["steps"]] == ["holds", "contradicted", "holds", "holds"]


def test_the_middle_third_of_a_four_layer_stack_is_layer_2_and_of_bert_base_layers_4_to_8():
    # a peak at layer 1 of 0-4 is early, not middle; at layer 5 of 0-12 it is middle
    vals, pts = curve([50, 70, 60, 55, 50])
    assert curve_shape("peaks-middle", XS, vals, pts, Interval(), "t").outcome == "contradicted"
    twelve = np.arange(13, dtype=float)
    for best, outcome in ((3, "contradicted"), (4, "holds"), (8, "holds"), (9, "contradicted")):
        values = [50.0] * 13
        values[best] = 70.0
        vals, pts = curve(values)
        assert curve_shape("peaks-middle", twelve, vals, pts, Interval(), "t").outcome == outcome, best
        assert curve_shape("peaks-middle", twelve, vals, pts, Interval(), "t").extra["best_x"] == best


def test_expected_layer_against_hand_computed_values():
    xs = np.arange(4, dtype=float)
    # gains 10 (layer 1) and 10 (layer 3): (1*10 + 3*10) / 20 = 2
    assert expected_position(np.array([0.0, 10, 10, 20]), xs) == pytest.approx(2.0)
    # a dip does not count as a loss and its recovery not as a gain: the running maximum is 0, 10, 10, 20 again
    assert expected_position(np.array([0.0, 10, 5, 20]), xs) == pytest.approx(2.0)
    # all the gain at layer 1: expected layer 1
    assert expected_position(np.array([40.0, 80, 80, 79]), xs) == pytest.approx(1.0)
    # never above the first point: undefined
    assert math.isnan(float(expected_position(np.array([50.0, 50, 49, 48]), xs)))
    # per resample (columns)
    both = expected_position(np.array([[0.0, 0], [10, 0], [10, 0], [20, 30]]), xs)
    assert both == pytest.approx([2.0, 3.0])


def test_ordered_peaks_credits_the_earlier_expected_layer():
    early, late = curve([40, 80, 82, 82, 82], seed=1), curve([30, 40, 50, 70, 75], seed=2)
    d = ordered_peaks(XS, {"upos": early, "dependency": late}, Interval())
    assert d.outcome == "holds"
    assert d.extra["expected"]["upos"] < d.extra["expected"]["dependency"]
    assert d.extra["expected"]["upos"] == pytest.approx((1 * 40 + 2 * 2) / 42)
    assert ordered_peaks(XS, {"dependency": late, "upos": early}, Interval()).outcome == "contradicted"
    # a curve that never gains has no expected layer: nothing to order
    none = ordered_peaks(XS, {"upos": early, "dependency": curve([50, 50, 49, 48, 47])}, Interval())
    assert none.outcome == "inconclusive" and "never gains" in none.reason


def test_a_curve_of_two_points_has_no_inside():
    vals, pts = curve([50, 60])
    d = curve_shape("peaks", np.arange(2.0), vals, pts, Interval(), "t")
    assert d.outcome == "not-run" and "at least 3 points" in d.reason


def test_spreads_is_the_dual_of_flat():
    assert judge("spreads", PEAKED, noise=0.3, delta=2.0).outcome == "holds"
    assert judge("spreads", FLAT, noise=0.3, delta=2.0).outcome == "contradicted"
    assert judge("spreads", [60, 61.8, 60, 60, 60], noise=1.0, delta=2.0).outcome == "inconclusive"


def refusal(repo, tmp_path, claim_id: str, edit) -> str:
    """The one-line error that loading a shipped claim, edited by `edit`, gives (as a copy named <family>/x)."""
    import yaml

    from plmclaims.claims import load_claim
    from plmclaims.errors import UserError

    data = yaml.safe_load((repo / "replications" / f"{claim_id}.yaml").read_text())
    edit(data)
    family = claim_id.split("/")[0]
    path = tmp_path / family / "x.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(dict(data, id=f"{family}/x")))
    with pytest.raises(UserError) as err:
        load_claim(path, tmp_path)
    return str(err.value)


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["checks"].append({"type": "greater", "a": "layers", "b": "layer0", "target": "tree"}),
     "'layers' is a curve (params.layer sweeps); only a trend check"),
    (lambda d: d["checks"][1].update(measurement="middle"), "'middle' is no curve along layer; set measurements.middle.params.layer to 'all'"),
    (lambda d: d["checks"][1].update(axis="sparsity"), "the probing family has no 'sparsity' axis for a curve measurement; allowed values: layer"),
    (lambda d: d["checks"][1].update(shape="flat"), "a flat trend needs 'delta'"),
])
def test_a_curve_is_read_only_by_a_trend_along_its_axis(tmp_path, repo, edit, words):
    assert words in refusal(repo, tmp_path, "probing/structural-probe-middle-layers", edit)


def test_under_a_bound_holds_only_when_every_point_is_clear_of_it():
    assert judge("under", [1.0, 2.0, 3.0, 2.0, 1.0], noise=0.3, delta=5.0).outcome == "holds"
    assert judge("under", [1.0, 2.0, 8.0, 2.0, 1.0], noise=0.3, delta=5.0).outcome == "contradicted"  # one point over
    assert judge("under", [1.0, 2.0, 4.8, 2.0, 1.0], noise=0.5, delta=5.0).outcome == "inconclusive"


def test_a_curve_with_a_degenerate_point_is_drawn_with_a_gap(tmp_path):
    """A degenerate point has no number (None in claims.json): the table shows a dash and the figure a gap."""
    from plmclaims.report import _curve_tables, curves_plot

    point = lambda v: {"per_benchmark": {"MRPC": {"measured": v, "ci_low": None if v is None else v - 1,  # noqa: E731
                                                  "ci_high": None if v is None else v + 1}},
                       "floors": {"chance": {"MRPC": 50.0}}}
    verdict = {"id": "compression/seed-variance", "protocol": {"family": "glue", "benchmarks": ["MRPC"], "metric": "accuracy"},
               "measurements": {"grid": {"label": "grid", "curve": [dict(point(v), x=i) for i, v in enumerate([70.0, None, 72.0])]}}}
    curves_plot([verdict], tmp_path / "curves.png")
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert "| MRPC | 70.00 | — | 72.00 |" in "\n".join(_curve_tables([verdict]))


def test_a_reported_curve_is_drawn_on_the_fraction_of_the_source_depth():
    """bert-base's layers 0-12 on a 4-layer model: layer 6 of 12 lands on layer 2, the ends on the ends; a source
    point without a value is left out; without `of` (fractions pruned) the points stay where they are."""
    from plmclaims.report import _curve_tables, reported_xy

    rc = {"points": [0, 6, 9, 12], "of": 12, "values": {"anisotropy": [10.0, 40.0, None, 47.5]}, "source": "paper"}
    assert reported_xy(rc, "anisotropy", [0, 1, 2, 3, 4]) == ([0.0, 2.0, 4.0], [10.0, 40.0, 47.5])
    assert reported_xy(dict(rc, of=None), "anisotropy", [0, 1, 2, 3, 4]) == ([0, 6, 12], [10.0, 40.0, 47.5])
    point = {"per_benchmark": {"anisotropy": {"measured": 30.0, "ci_low": 29.0, "ci_high": 31.0}}, "floors": {}}
    verdict = {"id": "intrinsic/x", "protocol": {"family": "intrinsic", "benchmarks": ["anisotropy"], "metric": "mean"},
               "measurements": {"layers": {"label": "layers", "reported_curve": rc,
                                           "curve": [dict(point, x=i) for i in range(5)]}}}
    text = "\n".join(_curve_tables([verdict]))
    assert "Reported on anisotropy (points of 12; paper): 0: 10.00, 6: 40.00, 12: 47.50." in text


@pytest.mark.parametrize("edit, words", [
    (lambda m: m["layer0"].update(reported_curve={"points": [0, 1], "values": {"anisotropy": [1, 2]}}),
     "'layer0' is no curve; a reported curve goes on a measurement that sweeps an axis (params.layer"),
    (lambda m: m["layers"]["reported_curve"]["values"].update(anisotropy=[1.0, 2.0]),
     "field 'measurements.layers.reported_curve.values.anisotropy': 2 values for 13 points"),
    (lambda m: m["layers"]["reported_curve"]["values"].update(cosine=[1.0] * 13),
     "field 'measurements.layers.reported_curve.values.cosine': unknown benchmark; allowed values: anisotropy"),
])
def test_a_reported_curve_is_validated(tmp_path, repo, edit, words):
    assert words in refusal(repo, tmp_path, "intrinsic/anisotropy-upper-layers", lambda d: edit(d["measurements"]))
