"""What a run found, in words: the written summary that opens claims.md (what reproduced and what was contradicted,
on which model; why the rest is inconclusive or not run, counted by cause; what a verdict at this tier can say) and
the summary the terminal shows when the workflow ends."""
from __future__ import annotations

import re
import shlex

from .common import HEADINGS, VERDICT_MEANING, first_reason, models_text, verdict_rank, views

# why a claim is undecided, from the reason of its first undecided check: (cause, how the report says it, pattern)
INCONCLUSIVE_CAUSES = (
    ("degenerate", "a run is degenerate (constant predictions), so a side has no score", r"degenerate run"),
    ("uninformative", "too few benchmarks are informative: on most of them no side is above its floor",
     r"tasks are informative"),
    ("floor", "a credited side is not above its floor (chance, the random-weights twin or a lexical control)",
     r"not above its"),
    ("margin", "an interval straddles the margin", r"straddles the margin"),
)
NOT_RUN_CAUSES = (
    ("scope", "this tier judges none of its checks (their scope is judged at another tier)", r"tier \S+ judges"),
    ("role", "a model it needs is not available at this tier", r"role '[^']+'"),
    ("added", "the claim was added after this report's run", r"added after this report"),
)
OTHER = ("other", "another reason (see the claim's note)")
# a check that only counts with another one: its reason names that check, not a cause of its own
DEPENDENT = re.compile(r"counts only with check")


def _classify(reason: str, causes) -> tuple[str, str]:
    for key, text, pattern in causes:
        if re.search(pattern, reason or ""):
            return key, text
    return OTHER


def cause(view: dict) -> tuple[str, str]:
    """(cause key, its sentence) of an inconclusive or not-run verdict view: the first undecided check's reason."""
    causes = INCONCLUSIVE_CAUSES if view.get("verdict") == "inconclusive" else NOT_RUN_CAUSES
    undecided = ("inconclusive",) if view.get("verdict") == "inconclusive" else ("not-run", "shown")
    for c in view.get("checks") or []:
        if c.get("outcome") in undecided and c.get("reason") and not DEPENDENT.search(c["reason"]):
            key, text = _classify(c["reason"], causes)
            if key != OTHER[0]:
                return key, text
    return _classify(view.get("note", ""), causes)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def counts(verdicts: list[dict]) -> list[tuple[str, int]]:
    """(verdict word, number of claims) in the report's order."""
    n: dict[str, int] = {}
    for v in verdicts:
        n[v["verdict"]] = n.get(v["verdict"], 0) + 1
    return sorted(n.items(), key=lambda kv: (verdict_rank(kv[0]), kv[0]))


def counts_text(verdicts: list[dict]) -> str:
    return ", ".join(f"{n} {k}" for k, n in counts(verdicts))


def _other_models(v: dict) -> str:
    """For a claim measured on several models: each other model's verdict, and its first reason where it differs."""
    parts = []
    for role, view in views(v)[1:]:
        differs = view.get("verdict") != v["verdict"] and first_reason(view.get("note", ""))
        parts.append(f"{models_text(view, role)}: {view.get('verdict')}" + (f" ({differs})" if differs else ""))
    return "Also measured on " + "; ".join(parts) + "." if parts else ""


def _bullet(v: dict, with_reason: bool) -> str:
    role, head = views(v)[0]
    parts = [f"- `{v['id']}`{' (outdated)' if v.get('outdated') else ''} on {models_text(head, role)}: "
             f"{' '.join(v.get('statement', '').split())}"]
    reason = first_reason(v.get("note", "")) if with_reason else ""
    if reason:
        parts.append(f"Why: {reason}.")
    if v.get("headline_note"):
        parts.append(v["headline_note"].strip().rstrip(".") + ".")
    return " ".join(parts + [_other_models(v)]).rstrip()


def _by_cause(group: list[dict]) -> list[str]:
    found: dict[str, tuple[str, list[str]]] = {}
    for v in group:
        key, text = cause(views(v)[0][1])
        found.setdefault(key, (text, []))[1].append(f"`{v['id']}`" + (" (outdated)" if v.get("outdated") else ""))
    ranked = sorted(found.values(), key=lambda tl: (-len(tl[1]), tl[0]))
    return [f"- {text}: {len(ids)} ({', '.join(ids)})" for text, ids in ranked]


def written_summary(verdicts: list[dict], tier: dict) -> list[str]:
    """The opening of claims.md, generated from the verdicts."""
    lines = ["## Summary", "", f"{plural(len(verdicts), 'claim')} at tier `{tier['name']}`: {counts_text(verdicts)}.",
             ""]
    if tier.get("rehearsal"):
        lines += ["This is a rehearsal: no verdict below says anything about a claim.", ""]
    outdated = [v for v in verdicts if v.get("outdated")]
    if outdated:
        lines += [f"**Outdated verdicts ({len(outdated)} of {len(verdicts)}).** These were computed before their claim, "
                  "its planned runs or the tier's judging settings changed, and are marked (outdated) below with what "
                  "changed; the current code may judge them otherwise. Rerun the main job, then `plmclaims publish "
                  f"--tier {tier['name']}`, to refresh them.", ""]
    groups: dict[str, list[dict]] = {}
    for v in verdicts:
        groups.setdefault(v["verdict"], []).append(v)
    for word in ("reproduced", "direction-holds", "not-reproduced"):
        if groups.get(word):
            lines += [f"**{HEADINGS[word]}** ({len(groups[word])}): {VERDICT_MEANING[word]}.", ""]
            lines += [_bullet(v, with_reason=word != "reproduced") for v in groups[word]] + [""]
    for word in ("inconclusive", "not-run"):
        if groups.get(word):
            lines += [f"**{HEADINGS[word]}** ({len(groups[word])}), by cause (a claim counts once, under its first "
                      "undecided check):", ""] + _by_cause(groups[word]) + [""]
    for word, group in sorted(groups.items(), key=lambda kv: verdict_rank(kv[0])):
        if word not in ("reproduced", "direction-holds", "not-reproduced", "inconclusive", "not-run"):
            lines += [f"**{HEADINGS.get(word, word)}** ({len(group)}): {VERDICT_MEANING.get(word, '')}", ""]
            lines += [_bullet(v, with_reason=True) for v in group] + [""]
    several = [v for v in verdicts if len(views(v)) > 1]
    if several:
        lines += [f"**Measured on several models** ({len(several)}): the verdict above is the headline model's "
                  "(the first named); each other model's verdict follows it.", ""]
    lines += ["**What a verdict at this tier can and cannot say.** " + " ".join((tier.get("scope") or "").split()), ""]
    lines += [f"- **{k}**: {m}." for k, m in VERDICT_MEANING.items()] + [""]
    return lines


def report_command(results_dir: str, config: dict | None = None, configfiles: list[str] = ()) -> str:
    """The command that writes Snakemake's HTML report of this run (it needs the run's --configfile and --config)."""
    import json

    value = lambda v: shlex.quote(json.dumps(v) if isinstance(v, (list, dict)) else str(v))  # noqa: E731
    args = " ".join(f"{k}={value(v)}" for k, v in (config or {}).items())
    files = " ".join(shlex.quote(f) for f in configfiles)
    return (f"snakemake --report {shlex.quote(f'{results_dir}/report.html')}"
            + (f" --configfile {files}" if files else "") + (f" --config {args}" if args else ""))


def terminal_summary(verdicts: list[dict], results_dir: str, config: dict | None = None, configfiles: list[str] = (),
                     width: int = 160) -> str:
    """What the terminal shows when the workflow ends: verdict counts, one line per claim (id, verdict, first
    reason), where the report is and the command that writes the HTML report."""
    ordered = sorted(verdicts, key=lambda v: (verdict_rank(v["verdict"]), v["id"]))
    id_width = max((len(v["id"]) for v in ordered), default=0)
    word_width = max((len(v["verdict"]) for v in ordered), default=0)
    lines = [f"plmclaims: {plural(len(verdicts), 'claim')}: {counts_text(verdicts)}"]
    for v in ordered:
        line = f"  {v['id']:<{id_width}}  {v['verdict']:<{word_width}}  {first_reason(v.get('note', ''))}"
        lines.append(line if len(line) <= width else line[:width - 1] + "…")
    lines += [f"plmclaims: report: {results_dir}/claims.md (figures: {results_dir}/figures/, "
              f"every number: {results_dir}/claims.json)",
              f"plmclaims: HTML report with each job's provenance: {report_command(results_dir, config, configfiles)}"]
    return "\n".join(lines)
