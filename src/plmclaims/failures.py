"""Failed jobs of a Snakemake run, read from its log, so the report can say which rule failed for which claim.

With `snakemake --keep-going`, a failed job leaves its claim without a verdict file and the report rule never
runs. The workflow's `onerror` handler reads the run's log (the `log` Snakemake hands it) with `failed_jobs`,
attributes each failure to the claims whose runs it was meant to produce (`attribute`), and writes the report with
an `error` row for those claims. Snakemake prints one block per failure:

    Error in rule finetune:
        jobid: 12
        output: results/micro/runs/finetune/.../metrics.json, results/micro/runs/finetune/.../predictions.npz
        log: results/micro/logs/finetune/....log (check log file(s) for error details)
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_START = re.compile(r"^Error in rule (\S+?):\s*$")
_FIELD = re.compile(r"^\s+(\w+): (.*)$")


@dataclass(frozen=True)
class Failure:
    rule: str
    outputs: tuple[str, ...]
    logs: tuple[str, ...]

    def describe(self) -> str:
        where = f"; log: {', '.join(self.logs)}" if self.logs else "; no log file (see the Snakemake log)"
        return f"rule {self.rule} failed{where}"


def _paths(value: str) -> tuple[str, ...]:
    value = value.replace("(check log file(s) for error details)", "")
    return tuple(p.strip() for p in value.split(",") if p.strip())


def failed_jobs(log_paths: list[str | Path]) -> list[Failure]:
    """Every `Error in rule ...` block in the given Snakemake logs, in order, without duplicates."""
    out: list[Failure] = []
    for path in log_paths:
        try:
            lines = Path(path).read_text(errors="replace").splitlines()
        except OSError:
            continue
        i = 0
        while i < len(lines):
            m = _START.match(lines[i])
            i += 1
            if not m:
                continue
            fields: dict[str, str] = {}
            while i < len(lines) and _FIELD.match(lines[i]):
                key, value = _FIELD.match(lines[i]).groups()
                fields.setdefault(key, value)
                i += 1
            failure = Failure(m.group(1), _paths(fields.get("output", "")), _paths(fields.get("log", "")))
            if failure not in out:
                out.append(failure)
    return out


def _same(a: str, b: str) -> bool:
    return Path(a).resolve() == Path(b).resolve() if a and b else False


def attribute(needed: list[str], failures: list[Failure]) -> list[Failure]:
    """The failures behind a claim that has no verdict: the failed jobs that were to write one of the files it needs
    (`needed` holds every run the claim reads, upstream ones included, and its verdict). Empty when none was: the
    claim was left undone because the workflow stopped at a failure elsewhere."""
    return [f for f in failures if any(_same(o, n) for o in f.outputs for n in needed)]
