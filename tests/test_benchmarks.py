"""Every benchmark script runs: each at its smallest size (`--smallest`: the code path in seconds of CPU), so a refactor
of the code they call cannot break them silently. The figures they print at that size mean nothing; what is checked
is that each finishes and prints its table.

A new script in benchmarks/ is one line in BENCHMARKS: its name and a pattern its --smallest output must contain, or
None where another test runs it at that size (test_every_benchmark_script_has_a_row fails until it has one)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# script -> a pattern its `--smallest` output contains (the table it exists to print)
BENCHMARKS = {
    # None: another test runs the script at its smallest size and checks more of its table (here: test_checkpoint.py's
    # test_the_overhead_benchmark_times_both_and_finds_the_same_outputs)
    "bench_checkpoint.py": None,
    "bench_compression.py": r"onnx-int8 +|onnx-int8 skipped",
    "bench_contrastive.py": r"\nsimcse +\d",
    "bench_sts_eval.py": r"max \|diff\|: 0\.00\d\d \(aim: at most 0\.01: met\)",  # the two stacks agree
    "contrastive_geometry.py": r"identical losses\): True",
    "encode_cost.py": r"int8, 1 a batch: .* and the union 0\.00e\+00",  # one a batch: the union changes no vector
    "optimiser_step.py": r"fused +\d",
    "plan_vs_measured.py": r"tier tiny: \d+ planned runs",
    "real_lm.py": r"\ntransfer bit-xor model +1 .*\n\d+ new runs at tier tiny: \d+ job-seconds",  # its class ran
    "select_lr_contrastive.py": r"\nsimcse .* 1e-05",
    "select_lr_micro.py": r"1e-04 +1 +1 ",
    "throughput.py": r"micro-bert .* forward +\d+ tok/s",
}


def test_every_benchmark_script_has_a_row():
    scripts = {p.name for p in (REPO / "benchmarks").glob("*.py")}
    assert scripts == set(BENCHMARKS), f"add a row to BENCHMARKS for: {sorted(scripts - set(BENCHMARKS))}"


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(s for s, pattern in BENCHMARKS.items() if pattern))
def test_benchmark_runs_at_its_smallest_size(script, data_root, tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "PLMCLAIMS_DATA_ROOT": str(data_root), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    # run from a scratch folder, so nothing a script writes lands in the repository
    res = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), "--smallest"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert re.search(BENCHMARKS[script], res.stdout), res.stdout[-3000:]
