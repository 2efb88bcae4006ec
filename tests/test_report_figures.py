"""Smoke tests of the report's figures on a synthetic report (tests/report_samples.py): each figure draws the markers
a reader needs to judge a number (the measured interval, the reported value, the random-weights twin, chance and the
lexical floors, a check's margin, the measurements without a score and why), found by the gids and labels of the
matplotlib artists, not by pixels. Each runs with and without a claim measured on several models."""
from __future__ import annotations

import copy

import matplotlib
import pytest

from report_samples import TIER, report

matplotlib.use("Agg")


@pytest.fixture(params=[False, True], ids=["one-model", "models"])
def verdicts(request, tmp_path):
    return report(tmp_path, models=request.param)


def gids(ax) -> list[str]:
    return [a.get_gid() for a in ax.findobj() if a.get_gid()]


def texts(ax, gid: str) -> str:
    return " | ".join(t.get_text() for t in ax.texts if t.get_gid() == gid)


def panel(fig, claim: str):
    found = [ax for ax in fig.axes if claim in ax.get_title() or claim.split("/")[-1] in ax.get_title()]
    assert found, (claim, [ax.get_title() for ax in fig.axes])
    return found


def points(ax, gid: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for line in ax.get_lines() if line.get_gid() == gid
            for x, y in zip(line.get_xdata(), line.get_ydata())]


def legend_labels(fig) -> set[str]:
    return {t.get_text() for legend in fig.legends for t in legend.get_texts()}


def test_forest_a_panel_per_claim_on_its_own_axis_with_every_floor_visible(verdicts):
    from plmclaims.report.forest import forest_figure

    fig = forest_figure(verdicts)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    scalar = [v["id"] for v in verdicts if any(not m.get("curve") for m in v["measurements"].values())]
    assert [t.split(":")[0] for t in titles] == scalar  # one panel per claim with a scalar measurement, in order
    (sts,) = [ax for ax in fig.axes if ax.get_title(loc="left").startswith("sts/synthetic-whitening")]
    assert {"measured", "reported", "twin", "floor:chance", "floor:bow", "floor:tfidf", "missing"} <= set(gids(sts))
    assert sts.get_xlabel() == "spearman x 100"
    assert "not run" in texts(sts, "missing") and "no released SimCSE checkpoint" in texts(sts, "missing")
    # whitened sits at 66.3 with its reported value and its TF-IDF floor: each on its own lane, none hidden
    at = {gid: y for gid in ("reported", "twin", "floor:tfidf") for x, y in points(sts, gid)
          if x == pytest.approx(66.3)}
    assert len(at) == 2 and len(set(at.values())) == 2, at  # the twin (48) is elsewhere; reported and TF-IDF split
    # a single layer's twin comes from its curve's point with the same score
    (geometry,) = [ax for ax in fig.axes if ax.get_title(loc="left").startswith("intrinsic/synthetic-anisotropy")]
    assert sorted(x for x, _ in points(geometry, "twin")) == [36.0, 37.0] and geometry.get_xlabel() == "mean x 100"
    (peft,) = [ax for ax in fig.axes if ax.get_title(loc="left").startswith("peft/")]
    assert "degenerate on MRPC" in texts(peft, "missing") and "degenerate on SST-2" in texts(peft, "missing")
    assert peft.get_xlabel() == "accuracy x 100"
    assert {"measured (95% CI)", "reported", "random-weights twin", "TF-IDF floor", "chance"} <= legend_labels(fig)
    if any(v.get("models") for v in verdicts):
        (two,) = [ax for ax in fig.axes if ax.get_title(loc="left").startswith("sts/synthetic-two-models")]
        labels = [t.get_text() for t in two.get_yticklabels()]
        assert any("[pretrained-lm]" in x for x in labels) and any("[raw-encoder]" in x for x in labels)


def test_curves_name_their_axis_and_draw_floors_margins_judged_points_and_degenerate_points(verdicts):
    from plmclaims.report.curves import curves_figure

    fig = curves_figure(verdicts)
    drawn = [ax for ax in fig.axes if ax.get_title()]
    titles = [ax.get_title() for ax in drawn]
    assert len(titles) == len(set(titles)), titles  # no two panels look alike
    assert all(ax.get_legend() is None for ax in drawn) and legend_labels(fig)  # one legend, above the panels
    (heads,) = panel(fig, "synthetic-heads")  # judged on the average: one panel, not one per benchmark
    assert heads.get_title().endswith(": avg") and heads.get_xlabel() == "fraction of attention heads masked"
    assert {"measured", "floor:bow", "floor:tfidf", "margin", "judged-point"} <= set(gids(heads))
    assert sorted({x for x, _ in points(heads, "judged-point")}) == [0.0, 0.4]  # all heads at 0, 40% masked at 0.4
    band = [p for p in heads.patches if p.get_gid() == "margin"]
    assert band and band[0].get_extents().height > 0
    (layers,) = panel(fig, "synthetic-anisotropy")
    assert {"twin", "reported", "floor:chance"} <= set(gids(layers))
    assert layers.get_xlabel() == "layer (0: the embeddings)" and layers.get_ylabel() == "mean x 100"
    (grid,) = panel(fig, "synthetic-seed-grid")
    assert [x for x, _ in points(grid, "degenerate")] == [0.0] and grid.get_xlabel().startswith("run of the seed grid")
    (cka,) = panel(fig, "synthetic-cka")  # values 98.5-99.9: chance at 0 is named, not drawn across the axis
    assert cka.get_ylim()[0] > 90 and "chance 0.0: below the axis" in texts(cka, "floor:chance")


def test_quality_vs_params_draws_references_as_lines_and_names_what_has_no_score(verdicts):
    from plmclaims.report.params import params_figure

    fig = params_figure(verdicts)
    (peft,) = panel(fig, "peft/synthetic-adapters")
    assert {"zero-shot", "floor:chance", "measured", "missing"} <= set(gids(peft))
    assert points(peft, "zero-shot")[0][1] == 62.0 and points(peft, "floor:chance")[0][1] == pytest.approx(59.6)
    assert min(x for x, _ in points(peft, "measured")) > 1e4 and peft.get_xlim()[0] > 1  # nothing at 10^0
    # prefix tuning and full fine-tuning marked at the parameters they train
    assert sorted(x for x, _ in points(peft, "missing")) == [1.2e5, 22.7e6]
    named = texts(peft, "missing")
    assert "prefix" in named and "full_ft" in named and "full fine-tuning reference has no score" in named
    scored = copy.deepcopy(verdicts)
    full = next(v for v in scored if v["id"] == "peft/synthetic-adapters")["measurements"]["full_ft"]
    full.update(measured=80.0, ci_low=79.0, ci_high=81.0, seeds=[80.0])
    (peft,) = panel(params_figure(scored), "peft/synthetic-adapters")
    assert points(peft, "full-finetuning")[0][1] == 80.0 and "reference has no score" not in texts(peft, "missing")


def test_contrastive_training_draws_a_column_per_objective_with_its_twin_and_the_lexical_floors(verdicts):
    from plmclaims.report.training import TRAINING_PANELS, training_figure

    fig, drawn = training_figure(verdicts)
    assert drawn == {key: 4 for key, *_ in TRAINING_PANELS}
    top = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in top] == ["declutr", "simcse"]
    for ax in top:
        assert {"measured", "twin", "floor:tfidf", "floor:bow"} <= set(gids(ax))
        assert [line.get_linestyle() for line in ax.get_lines() if line.get_gid() == "twin"] == ["--"]
    colours = {line.get_color() for ax in top for line in ax.get_lines() if line.get_gid() == "measured"}
    assert len(colours) == 2  # each objective its own colour
    none, drawn = training_figure([v for v in verdicts if v["protocol"]["family"] != "contrastive"])
    assert drawn == {key: 0 for key, *_ in TRAINING_PANELS} and "no contrastive training ran" in texts(none.axes[0],
                                                                                                        "missing")


def test_write_verdicts_writes_every_file_of_the_report(verdicts, tmp_path):
    import csv
    import io

    from plmclaims.report import OWN_FILES, write_verdicts

    write_verdicts(verdicts, TIER, tmp_path / "out")
    for f in OWN_FILES:
        assert (tmp_path / "out" / f).stat().st_size > 0, f
    table = list(csv.DictReader(io.StringIO((tmp_path / "out" / "claims.csv").read_text())))
    assert {r["claim"] for r in table} == {v["id"] for v in verdicts}
    if any(v.get("models") for v in verdicts):
        rows = [r for r in table if r["claim"] == "sts/synthetic-two-models"]
        assert {(r["model"], r["model_verdict"]) for r in rows} == {("pretrained-lm", "reproduced"),
                                                                  ("raw-encoder", "inconclusive")}


def test_a_degenerate_seed_is_left_out_of_the_spread_in_the_table_and_the_figure(verdicts):
    """A side scored on two seeds whose third collapsed records that seed as null (left out of its mean): the
    measurement table and the quality-vs-parameters figure give the spread of the two scored seeds."""
    from plmclaims.report import markdown
    from plmclaims.report.params import params_figure

    scored = copy.deepcopy(verdicts)
    full = next(v for v in scored if v["id"] == "peft/synthetic-adapters")["measurements"]["full_ft"]
    full.update(measured=80.0, ci_low=78.0, ci_high=82.0, seeds=[79.0, None, 81.0])
    assert "80.00 [78.00, 82.00], 2 seeds 79.0–81.0" in markdown(scored, TIER)
    (peft,) = panel(params_figure(scored), "peft/synthetic-adapters")
    assert points(peft, "full-finetuning")[0][1] == 80.0 and (22.7e6, 80.0) in points(peft, "measured")
