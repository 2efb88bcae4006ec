"""Reading failed jobs from a real Snakemake log, as the workflow's onerror handler does."""
from __future__ import annotations

import subprocess
import sys

from plmclaims.failures import Failure, attribute, failed_jobs

SNAKEFILE = """
rule all:
    input: "runs/a/metrics.json", "runs/b/metrics.json", "runs/c/metrics.json"
rule a:
    output: "runs/a/metrics.json"
    log: "logs/a.log"
    shell: "echo boom > {log}; exit 3"
rule b:
    output: "runs/b/metrics.json"
    shell: "echo ok > {output}"
rule c:
    output: "runs/c/metrics.json"
    shell: "exit 1"
"""


def test_failed_jobs_read_from_a_keep_going_log(tmp_path):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    res = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--keep-going"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode != 0
    logs = sorted((tmp_path / ".snakemake" / "log").glob("*.snakemake.log"))
    failures = failed_jobs(logs)
    assert {f.rule for f in failures} == {"a", "c"}
    a = next(f for f in failures if f.rule == "a")
    assert a.outputs == ("runs/a/metrics.json",) and a.logs == ("logs/a.log",)
    assert "rule a failed; log: logs/a.log" == a.describe()
    c = next(f for f in failures if f.rule == "c")
    assert c.logs == () and "no log file" in c.describe()


def test_attribute_prefers_the_job_that_was_to_write_a_needed_file(tmp_path):
    a = Failure("finetune", (str(tmp_path / "runs/x/metrics.json"),), ("logs/x.log",))
    p = Failure("pretrain", (str(tmp_path / "models/m/metrics.json"),), ("logs/p.log",))
    assert attribute([str(tmp_path / "runs/x/metrics.json")], [p, a]) == [a]
    # nothing this claim needs failed directly: the failure is upstream (every failure is named)
    assert attribute([str(tmp_path / "runs/y/metrics.json")], [p, a]) == [p, a]
    assert failed_jobs([tmp_path / "missing.log"]) == []
