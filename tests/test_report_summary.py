"""What a reader sees first: claims.md's written summary (what reproduced and what was contradicted, on which model;
the rest counted by cause; what a verdict at the tier can say), the claims grouped by verdict with the figures where
their numbers are, and the summary the terminal shows when the workflow ends. On a synthetic report
(tests/report_samples.py), with and without a claim measured on several models; test_end_of_run.py checks both on a
tiny-tier run."""
from __future__ import annotations

import shlex

from report_samples import TIER, report

from plmclaims.report import markdown, terminal_summary, written_summary


def test_the_written_summary_says_what_held_on_which_model_and_why_the_rest_is_undecided(tmp_path):
    text = "\n".join(written_summary(report(tmp_path), TIER))
    assert "7 claims at tier `micro`: 1 reproduced, 1 not-reproduced, 4 inconclusive, 1 not-run." in text
    assert "**Reproduced** (1)" in text
    assert ("- `intrinsic/synthetic-anisotropy` on micro-bert (for bert-base-uncased): "
            "The statement of intrinsic/synthetic-anisotropy." in text)
    assert ("- `compression/synthetic-heads` on all-minilm-l6-v2: The statement of compression/synthetic-heads. Why: "
            "contradicted: masked_40 >= all_heads - 2.0 on avg (avg -4.90 [-5.40, -4.40])." in text)
    causes = {line.split(": ")[0][2:]: line for line in text.splitlines() if line.startswith("- ") and "(`" in line}
    assert causes["too few benchmarks are informative"].startswith(
        "- too few benchmarks are informative: on most of them no side is above its floor: 2 "
        "(`contrastive/synthetic-objectives`, `sts/synthetic-whitening`)")
    assert "1 (`peft/synthetic-adapters`)" in causes[
        "a run is degenerate (constant predictions), so a side has no score"]
    assert "1 (`compression/synthetic-seed-grid`)" in causes[
        "a credited side is not above its floor (chance, the random-weights twin or a lexical control)"]
    assert "1 (`intrinsic/synthetic-cka`)" in causes[
        "this tier judges none of its checks (their scope is judged at another tier)"]
    assert "**What a verdict at this tier can and cannot say.** This tier judges mechanics only." in text
    assert "Measured on several models" not in text


def test_a_claim_on_several_models_names_the_headline_model_and_the_others(tmp_path):
    verdicts = report(tmp_path, models=True)
    text = "\n".join(written_summary(verdicts, TIER))
    line = next(x for x in text.splitlines() if x.startswith("- `sts/synthetic-two-models`"))
    assert line.startswith("- `sts/synthetic-two-models` on pretrained-lm: gemma-3-270m; Gemma 3 270M, a raw decoder:")
    assert "The headline is the decoder: the encoder at this tier is a 4-layer stand-in." in line
    assert ("Also measured on raw-encoder: micro-bert (for bert-base-uncased); micro-BERT stands for BERT-base: "
            "inconclusive (avg > cls on avg: avg 45.50 on avg is not above its tfidf floor 66.30)." in line)
    assert "**Measured on several models** (1)" in text
    md = markdown(verdicts, TIER)
    assert ("| `sts/synthetic-two-models` | avg > 0 by construction [pretrained-lm] | mechanics | "
            "shown (measured: holds) |" in md)
    assert "| `sts/synthetic-two-models` | avg > cls on avg [raw-encoder] | mechanics | inconclusive |" in md
    assert "| `sts/synthetic-two-models` | CLS vector [raw-encoder] |" in md  # the other model's measurements too
    row = next(x for x in md.splitlines() if x.startswith("| `sts/synthetic-two-models` | X1 |"))
    assert "Headline model pretrained-lm: gemma-3-270m" in row and "On raw-encoder: micro-bert" in row
    # a headline entry that leaves its checks and measurements to the top level (the headline's) reads the same
    two = next(v for v in verdicts if v["id"] == "sts/synthetic-two-models")
    for key in ("checks", "measurements", "verdict", "note"):
        del two["models"]["pretrained-lm"][key]
    assert "\n".join(written_summary(verdicts, TIER)) == text and markdown(verdicts, TIER) == md


def test_claims_md_opens_with_the_summary_then_groups_claims_by_verdict_with_figures_beside_their_numbers(tmp_path):
    md = markdown(report(tmp_path), TIER)
    heads = [line for line in md.splitlines() if line.startswith("#")]
    assert heads[:4] == ["# Claim report: tier `micro`", "## Summary", "## Reported vs measured",
                         "## Claims by verdict"]
    groups = [h for h in heads if h.startswith("### ")]
    assert groups == ["### Reproduced (1)", "### Not reproduced (1)", "### Inconclusive (4)", "### Not run (1)"]
    reproduced = md.split("### Reproduced (1)")[1].split("###")[0]
    assert "`intrinsic/synthetic-anisotropy`" in reproduced and "`sts/synthetic-whitening`" not in reproduced
    for section, figure in (("## Reported vs measured", "figures/forest.png"), ("## Curves", "figures/curves.png"),
                            ("## Quality vs trained parameters", "figures/quality-vs-params.png"),
                            ("## Training budgets", "figures/contrastive-training.png")):
        body = md.split(section + "\n")[1].split("\n## ")[0]
        assert f"]({figure})" in body, section


def test_the_end_of_run_summary_counts_lists_each_claim_and_says_where_the_report_is(tmp_path):
    verdicts = report(tmp_path)
    config = {"tier": "micro", "data_root": "/data/plm claims", "claims": ["sts/*", "probing"]}
    lines = terminal_summary(verdicts, "results/micro", config, ["my config.yaml"]).splitlines()
    assert lines[0] == "plmclaims: 7 claims: 1 reproduced, 1 not-reproduced, 4 inconclusive, 1 not-run"
    claims = lines[1:-2]
    assert [line.split()[0] for line in claims] == [  # grouped by verdict, then by id
        "intrinsic/synthetic-anisotropy", "compression/synthetic-heads", "compression/synthetic-seed-grid",
        "contrastive/synthetic-objectives", "peft/synthetic-adapters", "sts/synthetic-whitening",
        "intrinsic/synthetic-cka"]
    assert claims[1].split()[1] == "not-reproduced" and "contradicted: masked_40 >= all_heads - 2.0" in claims[1]
    assert all(len(line) <= 160 for line in lines[1:-2])
    assert lines[-2].startswith("plmclaims: report: results/micro/claims.md")
    command = lines[-1].split("provenance: ", 1)[1]
    assert shlex.split(command) == ["snakemake", "--report", "results/micro/report.html", "--configfile",
                                    "my config.yaml", "--config", "tier=micro", "data_root=/data/plm claims",
                                    'claims=["sts/*", "probing"]']


def test_the_readme_cell_of_a_claim_on_several_models_names_the_model_it_rests_on():
    from report_samples import models_claim

    from plmclaims.report.readme import readme_verdict

    v = models_claim()
    cell = readme_verdict(v)
    head = v["headline_model"]
    others = [r for r in v["models"] if r != head]
    assert cell.startswith(f"**{v['verdict']}** on {v['models'][head].get('asset') or head} (")
    assert all(f"{v['models'][r].get('asset') or r}: {v['models'][r]['verdict']}" in cell for r in others)
