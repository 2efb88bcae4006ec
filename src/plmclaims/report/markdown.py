"""claims.md: the written summary first, then the claims grouped by verdict, then every number behind them, with
each figure where its numbers are."""
from __future__ import annotations

from .. import hub_family
from . import tables
from .outdated import label
from .common import HEADINGS, REHEARSAL, first_reason, models_text, source, verdict_rank, verdict_word, views
from .summary import written_summary

# the figures write_verdicts draws, as claims.md links them (relative to the report folder)
FIGURES = {"forest": "figures/forest.png", "params": "figures/quality-vs-params.png", "curves": "figures/curves.png",
           "training": "figures/contrastive-training.png"}
FOREST_TEXT = ("Each panel is one claim, on its own axis (its metric and scale): the measured average with its "
               "interval (dot and bar), the reported value (x), and the floors a relation crediting it must beat "
               "(chance, the random-weights twin, the lexical controls), each on its own line so none hides another. "
               "A measurement without a score is named in its panel with the reason.")


def _embed(key: str, alt: str) -> str:
    return f"![{alt}]({FIGURES[key]})"


def _claim_row(v: dict) -> str:
    expected = {True: " (as expected)", False: " (unexpected)"}.get(v.get("matches_expected"), "")
    data = (f" **Unverified data** (not the release files): {', '.join(v['unverified_data'])}."
            if v.get("unverified_data") else "")
    note = f"{REHEARSAL}. {v['note']}" if v.get("rehearsal") else v["note"]
    others = views(v)[1:]
    if others:  # a claim measured on several models: the headline's verdict is the claim's; the others follow
        head_role, head = views(v)[0]
        note = (f"Headline model {models_text(head, head_role)}. {note}"
                + (f" {v['headline_note'].strip()}" if v.get("headline_note") else "")
                + "".join(f" On {models_text(view, role)}: **{view.get('verdict')}**: "
                          f"{first_reason(view.get('note', ''))}." for role, view in others))
    if v.get("outdated"):  # computed before its claim, runs or judging settings changed (report.outdated)
        note = f"Outdated ({v['outdated']}); the verdict is the earlier run's. {note}"
    return (f"| `{v['id']}` | {v.get('seed_point') or 'harness'} | {source(v)} | **{verdict_word(v)}**{label(v)}{expected} "
            f"| {note}{data} |")


def claims_by_verdict(verdicts: list[dict]) -> list[str]:
    lines = ["## Claims by verdict", ""]
    groups: dict[str, list[dict]] = {}
    for v in verdicts:
        groups.setdefault(v["verdict"], []).append(v)
    for word, group in sorted(groups.items(), key=lambda kv: (verdict_rank(kv[0]), kv[0])):
        lines += [f"### {HEADINGS.get(word, word)} ({len(group)})", "",
                  "| claim | seed point | source | verdict | note |", "|---|---|---|---|---|"]
        lines += [_claim_row(v) for v in group] + [""]
    return lines


def _params_section(verdicts: list[dict]) -> list[str]:
    if not any(m.get("trained_params") is not None for v in verdicts for _, _, m in tables.all_measurements(v)):
        return []
    return ["## Quality vs trained parameters", "",
            "Each fine-tuning measurement at its trained parameters (log axis; bars: the seed range), full fine-tuning "
            "and zero-shot as reference lines, chance dotted; a measurement without a score is named in its panel.", "",
            _embed("params", "quality vs trained parameters"), ""]


def markdown(verdicts: list[dict], tier: dict) -> str:
    lines = [f"# Claim report: tier `{tier['name']}`", "", tier.get("description", ""), ""]
    if tier.get("rehearsal"):
        lines += ["**Rehearsal.** Every asset is a stand-in with the real architecture's configuration and random "
                  "weights, on cut budgets: this report shows that the DAG runs, and no number or verdict in it means "
                  "anything about the claims.", ""]
    unpinned = hub_family.unpinned_repos(tier)
    if unpinned:
        lines += ["**Unpinned hub models.** These load the hub's main branch, not a commit named in the tier (each run "
                  "records the commit prefetch got): " + "; ".join(f"`{r}` ({why})" for r, why in unpinned.items()), ""]
    lines += written_summary(verdicts, tier)
    lines += ["## Reported vs measured", "", FOREST_TEXT, "", _embed("forest", "reported vs measured, per claim"), ""]
    lines += claims_by_verdict(verdicts)
    lines += tables.measurement_table(verdicts, tier) + [""]
    lines += tables.per_benchmark_tables(verdicts)
    lines += tables.curve_tables(verdicts, _embed("curves", "curves"))
    lines += _params_section(verdicts)
    lines += tables.seed_tables(verdicts)
    training = any(v.get("protocol", {}).get("family") == "contrastive" for v in verdicts)
    lines += tables.training_tables(verdicts, _embed("training", "contrastive training") if training else "")
    lines += tables.checks_table(verdicts)
    notes = [(v["id"], v["tier_note"]) for v in verdicts if v.get("tier_note")]
    notes += [(v["id"], f"expected at this tier: {e['verdict']} — {e['note']}")
              for v in verdicts for e in v.get("expected", [])]
    if notes:
        lines += ["", "## Protocol notes for this tier", ""] + [f"- `{i}`: {n}" for i, n in notes]
    lines += ["", "Per-benchmark numbers, seeds, provenance and run paths are in `claims.json` and each run's "
              "`metrics.json`.", ""]
    return "\n".join(lines)
