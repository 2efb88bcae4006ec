"""report.outdated: a published verdict is marked exactly where its claim, its planned runs or the tier's judging
settings changed since its run; a claim added since gets a not-run row, one removed loses its row."""
from __future__ import annotations

import copy
import json

from plmclaims.claims import load_claims
from plmclaims.plan import plan_all
from plmclaims.report.outdated import ADDED, mark
from plmclaims.tiers import load_tier

RESULTS = "results/tiny"


def _current(claims, tier) -> list[dict]:
    """Verdict rows as a run of the current claims and tier would record them (the fields outdated reads)."""
    recorded = json.loads(json.dumps(tier, default=str))
    return [{"id": p.claim.id, "version": p.claim.data["version"], "tier": tier["name"], "verdict": "inconclusive",
             "note": "n", "measurements": {}, "runs": sorted({r.path(RESULTS) for r in p.score_runs()}),
             "provenance": {"config": {"tier": recorded}}} for p in plan_all(claims, tier)]


def test_current_verdicts_are_not_marked_and_each_change_is_named(repo):
    tier = load_tier("tiny")
    claims = load_claims(repo / "replications", ["sts/glove-avg-beats-bert-avg", "sts/whitening-improves-bert",
                                                  "probing/embryology"])
    verdicts = _current(claims, tier)
    assert not any(v.get("outdated") for v in mark(verdicts, claims, tier, RESULTS))
    changed = copy.deepcopy(verdicts)
    changed[0]["version"] -= 1  # an older claim version
    changed[1]["runs"] = changed[1]["runs"][1:]  # one planned run not in the report
    changed[2]["provenance"]["config"]["tier"]["bootstrap"] = {"samples": 7}  # other judging settings
    marks = {v["id"]: v.get("outdated", "") for v in mark(changed, claims, tier, RESULTS)}
    assert "claim version" in marks[changed[0]["id"]] and "planned runs" not in marks[changed[0]["id"]]
    assert marks[changed[1]["id"]].startswith("1 planned runs not in this report, 0 of its runs")
    assert marks[changed[2]["id"]].startswith("judged with other bootstrap")


def test_an_added_claim_gets_a_not_run_row_and_a_removed_one_loses_its_own(repo):
    tier = load_tier("tiny")
    claims = load_claims(repo / "replications", ["sts/glove-avg-beats-bert-avg", "sts/whitening-improves-bert"])
    verdicts = _current(claims, tier)
    gone = {**verdicts[0], "id": "sts/a-claim-that-is-gone"}
    out = mark([verdicts[0], gone], claims, tier, RESULTS)
    assert [v["id"] for v in out] == sorted(c.id for c in claims)
    added = out[1]
    assert added["verdict"] == "not-run" and added["outdated"] == ADDED and ADDED in added["note"]
    assert added["version"] == claims[1].data["version"] and added["statement"]


def test_marking_a_marked_report_again_keeps_each_mark(repo):
    """publish --render-only runs on its own output: an added claim's row stays marked as added, not as a verdict
    judged with other settings (it has no run, so no recorded settings)."""
    tier = load_tier("tiny")
    claims = load_claims(repo / "replications", ["sts/glove-avg-beats-bert-avg", "sts/whitening-improves-bert"])
    verdicts = _current(claims, tier)
    once = mark([verdicts[0]], claims, tier, RESULTS)
    assert mark(once, claims, tier, RESULTS) == once and once[1]["outdated"] == ADDED
