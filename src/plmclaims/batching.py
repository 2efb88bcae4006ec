"""The short rules' batches: a probe, one layer's geometry or attention shares, or one layer of a CKA run reads one
upstream run's arrays and computes for a second or two, while a job of its own pays several seconds of interpreter
start, imports and data reading. The workflow runs them in batches instead: one job (`plmclaims batch`) per group of
runs that read the same upstream run, at most BATCH_MOST a job (more saves start-ups; fewer keeps every core busy at
the end), each run still writing its own files and its own provenance. The workflow (common.smk) and the plan's job
count (plan_report) read the batches from here."""
from __future__ import annotations

BATCHED_KINDS = ("probe", "geometry", "attention", "cka-layer")
BATCH_MOST = 16


def batches(runs, kind: str) -> list[tuple[str, list]]:
    """(name, runs) for each batch of the runs of `kind` among `runs` (planned runs): the runs that read one upstream
    run, in key order, BATCH_MOST at most; the name (<upstream key>_<chunk>) is stable while the plan is."""
    groups: dict[str, list] = {}
    for run in sorted((r for r in runs if r.kind == kind), key=lambda r: r.key):
        (up,) = run.upstream  # a batched kind reads exactly one run
        groups.setdefault(up.key, []).append(run)
    return [(f"{key}_{i // BATCH_MOST}", group[i:i + BATCH_MOST])
            for key, group in sorted(groups.items()) for i in range(0, len(group), BATCH_MOST)]
