"""The command line a user meets: the user's commands apart from the workflow's rule bodies, a help text of whole
sentences, --version, --tier naming its values, `list` (claims with their published verdicts), `publish` (a finished
run's report into docs/results/<tier>) and a mistyped claim id answered with the nearest ids."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from plmclaims import __version__, cli

USER_COMMANDS = ["validate", "plan", "recipes", "list", "prefetch", "rehearse", "publish", "readme"]


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_the_top_level_help_lists_the_user_commands_and_groups_the_rule_bodies():
    res = subprocess.run([sys.executable, "-m", "plmclaims.cli", "--help"], capture_output=True, text=True, check=True)
    listed = [line.split()[0] for line in res.stdout.split("COMMAND\n", 2)[-1].splitlines()
              if line.startswith("    ") and not line.startswith("     ")]
    assert listed == USER_COMMANDS + ["rule"]
    rules = cli.rule_commands()
    assert {"verdict", "report", "pretrain", "finetune", "probe", "contrastive"} <= rules
    assert not rules & set(listed)  # a rule body is no top-level command
    description = res.stdout.split("\n\n")[1]
    assert description.rstrip().endswith(".") and "plmclaims rule" in description
    res = subprocess.run([sys.executable, "-m", "plmclaims.cli", "rule", "--help"], capture_output=True, text=True)
    assert all(f"    {name}" in res.stdout for name in rules)


def test_version_and_tier_values(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out.strip() == f"plmclaims {__version__}"
    with pytest.raises(SystemExit):
        cli.main(["plan", "--help"])
    tiers = ["micro", "paper", "paper-multiberts", "rehearsal", "rehearsal-multiberts", "rehearsal-workstation", "tiny",
             "workstation"]
    assert f"--tier {{{','.join(tiers)}}}|FILE" in capsys.readouterr().out
    rc, _, err = _run(capsys, "validate", "--tier", "mikro")
    assert rc == 2 and f"allowed values: {', '.join(tiers)}" in err


def test_list_shows_each_claim_with_its_published_verdict(capsys, repo, monkeypatch):
    monkeypatch.chdir(repo)
    published = {v["id"]: v for v in json.loads((repo / "docs/results/micro/claims.json").read_text())}
    rc, out, _ = _run(capsys, "list", "--claims", "sts")
    lines = out.splitlines()
    assert rc == 0 and lines[0].endswith("verdicts: docs/results/micro/claims.json")
    for line in lines[1:]:
        cid, _seed, verdict, mark = line.split()[:4]
        assert cid.startswith("sts/") and verdict == published[cid]["verdict"]
        assert (mark == "(outdated)") == bool(published[cid].get("outdated"))  # marked as the report marks it
    rc, out, _ = _run(capsys, "list", "--claims", "sts/glove-avg-beats-bert-avg", "--why")
    why = out.splitlines()[1].split(None, 3)[3].removeprefix("(outdated)").strip()
    assert why.startswith(published["sts/glove-avg-beats-bert-avg"]["note"][:40])


def test_list_without_a_report_marks_every_verdict_missing(capsys, repo, tmp_path):
    rc, out, _ = _run(capsys, "list", "--claims-dir", str(repo / "replications"), "--report", str(tmp_path / "no.json"))
    assert rc == 0 and "none there" in out.splitlines()[0]
    assert all(line.split()[2] == "-" for line in out.splitlines()[1:])


@pytest.mark.parametrize("argv", [["list", "--claims", "sts/glove-avg-beat-bert-avg"],
                                  ["list", "--claims", "glove-avg-beats-bert-avg"]])
def test_a_mistyped_claim_id_suggests_the_nearest(capsys, repo, monkeypatch, argv):
    monkeypatch.chdir(repo)
    rc, _, err = _run(capsys, *argv)
    assert rc == 2 and "did you mean sts/glove-avg-beats-bert-avg?" in err and len(err.splitlines()) == 1


def test_the_verdict_rule_suggests_the_nearest_claim_too(capsys, repo, tmp_path):
    rc, _, err = _run(capsys, "rule", "verdict", "--tier", "tiny", "--claims-dir", str(repo / "replications"),
                      "--claim", "sts/whitening-improve-bert", "--results", str(tmp_path), "--out", str(tmp_path / "v"))
    assert rc == 2 and "did you mean sts/whitening-improves-bert" in err


@pytest.fixture
def finished_run(repo, tmp_path):
    """A finished run's results folder: the published micro report copied where the workflow writes it, each verdict
    at its claim's current version and without the published copy's outdated marks (publish checks versions and marks
    what the tier now plans otherwise; what it copies and renders does not depend on what the verdicts say)."""
    from plmclaims.claims import load_claims

    results = tmp_path / "results"
    shutil.copytree(repo / "docs" / "results" / "micro", results / "micro")
    versions = {c.id: c.data["version"] for c in load_claims(repo / "replications")}
    path = results / "micro" / "claims.json"
    verdicts = [{**{k: x for k, x in v.items() if k != "outdated"}, "version": versions[v["id"]]}
                for v in json.loads(path.read_text())]
    path.write_text(json.dumps(verdicts, indent=2))
    return results


def test_publish_copies_a_finished_report_and_writes_its_tables_with_the_current_code(capsys, repo, finished_run,
                                                                                      tmp_path):
    from plmclaims.report import OWN_FILES, csv_text, markdown
    from plmclaims.tiers import load_tier

    (finished_run / "micro" / "claims.md").write_text("stale")
    dest = tmp_path / "docs"
    rc, out, err = _run(capsys, "publish", "--results", str(finished_run), "--to", str(dest), "--claims-dir",
                        str(repo / "replications"))
    assert rc == 0, err
    assert "next: plmclaims readme" in out
    verdicts = json.loads((dest / "micro" / "claims.json").read_text())
    assert (dest / "micro" / "claims.md").read_text() == markdown(verdicts, load_tier("micro"))
    assert (dest / "micro" / "claims.csv").read_bytes().decode() == csv_text(verdicts)
    for f in OWN_FILES:
        if f.endswith((".png", "provenance.json")):
            assert (dest / "micro" / f).read_bytes() == (finished_run / "micro" / f).read_bytes(), f
    assert not list(dest.glob(".*"))  # no staging folder left behind


@pytest.mark.parametrize("edit, words", [
    (lambda vs: vs[0].update(verdict="error"), "claims are 'error'"),
    (lambda vs: vs.pop(), "claims without a verdict"),
    (lambda vs: vs[0].update(version=vs[0]["version"] + 1), "verdicts of an older claim version"),
    (lambda vs: vs[0].update(tier="tiny"), "verdicts of tier tiny"),
])
def test_publish_refuses_a_report_that_is_not_the_whole_tier(capsys, repo, finished_run, tmp_path, edit, words):
    path = finished_run / "micro" / "claims.json"
    verdicts = json.loads(path.read_text())
    edit(verdicts)
    path.write_text(json.dumps(verdicts))
    rc, _, err = _run(capsys, "publish", "--results", str(finished_run), "--to", str(tmp_path / "docs"),
                      "--claims-dir", str(repo / "replications"))
    assert rc == 2 and words in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "docs" / "micro").exists()


def test_publish_names_a_run_without_a_report(capsys, repo, tmp_path):
    rc, _, err = _run(capsys, "publish", "--results", str(tmp_path), "--to", str(tmp_path / "docs"))
    assert rc == 2 and "no finished report" in err and "run the main job" in err


def test_render_only_rewrites_the_published_tables_and_figures(capsys, tmp_path):
    from report_samples import report

    folder = tmp_path / "docs" / "micro"
    (folder / "figures").mkdir(parents=True)
    verdicts = report(tmp_path / "runs")
    for v in verdicts:
        v["runs"] = []  # the runs the training figure reads are not here
    (folder / "claims.json").write_text(json.dumps(verdicts))
    (folder / "claims.md").write_text("stale")
    training = b"\x89PNG as published"
    (folder / "figures" / "contrastive-training.png").write_bytes(training)
    rc, out, err = _run(capsys, "publish", "--render-only", "--to", str(folder.parent))
    assert rc == 0, err
    assert (folder / "claims.md").read_text().startswith("# Claim report: tier `micro`")
    for f in ("forest", "curves", "quality-vs-params"):
        assert (folder / "figures" / f"{f}.png").read_bytes()[:4] == b"\x89PNG"
    # the contrastive runs are not here, so their figure is kept as published, not redrawn empty
    assert (folder / "figures" / "contrastive-training.png").read_bytes() == training
    assert "contrastive-training" not in out
