"""The end of a real run (one tiny-tier claim, about a minute): the terminal says where each job's progress goes,
and when the workflow ends it shows the verdict counts, a line per claim, where claims.md is and the --report
command; claims.md opens with its written summary; `plmclaims publish` takes the finished report into a docs folder
and `plmclaims list --report` reads it. (test_failures.py checks the same summary after a --keep-going failure.)"""
from __future__ import annotations

import json
import shutil

import pytest
from conftest import OFFLINE, run_snakemake, tiny_config

from plmclaims import cli

CLAIM = "sts/glove-avg-beats-bert-avg"


@pytest.mark.slow
def test_a_tiny_run_ends_with_its_summary_and_its_report_publishes(repo, data_root, tmp_path, capsys):
    work = tmp_path / "work"
    work.mkdir()
    res = run_snakemake(repo, work, "--cores", "2", *tiny_config(repo, data_root, [CLAIM]), env=OFFLINE)
    assert res.returncode == 0, res.stderr[-3000:]
    err = res.stderr
    assert "plmclaims: tier tiny, 1 claim; each job writes its progress to the file on its 'log:' line" in err
    assert "log: results/tiny/" in err or "log: resources/tiny/" in err  # the line it points at
    verdict = json.loads((work / "results" / "tiny" / "claims.json").read_text())[0]
    tail = err[err.index("plmclaims: 1 claim: "):].splitlines()
    assert tail[0] == f"plmclaims: 1 claim: 1 {verdict['verdict']}"
    assert tail[1].split()[:2] == [CLAIM, verdict["verdict"]]
    assert tail[2].startswith("plmclaims: report: results/tiny/claims.md")
    assert "snakemake --report results/tiny/report.html --config tier=tiny" in tail[3]
    md = (work / "results" / "tiny" / "claims.md").read_text()
    assert md.split("\n## ")[1].startswith("Summary\n\n1 claim at tier `tiny`")
    claims = tmp_path / "claims" / "sts"
    claims.mkdir(parents=True)
    shutil.copy(repo / "replications" / f"{CLAIM}.yaml", claims)
    assert cli.main(["publish", "--tier", "tiny", "--results", str(work / "results"), "--claims-dir",
                     str(claims.parent), "--to", str(tmp_path / "docs")]) == 0
    assert (tmp_path / "docs" / "tiny" / "claims.md").read_text() == md  # the same code wrote both
    capsys.readouterr()
    assert cli.main(["list", "--claims-dir", str(claims.parent), "--report",
                     str(tmp_path / "docs" / "tiny" / "claims.json")]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:3] == [CLAIM, "T5", verdict["verdict"]]
