"""The README claim table's verdict column, generated from a report's claims.json (`plmclaims readme`)."""
from __future__ import annotations

import re

from .common import first_reason, fmt, verdict_word
from .outdated import label


def readme_verdict(v: dict) -> str:
    """The README claim table's verdict cell: the verdict in bold, whether the claim file expected it, the verdict
    engine's first reason (its note's first sentence, up to the first ';' if long; run paths left out) and each
    measurement's average with its random-weights twin's. The report itself (claims.md) has every number, interval
    and check."""
    expected = {True: " (as expected)", False: " (not the expected verdict)"}.get(v.get("matches_expected"), "")
    reason = first_reason(v["note"])
    measured = []
    for name, m in v["measurements"].items():
        if m.get("measured") is not None:
            twin = (m.get("random_weights") or {}).get("measured")
            measured.append(f"{name} {fmt(m['measured'])}" + (f" (twin {fmt(twin)})" if twin is not None else ""))
    on = ""
    if v.get("models") and v.get("headline_model"):  # a claim measured on several models: name the one it rests on
        head = v["headline_model"]
        asset = v["models"][head].get("asset") or head
        others = [f"{m.get('asset') or r}: {m['verdict']}" for r, m in v["models"].items() if r != head]
        on = f" on {asset}" + (f" ({'; '.join(others)})" if others else "")
    cell = f"**{verdict_word(v)}**{label(v)}{on}{expected}" + (f": {reason}" if reason else "")
    cell += f". Averages: {', '.join(measured)}" if measured else ""
    return cell.replace("|", "\\|")


def sync_readme(text: str, verdicts: list[dict]) -> tuple[str, list[str]]:
    """`text` (a README) with the last cell of each claim row (a table row starting `| `<claim id>` |`) set to
    readme_verdict, and the ids of the verdicts that have no row."""
    by_id = {v["id"]: v for v in verdicts}
    seen, lines = set(), []
    for line in text.split("\n"):
        m = re.match(r"\| `([^`]+)` \|", line)
        if m and m.group(1) in by_id:
            cells = re.split(r"(?<!\\)\|", line)  # '', claim, seed point, source, checks, verdict..., ''
            line = "|".join(cells[:5]) + f"| {readme_verdict(by_id[m.group(1)])} |"
            seen.add(m.group(1))
        lines.append(line)
    return "\n".join(lines), sorted(set(by_id) - seen)
