"""The end of a real run (the session's tiny-tier run, tiny_run): the terminal says where each job's progress goes,
and when the workflow ends it shows the verdict counts, a line per claim, where claims.md is and the --report
command; claims.md opens with its written summary; `plmclaims publish` takes the finished report into a docs folder
and `plmclaims list --report` reads it. (test_failures.py checks the same summary after a --keep-going failure.)"""
from __future__ import annotations

import json
import shutil
from collections import Counter

from plmclaims import cli

CLAIM = "sts/glove-avg-beats-bert-avg"


def test_a_tiny_run_ends_with_its_summary_and_its_report_publishes(tiny_run, tiny_run_stderr, repo, tmp_path, capsys):
    work, _ = tiny_run
    err = tiny_run_stderr
    verdicts = json.loads((work / "results" / "tiny" / "claims.json").read_text())
    n = len(verdicts)
    assert n > 1 and f"plmclaims: tier tiny, {n} claims; each job writes its progress to the file on its 'log:' " \
        "line" in err
    assert "log: results/tiny/" in err or "log: resources/tiny/" in err  # the line it points at
    tail = err[err.index(f"plmclaims: {n} claims: "):].splitlines()
    counted = dict(part.split(" ", 1)[::-1] for part in tail[0].removeprefix(f"plmclaims: {n} claims: ").split(", "))
    assert {k: int(c) for k, c in counted.items()} == Counter(v["verdict"] for v in verdicts)
    by_id = {v["id"]: v["verdict"] for v in verdicts}
    assert {line.split()[0]: line.split()[1] for line in tail[1:n + 1]} == by_id  # a line per claim, its verdict
    assert tail[n + 1].startswith("plmclaims: report: results/tiny/claims.md")
    assert "snakemake --report results/tiny/report.html --config tier=tiny" in tail[n + 2]
    md = (work / "results" / "tiny" / "claims.md").read_text()
    assert md.split("\n## ")[1].startswith(f"Summary\n\n{n} claims at tier `tiny`")
    claims = tmp_path / "claims"  # the run's claims (publish takes a report of every claim in its folder)
    for cid in by_id:
        (claims / cid).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(repo / "replications" / f"{cid}.yaml", claims / f"{cid}.yaml")
    assert cli.main(["publish", "--tier", "tiny", "--results", str(work / "results"), "--claims-dir", str(claims),
                     "--to", str(tmp_path / "docs")]) == 0
    assert (tmp_path / "docs" / "tiny" / "claims.md").read_text() == md  # the same code wrote both
    capsys.readouterr()
    assert cli.main(["list", "--claims-dir", str(claims), "--report",
                     str(tmp_path / "docs" / "tiny" / "claims.json")]) == 0
    listed = {line.split()[0]: line.split()[1:3] for line in capsys.readouterr().out.splitlines()[1:] if line.strip()}
    assert listed[CLAIM] == ["T5", by_id[CLAIM]]
