"""The published micro report (docs/results/micro: claims.md, claims.json, claims.csv, provenance.json and the
figures) is a finished main job's report, copied there by `plmclaims publish` and never edited by hand. It lives
outside the workflow's results/ (never committed), so a fresh clone's main job computes instead of finding its
outputs present. It cannot go stale silently: it covers exactly the claims in replications/ at their current
versions, each verdict rests on exactly the runs and judging settings that the current micro tier plans for it (so a
change of budget, curve points or skipped tasks in micro.yaml shows), its Markdown and CSV are what the current report
code makes of its claims.json, the README's claim table shows its verdicts, and the commits and package versions that
produced it and its runs are real and within the project's pins.

When a claim is added or changed, rerun the main job (`snakemake --cores 2 --config data_root=...`; only what
changed is computed), then `plmclaims publish --tier micro`, and commit docs/results/micro in the same change. After
a change to the report code alone, `plmclaims publish --tier micro --render-only` rewrites claims.md, claims.csv and
the figures from the published claims.json."""
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
RENDER = "run plmclaims publish --tier micro --render-only and commit docs/results/micro"


@pytest.fixture(scope="module")
def published(repo):
    out = repo / "docs" / "results" / "micro"
    missing = [f for f in FILES if not (out / f).exists()]
    assert not missing, f"the published micro report lacks {missing}; {REGENERATE}"
    return out


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)


def test_it_covers_every_claim_at_its_current_version(published, repo):
    claims = {c.id: c.data["version"] for c in load_claims(repo / "replications")}
    verdicts = json.loads((published / "claims.json").read_text())
    shown = {v["id"]: v["version"] for v in verdicts}
    assert sorted(shown) == sorted(claims), (
        f"claims without a verdict: {sorted(set(claims) - set(shown))}; verdicts of claims that are gone: "
        f"{sorted(set(shown) - set(claims))}; {REGENERATE}")
    stale = {i: (shown[i], v) for i, v in claims.items() if shown[i] != v}
    assert not stale, f"claims whose version changed since the report (report, now): {stale}; {REGENERATE}"
    assert all(v["tier"] == "micro" and not v.get("rehearsal") for v in verdicts)
    text = (published / "claims.md").read_text()
    assert all(f"`{i}`" in text for i in claims)


def test_each_verdict_rests_on_the_runs_and_judging_settings_the_tier_now_plans(published, repo):
    """A run's key covers everything that can change its result, so the planned score runs' paths name the tier's
    budgets; the judging settings are the part of the tier a verdict reads besides its runs (plan.verdict_tier_view)."""
    from plmclaims.plan import plan_all, verdict_tier_view

    tier = load_tier("micro")
    plans = {p.claim.id: p for p in plan_all(load_claims(repo / "replications"), tier)}
    results = f"{yaml.safe_load((repo / 'config' / 'config.yaml').read_text())['results']}/micro"  # where it ran
    stale_runs, stale_settings = {}, []
    for v in json.loads((published / "claims.json").read_text()):
        cplan = plans[v["id"]]
        planned = sorted({r.path(results) for r in cplan.score_runs()})
        if v["runs"] != planned:
            stale_runs[v["id"]] = (f"{len(set(planned) - set(v['runs']))} planned runs not in the report, "
                                   f"{len(set(v['runs']) - set(planned))} report runs no longer planned")
        recorded = verdict_tier_view(cplan, v["provenance"]["config"]["tier"])
        if recorded != json.loads(json.dumps(verdict_tier_view(cplan, tier), default=str)):
            stale_settings.append(v["id"])
    assert not stale_runs, f"verdicts whose runs differ from what the micro tier now plans: {stale_runs}; {REGENERATE}"
    assert not stale_settings, (f"verdicts judged with other bootstrap, judges, controls, floors or roles than "
                                f"micro.yaml's now: {stale_settings}; {REGENERATE}")


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
    assert prov["tier"] == "micro" and prov["claims"] == {v["id"]: v["version"] for v in verdicts}
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
