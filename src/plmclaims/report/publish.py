"""The published report: a finished run's report copied from the workflow's results/<tier>/ into docs/results/<tier>/
(`plmclaims publish`), where it is committed. The workflow never writes there, so a fresh clone's main job computes
instead of finding its outputs present. claims.md and claims.csv are written anew from claims.json by the current
report code, which is what tests/test_published_report.py compares."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..errors import UserError
from ..provenance import atomic_write_json, atomic_write_text

REPO = Path(__file__).resolve().parents[3]
PUBLISHED = REPO / "docs" / "results"
FIGURES_FROM_JSON = ("figures/forest.png", "figures/quality-vs-params.png", "figures/curves.png")
TRAINING_FIGURE = "figures/contrastive-training.png"  # drawn from the runs' histories, not from claims.json


def published_dir(tier_name: str, root: Path = PUBLISHED) -> Path:
    return root / tier_name


def _check(verdicts: list[dict], tier: dict, claims: dict[str, int], src: Path) -> None:
    """A report fit to publish: the whole tier's claims at their current versions, no failed claim, no rehearsal."""
    wrong = sorted({v.get("tier") for v in verdicts} - {tier["name"]})
    if wrong:
        raise UserError(f"{src}/claims.json: verdicts of tier {', '.join(map(str, wrong))}, not {tier['name']}; "
                        f"publish results/<tier> with --tier <tier>")
    if tier.get("rehearsal") or any(v.get("rehearsal") for v in verdicts):
        raise UserError(f"{src}/claims.json: a rehearsal report (random stand-in weights) says nothing; not published")
    errors = [v["id"] for v in verdicts if v["verdict"] == "error"]
    if errors:
        raise UserError(f"{src}/claims.json: {len(errors)} claims are 'error' ({', '.join(errors[:3])}"
                        f"{', ...' if len(errors) > 3 else ''}); fix them and rerun the main job, then publish")
    shown = {v["id"]: v.get("version") for v in verdicts}
    missing, gone = sorted(set(claims) - set(shown)), sorted(set(shown) - set(claims))
    stale = sorted(i for i in set(claims) & set(shown) if claims[i] != shown[i])
    if missing or gone or stale:
        parts = [f"{len(missing)} claims without a verdict ({', '.join(missing[:3])})" if missing else "",
                 f"{len(gone)} verdicts of claims that are gone ({', '.join(gone[:3])})" if gone else "",
                 f"{len(stale)} verdicts of an older claim version ({', '.join(stale[:3])})" if stale else ""]
        raise UserError(f"{src}/claims.json: not the whole tier at the claims' current versions: "
                        f"{'; '.join(p for p in parts if p)}; run the main job on every claim, then publish")


def results_prefix(tier: dict) -> str:
    """Where the workflow writes a tier's runs (config.yaml's results/<tier>), as the verdicts' run paths name them."""
    from ..schema import read_yaml

    return f"{read_yaml(REPO / 'config' / 'config.yaml')['results']}/{tier['name']}"


def mark_outdated(folder: Path, tier: dict, claims: list) -> int:
    """Sets each verdict's `outdated` mark in folder/claims.json (report.outdated) and adds a row for each claim
    added since the run; returns how many verdicts are outdated."""
    from .outdated import mark

    verdicts = mark(json.loads((folder / "claims.json").read_text()), claims, tier, results_prefix(tier))
    atomic_write_json(folder / "claims.json", verdicts)
    return sum(1 for v in verdicts if v.get("outdated"))


def render(folder: Path, tier: dict) -> list[str]:
    """Writes claims.md, claims.csv and the figures drawn from claims.json anew in a report folder; the training
    figure too when the runs it reads are present. Returns what it wrote."""
    from . import csv_text, markdown
    from .curves import curves_plot
    from .forest import forest_plot
    from .params import params_plot
    from .training import trained_runs, training_plot

    verdicts = json.loads((folder / "claims.json").read_text())
    atomic_write_text(folder / "claims.md", markdown(verdicts, tier))
    atomic_write_text(folder / "claims.csv", csv_text(verdicts))
    for name, draw in zip(FIGURES_FROM_JSON, (forest_plot, params_plot, curves_plot)):
        draw(verdicts, folder / name)
    written = ["claims.md", "claims.csv", *FIGURES_FROM_JSON]
    contrastive = any((v.get("protocol") or {}).get("family") == "contrastive" for v in verdicts)
    if trained_runs(verdicts) or not contrastive:
        training_plot(verdicts, folder / TRAINING_FIGURE)
        written.append(TRAINING_FIGURE)
    return written


def publish(results: Path, tier: dict, claims: dict[str, int], dest_root: Path = PUBLISHED,
            claim_list: list | None = None) -> tuple[Path, list[str]]:
    """Copies results/<tier>'s report into dest_root/<tier> (claims.json, provenance.json, the figures), then writes
    claims.md and claims.csv anew from claims.json. `claims`: id -> version of every claim the tier must cover;
    `claim_list` (the claims themselves), when given, marks the verdicts whose runs the tier now plans otherwise.
    Returns the folder and the files it holds."""
    from . import OWN_FILES, csv_text, markdown

    src = results / tier["name"]
    missing = [f for f in OWN_FILES if not (src / f).is_file()]
    if missing:
        raise UserError(f"{src}: no finished report ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''} "
                        f"missing); run the main job (snakemake --cores 2 --config tier={tier['name']} data_root=...)")
    verdicts = json.loads((src / "claims.json").read_text())
    _check(verdicts, tier, claims, src)
    dest = dest_root / tier["name"]
    staging = dest.with_name(f".{dest.name}.publishing")
    shutil.rmtree(staging, ignore_errors=True)
    for f in OWN_FILES:
        (staging / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / f, staging / f)
    if claim_list is not None:  # a run whose tier changed after it: its verdicts say so
        mark_outdated(staging, tier, claim_list)
        verdicts = json.loads((staging / "claims.json").read_text())
    (staging / "claims.md").write_text(markdown(verdicts, tier))
    (staging / "claims.csv").write_text(csv_text(verdicts))
    old = dest.with_name(f".{dest.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if dest.exists():
        dest.rename(old)
    staging.rename(dest)
    shutil.rmtree(old, ignore_errors=True)
    return dest, list(OWN_FILES)
