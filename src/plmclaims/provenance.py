"""Atomic writes and the provenance every run's metrics.json carries."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import platform
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

import numpy as np

PACKAGES = ("plmclaims", "torch", "transformers", "datasets", "mteb", "lm-eval", "peft", "sentence-transformers",
            "tokenizers", "numpy", "scipy", "snakemake")


def _default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    if type(o).__name__ == "dtype":  # numpy or torch dtypes in harness configs (lm-eval records model_args)
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def atomic_write_text(path: Path | str, text: str) -> None:
    """Write to a temporary file in the same folder, then rename: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes_from(path: Path | str, blocks) -> None:
    """Write the byte blocks an iterable yields, atomically as atomic_write_text: an interrupted or failed write (the
    iterable raising) leaves no file behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            for block in blocks:
                f.write(block)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path | str, data) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, default=_default, allow_nan=True) + "\n")


def atomic_save_npz(path: Path | str, **arrays) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


@contextlib.contextmanager
def atomic_dir(out_dir: Path | str):
    """Yield a temporary sibling folder to write into; on success it replaces out_dir, on failure it is removed.
    A model or adapter folder is therefore either whole or absent, never half-written."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        yield tmp
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def sha256_file(path: Path | str) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def config_hash(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=_default).encode()).hexdigest()[:16]


def git_commit(ignore: tuple[Path, ...] = (), root: Path | None = None) -> str:
    """HEAD of the checkout at `root` (default: this package's), with '+dirty' if a tracked file differs from it;
    changes to the files in `ignore` (what the caller is about to rewrite itself, e.g. a published report's own files,
    which Snakemake removes before the rule runs) do not count. 'unknown' outside a git checkout."""
    root = Path(root) if root is not None else Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        commit = out.stdout.strip() or "unknown"
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=5).stdout.splitlines()
        skip = {str(Path(p).resolve()) for p in ignore}
        dirty = [line for line in status if str((root / line[3:].strip()).resolve()) not in skip]
        return commit + ("+dirty" if dirty and commit != "unknown" else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def package_versions() -> dict[str, str | None]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def device_info() -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version(), "cpu_count": os.cpu_count()}
    if "torch" not in sys.modules:  # a numpy-only job (probe, geometry) ran on the CPU; importing torch costs it ~5 s
        info["device"] = "cpu"
        return info
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["device"] = "cuda"
            info["gpu"] = torch.cuda.get_device_name(0)
        else:
            info["device"] = "cpu"
    except ImportError:
        info["device"] = "cpu"
    return info


def peak_rss_mb() -> float | None:
    """The most resident memory this process has held so far, in MiB (Linux reports kB, macOS bytes), or None where
    the resource module is missing (Windows): what a cluster profile's mem_mb must cover."""
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)


def cpu_s() -> float:
    """CPU seconds (user + system) this process has used so far, start-up included: unlike wall time, what a job costs
    whatever else the machine runs (a job on a loaded machine waits, its CPU time does not grow)."""
    t = os.times()
    return round(t.user + t.system, 2)


def process_age_s() -> float | None:
    """Seconds since this process started, from Linux's /proc (the process's start in clock ticks after boot, against
    the uptime; 10 ms resolution), or None where /proc cannot be read (another OS)."""
    try:
        started = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - started / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


_accounted_until: float | None = None  # when the last Run of this process ended: start-up is counted once


class Run:
    """Times a unit of work and writes its metrics.json with provenance, atomically.

    Usage: ``with Run(out, config, seed=1) as run: run.data_files.update(...); run.values = {...}``
    """

    def __init__(self, out: Path | str | None, config: dict, seed: int | None = None):
        """`out=None`: time and describe the run, but let the caller write its own result with `provenance()`."""
        self.out, self.config, self.seed = (Path(out) if out is not None else None), config, seed
        self.values: dict = {}
        self.data_files: dict[str, str] = {}

    def __enter__(self):
        global _accounted_until
        self.t0 = time.time()
        # what the job spent before its work began (the interpreter, torch's and transformers' imports, reading the
        # data): a cost every job pays that the run's own timer misses, recorded so a plan can be checked against it.
        # A process that runs several: a later run's start-up is only the time since the previous one ended, so the
        # runs' start-ups and wall times add up to the process's age instead of counting earlier runs again
        age = process_age_s()
        self.startup_s = age if _accounted_until is None or age is None else max(0.0, self.t0 - _accounted_until)
        _accounted_until = self.t0
        return self

    def __exit__(self, exc_type, exc, tb):
        global _accounted_until
        if exc_type is None and self.out is not None:  # never write a metrics.json for a failed run: snakemake reruns it
            atomic_write_json(self.out, {"values": self.values, "provenance": self.provenance()})
        _accounted_until = max(_accounted_until or 0.0, time.time())
        return False

    def provenance(self) -> dict:
        return {"git_commit": git_commit(), "packages": package_versions(), "config": self.config,
                "config_hash": config_hash(self.config), "data_sha256": self.data_files, "seed": self.seed,
                "device": device_info(), "wall_time_s": round(time.time() - self.t0, 3),
                "startup_s": None if self.startup_s is None else round(self.startup_s, 2),
                "peak_rss_mb": peak_rss_mb(), "cpu_s": cpu_s(),
                "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
