"""docs/recipes.md: every training and evaluation recipe a tier runs, each setting beside its source's value.

The tier's values come from the tier file (plmclaims.recipes resolves a method's recipe for a model; other settings
are read at their dotted path) or, for what the code fixes (precision, a loss's pooling), from the sources file's
`code` text; the sources' values, where they come from and why a setting differs are in the sources file
(workflows/recipes/<tier>.yaml), written by hand from the papers and their repositories. `plmclaims recipes` writes the
document; tests/test_recipes.py checks that the committed one is what this module makes, that the sources cover every
recipe the tier's methods have with every row, and that every value that differs from its source says why.

A sources entry:
  id, title, claims (the claims whose runs it trains), recipe: {section, method[, assets]} (a method's recipe; the
  assets it covers) or {path} (a tier section that is a recipe itself), models (assets of the model row), and rows:
  one per ROWS name, each with `tier` (recipe keys, `path:<dotted>`, `models` or `corpus`) and/or `code` (what the
  code does), `source` (the source's value in words), `ref` (link ids), optional `value` ({key: the source's value} of
  recipe keys, compared with the tier's) and `tasks` ({task: {key: value}}), and `differs` (why the tier differs).
"""
from __future__ import annotations

import copy
import math
from pathlib import Path

from . import recipes
from .errors import UserError
from .schema import read_yaml

SOURCES_DIR = Path(__file__).resolve().parents[2] / "workflows" / "recipes"
DOC = Path(__file__).resolve().parents[2] / "docs" / "recipes.md"
ROWS = {
    "model": "model (id @ revision)",
    "tokenisation": "tokenisation and truncation",
    "pooling": "pooling, train / test",
    "data": "data",
    "batch": "batch",
    "lr": "learning rate",
    "optimizer": "optimiser, weight decay",
    "schedule": "schedule",
    "duration": "epochs or steps",
    "evaluation": "evaluation interval, truncation",
    "selection": "checkpoint selection",
    "precision": "precision",
}


def sources_path(tier: dict) -> Path:
    return SOURCES_DIR / f"{tier['name']}.yaml"


def load_sources(tier: dict) -> dict:
    path = sources_path(tier)
    if not path.exists():
        raise UserError(f"{path}: no sources for tier {tier['name']}'s recipes; only a tier that runs the papers' "
                        f"recipes has them (allowed: {', '.join(sorted(p.stem for p in SOURCES_DIR.glob('*.yaml')))})")
    return read_yaml(path)


def _fmt(v) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_fmt(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)


def _path(tier: dict, dotted: str):
    node = tier
    for k in dotted.split("."):
        if not isinstance(node, dict) or k not in node:
            return None
        node = node[k]
    return node


def _cases(entry: dict) -> list[str | None]:
    """The assets a sources entry covers (None: the method's own entry)."""
    return list(entry["recipe"].get("assets") or [None])


def resolved(tier: dict, entry: dict, task: str | None = None, asset: str | None = None) -> dict:
    """The settings of a sources entry's recipe at the tier: a method's recipe over its section's budget (its first
    asset unless `asset`), or the tier section at `path`."""
    rec = entry["recipe"]
    if "path" in rec:
        return copy.deepcopy(_path(tier, rec["path"]) or {})
    asset = asset if asset is not None else _cases(entry)[0]
    section = tier.get(rec["section"], {})
    out = {**copy.deepcopy(section.get("budget", {})), **recipes.entry(tier, rec["section"], rec["method"], asset, task)}
    return out


def _tasks(tier: dict, entry: dict) -> list[str]:
    rec = entry["recipe"]
    if "path" in rec:
        return []
    base = tier[rec["section"]]["methods"][rec["method"]] or {}
    at = base.get("assets", {}).get(_cases(entry)[0], {}) if _cases(entry)[0] else {}
    return list(dict.fromkeys([*base.get("tasks", {}), *at.get("tasks", {})]))


def _model(tier: dict, name: str) -> str:
    spec = tier["assets"][name]
    if spec.get("source") != "hub":
        return f"{name} ({spec['kind']})"
    return f"{spec['id']} @ {spec.get('revision', 'unpinned')[:12]}"


def tier_value(tier: dict, entry: dict, row: dict) -> str:
    """The tier's value of one row, in words: what the code does (`code`), then the tier's settings (`tier`)."""
    parts = [row["code"]] if "code" in row else []
    if "tier" in row:
        parts.append(_tier_text(tier, entry, row["tier"]))
    return "; ".join(parts)


def _tier_text(tier: dict, entry: dict, spec) -> str:
    if spec == "models":
        return "; ".join(_model(tier, a) for a in entry.get("models", []))
    if spec == "corpus":
        rec = entry["recipe"]
        corpus = recipes.corpus(tier, rec["section"], rec["method"], _cases(entry)[0])
        return _fmt(corpus) if corpus is not None else "none"
    if isinstance(spec, str) and spec.startswith("path:"):
        return _fmt(_path(tier, spec[5:]))
    keys = [spec] if isinstance(spec, str) else list(spec)
    base = resolved(tier, entry)
    parts = [f"{k} {_fmt(base[k])}" for k in keys if k in base]
    per_task = []
    for task in _tasks(tier, entry):
        mine = resolved(tier, entry, task)
        diff = [f"{k} {_fmt(mine[k])}" for k in keys if mine.get(k) != base.get(k)]
        if diff:
            per_task.append(f"{task} {', '.join(diff)}")
    text = ", ".join(parts) or "not set"
    return text + (f" (per task: {'; '.join(per_task)})" if per_task else "")


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9)
    return a == b


def mismatches(tier: dict, entry: dict, row: dict) -> list[str]:
    """The recipe keys whose tier value is not the source's `value` (per task where `tasks` gives one)."""
    out = []
    for case in _cases(entry):
        base = resolved(tier, entry, asset=case)
        out += [f"{k}: tier {_fmt(base.get(k))}, source {_fmt(v)}" for k, v in (row.get("value") or {}).items()
                if not _same(base.get(k), v)]
        for task, values in (row.get("tasks") or {}).items():
            mine = resolved(tier, entry, task, case)
            out += [f"{task} {k}: tier {_fmt(mine.get(k))}, source {_fmt(v)}" for k, v in values.items()
                    if not _same(mine.get(k), v)]
    return list(dict.fromkeys(out))


def recipe_cases(tier: dict) -> list[tuple[str, str, str | None]]:
    """Every (section, method, asset) recipe the tier's methods have: each method's entry and each asset's."""
    out = []
    for section in recipes.SECTIONS:
        for method, body in tier.get(section, {}).get("methods", {}).items():
            out.append((section, method, None))
            out += [(section, method, a) for a in (body or {}).get("assets", {})]
    return out


def check(tier: dict, sources: dict) -> list[str]:
    """What keeps the sources from covering the tier: each a line naming the recipe and the row."""
    problems = []
    links = sources.get("links", {})
    covered = {}
    for entry in sources["recipes"]:
        rec = entry["recipe"]
        if "method" in rec:
            for case in _cases(entry):
                key = (rec["section"], rec["method"], case)
                if key in covered:
                    problems.append(f"{entry['id']}: {key} is also covered by {covered[key]}")
                covered[key] = entry["id"]
            first = [resolved(tier, entry, asset=c) for c in _cases(entry)]
            if any(r != first[0] for r in first):
                problems.append(f"{entry['id']}: its assets {_cases(entry)} have different recipes; give each its entry")
        for name in ROWS:
            row = entry.get("rows", {}).get(name)
            if row is None:
                problems.append(f"{entry['id']}: row {name!r} missing")
                continue
            if not row.get("source") or not row.get("ref"):
                problems.append(f"{entry['id']}: row {name!r} needs 'source' and 'ref'")
            refs = row.get("ref") if isinstance(row.get("ref"), list) else [row.get("ref")]
            problems += [f"{entry['id']}: row {name!r} cites {r!r}, not in links" for r in refs if r and r not in links]
            if "tier" not in row and "code" not in row:
                problems.append(f"{entry['id']}: row {name!r} needs 'tier' (the tier's settings) or 'code' (what the "
                                "code does), or both")
            off = mismatches(tier, entry, row) if "tier" in row else []
            if off and not row.get("differs"):
                problems.append(f"{entry['id']}: row {name!r} differs from its source ({'; '.join(off)}) and does not "
                                "say why (differs)")
    for case in recipe_cases(tier):
        if case not in covered:
            problems.append(f"recipe {case} of tier {tier['name']} has no sources entry")
    return problems


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def render(tier: dict, sources: dict) -> str:
    links = sources.get("links", {})
    lines = [
        f"# Recipes of the {tier['name']} tier, beside their sources",
        "",
        "Generated by `plmclaims recipes` from `workflows/tiers/" + f"{tier['name']}.yaml` (the tier's values) and",
        f"`workflows/recipes/{tier['name']}.yaml` (each source's value, where it comes from, why the tier differs);",
        "`tests/test_recipes.py` checks that this file is current and that every recipe the tier's methods have is here",
        "with every row. Edit those two files, never this one.",
        "",
        sources.get("preamble", "").strip().replace("\n", "\n\n"),  # YAML folds a blank line into one newline
        "",
        "**=** the tier runs the source's setting; **≠** it differs, and the last column says why; **?** the source",
        "does not state it, or it was not read in this audit.",
        "",
    ]
    for section, title in sources.get("sections", {}).items():
        lines += [f"## {title}", ""]
        for entry in [e for e in sources["recipes"] if e.get("group") == section]:
            lines += [f"### {entry['title']}", ""]
            if entry.get("claims"):
                lines += ["Claims: " + ", ".join(f"`{c}`" for c in entry["claims"]) + ".", ""]
            if entry.get("note"):
                lines += [" ".join(entry["note"].split()), ""]
            lines += ["| setting | this tier | source | where | | why it differs |", "|---|---|---|---|---|---|"]
            for name, label in ROWS.items():
                row = entry["rows"][name]
                refs = row["ref"] if isinstance(row["ref"], list) else [row["ref"]]
                where = "; ".join(f"[{links[r]['title']}]({links[r]['url']})" if links[r].get("url")
                                  else links[r]["title"] for r in refs)
                mark = "≠" if row.get("differs") else "?" if row.get("unknown") else "="
                lines.append(f"| {label} | {_cell(tier_value(tier, entry, row))} | {_cell(row['source'])} | {where} "
                             f"| {mark} | {_cell(row.get('differs', ''))} |")
            lines.append("")
    unverified = [(k, v) for k, v in links.items() if v.get("unverified")]
    if unverified:
        lines += ["## Sources not re-read here", "",
                  "These were cited from memory of the paper or a secondary description, not read in this audit; treat "
                  "their values as the ones to check first.", ""]
        lines += [f"- {v['title']}: {v['unverified']}" for _, v in unverified] + [""]
    return "\n".join(lines).rstrip() + "\n"


def write(tier: dict, out: Path = DOC) -> list[str]:
    """Write the document; return the sources' problems (it is written either way, so they can be seen in place)."""
    sources = load_sources(tier)
    problems = check(tier, sources)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(tier, sources))
    return problems
