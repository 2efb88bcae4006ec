"""The published micro report (docs/results/micro: claims.md, claims.json, claims.csv, provenance.json and the
figures) is a finished main job's report, copied there by `plmclaims publish` and never edited by hand. It lives
outside the workflow's results/ (never committed), so a fresh clone's main job computes instead of finding its
outputs present. It cannot go stale silently: it has a row for every claim in replications/, and every verdict whose
claim version, planned runs or judging settings differ from what the current micro tier plans (a change of budget,
curve points or skipped tasks in micro.yaml shows) is marked outdated with what changed, and no other is; its
Markdown and CSV are what the current report code makes of its claims.json, the README's claim table shows its
verdicts, and the commits and package versions that produced it and its runs are real and within the project's
pins.

When a claim is added or changed, rerun the main job (`snakemake --cores 2 --config data_root=...`; only what
changed is computed), then `plmclaims publish --tier micro`, and commit docs/results/micro in the same change; where
that cannot be done with the change, `plmclaims publish --tier micro --render-only` marks the verdicts it outdates.
After a change to the report code alone, `--render-only` rewrites claims.md, claims.csv and the figures from the
published claims.json."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from plmclaims.claims import load_claims
from plmclaims.report import csv_text, markdown
from plmclaims.tiers import load_tier

FILES = ("claims.md", "claims.json", "claims.csv", "provenance.json", "figures/forest.png",
         "figures/quality-vs-params.png", "figures/curves.png",
         "figures/contrastive-training.png")
REGENERATE = ("rerun the main job (snakemake --cores 2 --config data_root=...), then plmclaims publish --tier micro, "
              "and commit docs/results/micro with the change")
RENDER = ("run plmclaims publish --tier micro --render-only (it marks outdated verdicts) and commit docs/results/micro; "
          "better, rerun the main job and publish")


@pytest.fixture(scope="module")
def published(repo):
    out = repo / "docs" / "results" / "micro"
    missing = [f for f in FILES if not (out / f).exists()]
    assert not missing, f"the published micro report lacks {missing}; {REGENERATE}"
    return out


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)


def test_it_covers_every_claim_and_marks_each_older_version(published, repo):
    claims = {c.id: c.data["version"] for c in load_claims(repo / "replications")}
    verdicts = json.loads((published / "claims.json").read_text())
    shown = {v["id"]: v for v in verdicts}
    assert sorted(shown) == sorted(claims), (
        f"claims without a row: {sorted(set(claims) - set(shown))}; rows of claims that are gone: "
        f"{sorted(set(shown) - set(claims))}; {RENDER}")
    older = {i for i, v in claims.items() if shown[i]["version"] != v}
    unmarked = sorted(i for i in older if f"claim version {shown[i]['version']} here, {claims[i]} now"
                      not in shown[i].get("outdated", ""))
    assert not unmarked, f"verdicts of an older claim version not marked outdated: {unmarked}; {RENDER}"
    assert all(v["tier"] == "micro" and not v.get("rehearsal") for v in verdicts)
    text = (published / "claims.md").read_text()
    assert all(f"`{i}`" in text for i in claims)


def test_a_verdict_is_marked_outdated_exactly_where_its_runs_or_judging_settings_are_not_the_tiers_now(published,
                                                                                                        repo):
    """Recomputed here, independently of report.outdated: a run's key covers everything that can change its result,
    so the planned score runs' paths name the tier's budgets; the judging settings are the part of the tier a verdict
    reads besides its runs (plan.verdict_tier_view). A verdict whose claim, runs or settings changed must say so, and
    one that is current must not."""
    from plmclaims.plan import plan_all, verdict_tier_view

    tier = load_tier("micro")
    claims = load_claims(repo / "replications")
    plans = {p.claim.id: p for p in plan_all(claims, tier)}
    results = f"{yaml.safe_load((repo / 'config' / 'config.yaml').read_text())['results']}/micro"  # where it ran
    expected = {}
    for v in json.loads((published / "claims.json").read_text()):
        cplan = plans[v["id"]]
        kinds = []
        if v["version"] != cplan.claim.data["version"]:
            kinds.append("claim version")
        planned = sorted({r.path(results) for r in cplan.score_runs()})
        if sorted(v["runs"]) != planned and "added after" not in v["note"]:
            kinds.append("planned runs")
        recorded = verdict_tier_view(cplan, (v.get("provenance") or {}).get("config", {}).get("tier", {}))
        if v.get("provenance") and recorded != json.loads(json.dumps(verdict_tier_view(cplan, tier), default=str)):
            kinds.append("judged with other")
        if "added after" in v["note"]:
            kinds.append("added after")
        expected[v["id"]] = kinds
    marked = {v["id"]: v.get("outdated", "") for v in json.loads((published / "claims.json").read_text())}
    wrong = {i: (kinds, marked[i]) for i, kinds in expected.items()
             if bool(kinds) != bool(marked[i]) or not all(k in marked[i] for k in kinds)}
    assert not wrong, f"outdated marks that are not what changed (expected kinds, mark): {wrong}; {RENDER}"


def test_the_readme_claim_table_shows_the_published_verdicts(published, repo):
    """The README's verdict column is report.readme_verdict of the committed claims.json, so it cannot drift from the
    report (`plmclaims readme` sets it)."""
    from plmclaims.report import sync_readme

    text = (repo / "README.md").read_text()
    synced, missing = sync_readme(text, json.loads((published / "claims.json").read_text()))
    assert not missing, f"README.md has no claim-table row for {missing}"
    stale = [a.split("|")[1].strip() for a, b in zip(text.split("\n"), synced.split("\n")) if a != b]
    assert not stale, (f"README.md's claim table shows other verdicts than docs/results/micro/claims.json for {stale}; "
                       "run: plmclaims readme")


def test_its_markdown_and_csv_are_what_the_report_code_makes_of_its_json(published):
    """Never edited by hand: the tables are regenerated from claims.json and compared byte for byte."""
    verdicts = json.loads((published / "claims.json").read_text())
    assert (published / "claims.md").read_text() == markdown(verdicts, load_tier("micro")), (
        f"docs/results/micro/claims.md differs from what the report code makes of its claims.json; {RENDER}")
    table = list(csv.DictReader(io.StringIO((published / "claims.csv").read_text())))
    assert table == list(csv.DictReader(io.StringIO(csv_text(verdicts)))), f"claims.csv is stale; {RENDER}"
    for f in FILES:
        if f.endswith(".png"):
            assert (published / f).read_bytes()[:4] == b"\x89PNG"


def test_no_report_is_committed_under_the_workflow_results(repo):
    """results/ is the workflow's: a committed report there would satisfy `rule all` on a fresh clone."""
    tracked = _git(repo, "ls-files", "results").stdout.split()
    assert not tracked, f"files under results/ are committed: {tracked[:5]}; the published report is docs/results/"
    assert _git(repo, "check-ignore", "-q", "results/micro/claims.md").returncode == 0


def test_its_provenance_names_real_commits_and_pinned_versions(published, repo):
    prov = json.loads((published / "provenance.json").read_text())
    verdicts = json.loads((published / "claims.json").read_text())
    ran = [v for v in verdicts if "added after" not in v["note"]]  # a claim added since has a row, not a run
    assert prov["tier"] == "micro" and prov["claims"] == {v["id"]: v["version"] for v in ran}
    commit = prov["commit"]
    assert len(commit) == 40 and "+dirty" not in commit, (
        f"the report was written from a tree with uncommitted changes ({commit}); commit first, then {REGENERATE}")
    if _git(repo, "rev-parse", "--is-shallow-repository").stdout.strip() == "true" and \
            _git(repo, "cat-file", "-e", f"{commit}^{{commit}}").returncode:
        pytest.skip(f"a shallow clone lacks the report's commit {commit[:10]}; the full history has it")
    assert _git(repo, "cat-file", "-e", f"{commit}^{{commit}}").returncode == 0, f"{commit}: no such commit"
    assert _git(repo, "merge-base", "--is-ancestor", commit, "HEAD").returncode == 0, (
        f"the report's commit {commit[:10]} is not in this branch's history")
    # every run and verdict came from a commit of this history (a dirty tree's runs name the commit they started from)
    for c in set(prov["run_commits"]) | set(prov["verdict_commits"]):
        base = c.removesuffix("+dirty")
        assert _git(repo, "cat-file", "-e", f"{base}^{{commit}}").returncode == 0, f"a run names commit {c}, unknown here"
    assert sum(prov["run_commits"].values()) > 0


def test_its_package_versions_are_within_the_project_pins(published, repo):
    from packaging.requirements import Requirement

    pins = {Requirement(r).name: Requirement(r).specifier
            for r in tomllib.loads((repo / "pyproject.toml").read_text())["project"]["dependencies"]}
    prov = json.loads((published / "provenance.json").read_text())
    seen = {n: [v] for n, v in prov["packages"].items() if v}
    for n, versions in prov["run_packages"].items():
        seen.setdefault(n, []).extend(versions)
    checked = 0
    for name, versions in seen.items():
        if name in pins:
            bad = [v for v in versions if v not in pins[name]]
            assert not bad, f"{name} {bad} outside the project's pin {pins[name]}; {REGENERATE} with the pinned versions"
            checked += 1
    assert checked >= 5  # torch, transformers, datasets, mteb, snakemake at least


def test_the_readme_command_sets_the_verdict_cells_and_names_a_claim_without_a_row(published, repo, tmp_path):
    readme = tmp_path / "README.md"
    text = (repo / "README.md").read_text()
    row = "| `sts/flow-improves-bert` |"
    readme.write_text("\n".join(line for line in text.split("\n") if not line.startswith(row)))
    res = subprocess.run([sys.executable, "-m", "plmclaims.cli", "readme", "--claims", str(published / "claims.json"),
                          str(readme)], capture_output=True, text=True)
    assert res.returncode == 2 and "no claim-table row" in res.stderr and "sts/flow-improves-bert" in res.stderr
    stale = text.replace("| **reproduced**", "| **not-reproduced**")
    readme.write_text(stale)
    res = subprocess.run([sys.executable, "-m", "plmclaims.cli", "readme", "--claims", str(published / "claims.json"),
                          str(readme)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert stale != text == readme.read_text()  # the cells back to the report's


def test_the_readme_explains_every_verdict_word_the_report_uses(repo):
    """Each verdict word the engine gives has its one line in the README, as in the report's legend."""
    from plmclaims.report import VERDICT_MEANING

    text = (repo / "README.md").read_text()
    missing = [w for w in VERDICT_MEANING if f"- **{w}**: " not in text]
    assert not missing, f"README.md explains no verdict word {missing}"
