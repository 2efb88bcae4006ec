"""The `claims` selection (config key, prefetch/plan --claims): exact ids, globs over ids and bare family names."""
from __future__ import annotations

import pytest

from conftest import run_snakemake
from plmclaims.claims import load_claims
from plmclaims.errors import UserError
from plmclaims.schema import MAX_LINE


@pytest.fixture(scope="module")
def every(repo):
    return [c.id for c in load_claims(repo / "replications")]


def ids(repo, patterns):
    return [c.id for c in load_claims(repo / "replications", patterns)]


def test_exact_id_selects_one(repo):
    assert ids(repo, ["sts/whitening-improves-bert"]) == ["sts/whitening-improves-bert"]


def test_glob_selects_the_family_folder(repo, every):
    got = ids(repo, ["probing/*"])
    assert got == [i for i in every if i.startswith("probing/")] and len(got) >= 2


def test_glob_inside_a_name(repo, every):
    got = ids(repo, ["peft/*-matches-finetuning"])
    assert got and all(i.startswith("peft/") and i.endswith("-matches-finetuning") for i in got)
    assert "peft/prompt-tuning-gap-closes-with-scale" not in got


def test_bare_family_name_equals_its_glob(repo):
    assert ids(repo, ["compression"]) == ids(repo, ["compression/*"]) != []


def test_protocol_family_name_selects_across_folders(repo, every):
    """'glue' is the protocol family of the PEFT claims fine-tuned on GLUE (their folder is peft/)."""
    got = ids(repo, ["glue"])
    assert got == [c.id for c in load_claims(repo / "replications") if c.protocol["family"] == "glue"]
    assert any(i.startswith("peft/") for i in got)
    assert "peft/prefix-tuning-matches-finetuning" not in got  # its protocol family is lm-tasks


def test_patterns_union_in_load_order_without_duplicates(repo, every):
    got = ids(repo, ["sts/whitening-improves-bert", "compression", "sts/*"])
    assert got == [i for i in every if i.startswith(("compression/", "sts/"))]


def test_glob_is_case_sensitive_like_the_ids(repo):
    with pytest.raises(UserError):
        load_claims(repo / "replications", ["STS/*"])


@pytest.mark.parametrize("pattern", ["sts/nope", "generation/*", "probe"])
def test_pattern_matching_nothing_is_one_line_naming_it(repo, pattern):
    with pytest.raises(UserError) as err:
        load_claims(repo / "replications", ["sts/*", pattern])
    msg = str(err.value)
    assert "\n" not in msg and len(msg) <= MAX_LINE
    assert msg.startswith("config field 'claims':") and repr(pattern) in msg
    families = msg.split("families: ")[1].split(";")[0].split(", ")
    assert families == sorted(families) and {"compression", "glue", "peft", "probing", "sts"} <= set(families)
    assert "ids: compression/" in msg


def test_workflow_runs_the_selected_family_only(repo, data_root, tmp_path):
    """The config key reaches the workflow: a dry run with a family name plans that family's verdicts alone."""
    res = run_snakemake(repo, tmp_path, "-n", "--config", "tier=tiny", f"data_root={data_root}",
                        f"claims_dir={repo / 'replications'}", "claims=[\"probing\"]")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "structural-probe-middle-layers" in res.stdout and "glove-avg-beats-bert-avg" not in res.stdout
    bad = run_snakemake(repo, tmp_path, "-n", "--config", "tier=tiny", f"data_root={data_root}",
                        f"claims_dir={repo / 'replications'}", "claims=[\"probing/nope*\"]")
    assert bad.returncode != 0
    assert "plmclaims: error: config field 'claims': 'probing/nope*' matches no claim" in bad.stderr
