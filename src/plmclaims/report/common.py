"""What every part of the report shares: number formats, the verdict words and their meaning, and the views of a
verdict measured on several models (its `models` section, when the claim declares more than one)."""
from __future__ import annotations

import math
import re

# the order the report groups claims in; a verdict word not listed here is grouped after these
VERDICT_ORDER = ("reproduced", "direction-holds", "not-reproduced", "inconclusive", "shown", "not-run", "error")
VERDICT_MEANING = {
    "reproduced": "every judged check holds, on sides above their floors (chance, the random-weights twin, the "
                  "claim's controls) and beyond what the twin shows; magnitudes are within tolerance where this tier "
                  "runs the paper's own assets",
    "direction-holds": "the judged relations hold but a magnitude is off by more than the claim's tolerance",
    "not-reproduced": "a judged relation is contradicted: its bootstrap interval (items and seeds resampled) lies "
                      "wholly on the wrong side of the margin, at a budget that can contradict the paper",
    "inconclusive": "an interval straddles the margin, a credited side is not above its floor or its twin, the twin "
                    "shows the relation as strongly, too few tasks or runs are usable, a shortfall is at a budget far "
                    "below the paper's, or only checks that cannot carry the claim alone hold",
    "shown": "measured and shown, not credited: this tier does not judge the claim's checks (or they hold by "
             "construction); each check's measured outcome is given",
    "not-run": "nothing was measured: this tier cannot provide a role or data the claim needs; the reason is given",
    "error": "a run or check failed; the failed rule and its log are named",
}
HEADINGS = {"reproduced": "Reproduced", "direction-holds": "Direction holds", "not-reproduced": "Not reproduced",
            "inconclusive": "Inconclusive", "shown": "Shown, not judged", "not-run": "Not run", "error": "Error"}
REHEARSAL = "rehearsal: random stand-in weights, the number means nothing"


def fmt(x, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}f}"


def count(n: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:.0f}"


def source(v: dict) -> str:
    s = v["source"]
    arxiv = f" (arXiv {s['arxiv']})" if s.get("arxiv") else ""
    return f"{s['paper']}{arxiv}, {s['table']}"


def verdict_word(v: dict) -> str:
    return f"{v['verdict']} (rehearsal)" if v.get("rehearsal") else v["verdict"]


def verdict_rank(word: str) -> int:
    return VERDICT_ORDER.index(word) if word in VERDICT_ORDER else len(VERDICT_ORDER)


def first_reason(note: str, limit: int = 200) -> str:
    """A verdict note's first reason: its first sentence, cut at the first ';' when long, run paths left out."""
    reason = re.sub(r"\S+/metrics\.json: ", "", note or "").split(". ")[0]
    return (reason.split("; ")[0] if len(reason) > limit else reason).strip().rstrip(".")


def floors_text(m: dict) -> str:
    """Each floor's average beside the measurement, e.g. 'chance 0.00; random-weights 48.07; bow 52.33'."""
    floors = m.get("floors") or {}
    return "; ".join(f"{name} {fmt(v.get('avg'))}" for name, v in floors.items()) or "—"


def views(v: dict) -> list[tuple[str | None, dict]]:
    """(model role, view) for each model a verdict was measured on, the headline model first; a view has the keys
    verdict, note, checks and measurements. A verdict without a `models` section is one view of itself (role None).
    The top level is the headline model's, so what the headline's entry leaves out is read from there."""
    models = v.get("models") or {}
    if not models:
        return [(None, v)]
    head = v.get("headline_model")
    order = sorted(models, key=lambda role: (role != head, list(models).index(role)))
    top = {"verdict": v.get("verdict"), "note": v.get("note", ""), "checks": v.get("checks") or [],
           "measurements": v.get("measurements") or {}}
    empty = {"verdict": None, "note": "", "checks": [], "measurements": {}}
    return [(role, {**(top if role == head else empty), **models[role]}) for role in order]


def all_measurements(v: dict) -> list[tuple[str | None, str, dict]]:
    """(model role or None, name, measurement) over every model of the verdict, the headline model first. A
    measurement another model lists with the same numbers (a baseline every model shares) is listed once."""
    out, seen = [], set()
    for role, view in views(v):
        for name, m in (view.get("measurements") or {}).items():
            key = (name, m.get("label"), m.get("measured"), tuple(m.get("instances") or ()))
            if key not in seen:
                seen.add(key)
                out.append((role, name, m))
    return out


def scored_seeds(m: dict) -> list[float]:
    """A measurement's per-seed values without its degenerate seeds (null in the verdict: left out of the mean)."""
    return [x for x in m.get("seeds") or [] if x is not None]


def asset_of(instance: str) -> str:
    """The asset behind a run's instance: 'micro-bert.s1' and 'micro-bert.random-s1' are micro-bert."""
    return instance.partition(".")[0]


def models_text(view: dict, role: str | None = None) -> str:
    """The models a view was measured on, as a reader names them: 'micro-bert (for bert-base-uncased)'; with a
    role, the role first ('pretrained-lm: gemma-3-270m')."""
    named: dict[str, str] = {}
    for m in (view.get("measurements") or {}).values():
        if m.get("measured") is None and not m.get("curve"):
            continue
        for inst in m.get("instances") or []:
            if ".random-" in inst:
                continue
            named.setdefault(asset_of(inst), m.get("substitute_for") or "")
    text = ", ".join(f"{a} (for {s})" if s else a for a, s in named.items()) or "no model"
    stands = view.get("stands_for")
    text += f"; {stands}" if stands else ""
    return f"{role}: {text}" if role else text


def label(m: dict, name: str, role: str | None = None, several: bool = False) -> str:
    text = m.get("label") or name
    return f"{text} [{role}]" if several and role else text
