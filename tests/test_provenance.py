"""provenance.git_commit: the commit a result names, and when the checkout it ran from was not that commit."""
from __future__ import annotations

import subprocess

from plmclaims.provenance import git_commit


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True)


def test_git_commit_names_head_and_dirt_outside_the_ignored_files(tmp_path):
    root = tmp_path / "checkout"
    root.mkdir()
    _git(root, "init", "-q")
    for name in ("code.py", "report.md"):
        (root / name).write_text("v1\n")
    _git(root, "add", ".")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert git_commit(root=root) == head and len(head) == 40
    (root / "untracked.txt").write_text("x\n")  # untracked files do not make a checkout dirty
    assert git_commit(root=root) == head
    (root / "report.md").write_text("v2\n")
    assert git_commit(root=root) == head + "+dirty"
    # the caller's own output files do not count, given as paths of any spelling that resolve to them
    assert git_commit(ignore=(root / "report.md",), root=root) == head
    assert git_commit(ignore=(root / "sub" / ".." / "report.md",), root=root) == head
    (root / "code.py").write_text("v2\n")  # any other tracked change still does
    assert git_commit(ignore=(root / "report.md",), root=root) == head + "+dirty"


def test_git_commit_outside_a_checkout_is_unknown(tmp_path):
    assert git_commit(root=tmp_path) == "unknown"


def test_a_run_records_the_start_up_its_process_spent_before_it_began_apart_from_its_own_time(tmp_path):
    """startup_s is the job's time before the run's timer started (imports, data reading; here a 0.6 s sleep),
    wall_time_s the run's own: a cost plan is checked against both."""
    import json
    import sys

    out, second = tmp_path / "metrics.json", tmp_path / "second.json"
    # a second run in the same process (a job that runs several) starts 0.3 s after the first ended: its start-up
    # is that gap, not the process's age, which would count the first run's start-up and work again
    code = ("import time; time.sleep(0.6)\nfrom plmclaims.provenance import Run\n"
            f"with Run({str(out)!r}, {{}}) as run:\n    run.values = {{'x': 1}}; time.sleep(0.4)\n"
            f"time.sleep(0.3)\nwith Run({str(second)!r}, {{}}) as run:\n    run.values = {{'x': 2}}\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    prov = json.loads(out.read_text())["provenance"]
    assert 0.6 <= prov["startup_s"] < 60
    assert prov["wall_time_s"] >= 0.4
    later = json.loads(second.read_text())["provenance"]
    # the process's age by then is at least the first run's start-up + its wall time + the gap
    assert 0.3 <= later["startup_s"] < prov["startup_s"] + prov["wall_time_s"]


def test_a_run_records_the_peak_memory_its_process_held(tmp_path):
    """peak_rss_mb: the most resident memory of the job's process by the run's end (what mem_mb must cover): a run that
    held a 200 MB array reports at least that, after the array is freed."""
    import json
    import sys

    out = tmp_path / "metrics.json"
    code = ("import numpy as np\nfrom plmclaims.provenance import Run\n"
            f"with Run({str(out)!r}, {{}}) as run:\n    a = np.ones(200 * 2**20, np.uint8); del a\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert json.loads(out.read_text())["provenance"]["peak_rss_mb"] >= 200


def test_a_run_records_the_cpu_time_its_process_used(tmp_path):
    """cpu_s: the job's CPU seconds by the run's end, start-up included; sleeping costs none, computing does."""
    import json
    import sys

    out = tmp_path / "metrics.json"
    code = ("import time\nfrom plmclaims.provenance import Run\n"
            f"with Run({str(out)!r}, {{}}) as run:\n    time.sleep(1.0); t = time.process_time()\n"
            "    while time.process_time() - t < 0.5: pass\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    prov = json.loads(out.read_text())["provenance"]
    assert 0.5 <= prov["cpu_s"] < prov["wall_time_s"] + prov["startup_s"]
