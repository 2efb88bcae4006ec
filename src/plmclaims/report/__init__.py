"""The claim report: claims.md (a written summary, the claims by verdict, every number), claims.csv, claims.json,
provenance.json and four figures (forest, curves, quality vs parameters, contrastive training).

Modules: common (formats, verdict words, models), tables (CSV rows and Markdown tables), summary (the written and
the end-of-run summaries), markdown (claims.md), readme (the README's verdict column), plotting (what the figures
share) and one module per figure."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from .. import hub_family
from ..provenance import atomic_write_json, atomic_write_text
from .common import REHEARSAL, VERDICT_MEANING
from .curves import curves_plot, reported_xy
from .forest import forest_plot
from .markdown import markdown
from .params import params_plot
from .readme import readme_verdict, sync_readme
from .summary import terminal_summary, written_summary
from .tables import curve_tables as _curve_tables
from .tables import rows
from .training import training_plot

__all__ = ["REHEARSAL", "VERDICT_MEANING", "OWN_FILES", "curves_plot", "forest_plot", "markdown", "params_plot",
           "provenance", "readme_verdict", "reported_xy", "rows", "sync_readme", "terminal_summary", "training_plot",
           "write", "write_verdicts", "written_summary", "_curve_tables", "csv_text"]

# the files write_verdicts writes under the report folder
OWN_FILES = ("claims.json", "claims.csv", "claims.md", "provenance.json", "figures/forest.png",
             "figures/quality-vs-params.png", "figures/curves.png", "figures/contrastive-training.png")


def write(verdict_files: list[Path], tier: dict, out_dir: Path) -> None:
    write_verdicts([json.loads(Path(p).read_text()) for p in verdict_files], tier, out_dir)


def csv_text(verdicts: list[dict]) -> str:
    buf = io.StringIO()
    table = rows(verdicts)
    fields = list(dict.fromkeys(k for row in table for k in row)) if table else ["claim"]
    writer = csv.DictWriter(buf, fieldnames=fields, restval="")
    writer.writeheader()
    writer.writerows(table)
    return buf.getvalue()


def write_verdicts(verdicts: list[dict], tier: dict, out_dir: Path) -> None:
    """claims.json, claims.csv, claims.md and the figures from verdict rows (files, or error rows of failed claims)."""
    verdicts = sorted(verdicts, key=lambda v: v["id"])
    # the checkout as it was before this report rewrote its own files (a report written into a tracked folder would
    # otherwise mark itself '+dirty')
    prov = provenance(verdicts, tier, own_files=[out_dir / f for f in OWN_FILES])
    atomic_write_json(out_dir / "claims.json", verdicts)
    atomic_write_text(out_dir / "claims.csv", csv_text(verdicts))
    atomic_write_text(out_dir / "claims.md", markdown(verdicts, tier))
    forest_plot(verdicts, out_dir / "figures" / "forest.png")
    params_plot(verdicts, out_dir / "figures" / "quality-vs-params.png")
    curves_plot(verdicts, out_dir / "figures" / "curves.png")
    training_plot(verdicts, out_dir / "figures" / "contrastive-training.png")
    atomic_write_json(out_dir / "provenance.json", prov)


def provenance(verdicts: list[dict], tier: dict, own_files: list[Path] = ()) -> dict:
    """What produced this report: the commit and package versions that wrote it, the claims it covers, and the
    commits and versions of every run its verdicts read (a published report names them; tests check they are real)."""
    from ..provenance import git_commit, package_versions

    commits: dict[str, int] = {}
    packages: dict[str, set] = {}
    for v in verdicts:
        rp = v.get("runs_provenance") or {}
        for c, n in rp.get("commits", {}).items():
            commits[c] = commits.get(c, 0) + n
        for name, versions in rp.get("packages", {}).items():
            packages.setdefault(name, set()).update(versions)
    return {"tier": tier["name"], "commit": git_commit(tuple(own_files)), "packages": package_versions(),
            "claims": {v["id"]: v.get("version") for v in verdicts},
            "verdict_commits": sorted({(v.get("provenance") or {}).get("git_commit", "unknown") for v in verdicts}),
            "run_commits": dict(sorted(commits.items())),
            "run_packages": {n: sorted(vs) for n, vs in sorted(packages.items())},
            **({"unpinned": unpinned} if (unpinned := hub_family.unpinned_repos(tier)) else {})}
