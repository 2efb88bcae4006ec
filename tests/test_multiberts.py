"""The paper-multiberts option (issue 34, rule 6): the raw encoder over MultiBERTs pre-training seeds, each a hub
repository pinned to a commit, with the released intermediate checkpoints for the embryology curve; planned offline,
prefetchable, and rehearsed through the local stand-in hub."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import OFFLINE, run_snakemake
from plmclaims import hub_family, standins
from plmclaims.assets import needed_assets
from plmclaims.claims import load_claims
from plmclaims.errors import UserError
from plmclaims.plan import all_runs, plan_all, plan_claim
from plmclaims.published import BERT_BASE_UNCASED
from plmclaims.tiers import load_tier

REPO = Path(__file__).resolve().parents[1]
TIERS = REPO / "workflows" / "tiers"
STS = "sts/glove-avg-beats-bert-avg"
EMBRYOLOGY = "probing/embryology"
UNPINNED = "google/multiberts-seed_0-step_20k"


@pytest.fixture(autouse=True)
def _no_hub_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("PLMCLAIMS_HUB_DIR", str(tmp_path / "hub"))  # no prefetch folder: nothing to compare against


@pytest.fixture(scope="module")
def tier():
    return load_tier("paper-multiberts")


def _plan(tier, claim):
    return plan_claim(load_claims(REPO / "replications", [claim])[0], tier)


def _asset(run) -> dict:
    return run.spec["tier"]["assets"]["multiberts"]


def test_the_option_changes_the_raw_encoder_only(tier):
    paper = load_tier("paper")
    assert tier["roles"]["raw-encoder"]["asset"] == "multiberts"
    assert paper["roles"]["raw-encoder"]["asset"] == "bert-base-uncased"
    assert {r: s for r, s in tier["roles"].items() if r != "raw-encoder"} == {
        r: s for r, s in paper["roles"].items() if r != "raw-encoder"}
    assert {a: s for a, s in tier["assets"].items() if a != "multiberts"} == paper["assets"]
    assert tier["finetune"] == paper["finetune"] and tier["bootstrap"] == paper["bootstrap"]
    spec = tier["assets"]["multiberts"]
    # the five seeds with intermediate checkpoints, each repository pinned to a commit or named unpinned with its reason
    assert spec["seeds"] == [0, 1, 2, 3, 4] and hub_family.is_family(spec)
    pins = hub_family.repos(spec)
    assert len(pins) == 5 * 4  # five seeds, three checkpoints and the final weights
    assert [r for r, rev, _, _ in pins if rev is None] == [UNPINNED]
    assert all(re.fullmatch(r"[0-9a-f]{40}", rev) for r, rev, _, _ in pins if rev is not None)
    assert len({rev for _, rev, _, _ in pins}) == len(pins)  # no commit copied between repositories
    assert "no public source" in hub_family.unpinned(spec, UNPINNED)


def test_raw_encoder_measurements_run_once_per_seed_beside_the_twins(tier):
    cplan = _plan(tier, STS)
    spec = tier["assets"]["multiberts"]
    for name in ("bert_avg", "bert_cls"):
        pm = cplan.measurements[name]
        assert sorted(r.instance for r in pm.runs) == [f"multiberts.s{s}" for s in range(5)]
        assert sorted(r.instance for r in pm.controls) == ["multiberts.random-s1", "multiberts.random-s2"]
        for run in pm.runs:  # each seed's run holds its own repository and commit, nothing of the other seeds
            seed = int(run.instance.rpartition(".s")[2])
            assert _asset(run)["id"] == f"google/multiberts-seed_{seed}"
            assert _asset(run)["revision"] == spec["revisions"][str(seed)]
            assert not set(hub_family.FAMILY_FIELDS) & set(_asset(run))
        for twin in pm.controls:  # the twin: seed 0's configuration and tokenizer, its own random initialisation
            seed0 = ("google/multiberts-seed_0", spec["revisions"]["0"])
            assert (_asset(twin)["id"], _asset(twin)["revision"]) == seed0
        assert pm.substitute == "bert-base-uncased"  # the papers' numbers are one checkpoint's: shown, not judged
    assert cplan.measurements["glove_avg"].runs[0].instance == "glove-840b-300d"  # other roles as at paper


def test_a_seeds_pin_is_part_of_its_runs_keys_and_of_no_other_seeds(tier):
    moved = json.loads(json.dumps(tier))
    moved["assets"]["multiberts"]["revisions"]["3"] = "f" * 40
    before = {r.instance: r.key for r in _plan(tier, STS).measurements["bert_avg"].runs}
    after = {r.instance: r.key for r in _plan(moved, STS).measurements["bert_avg"].runs}
    assert {i for i in before if before[i] != after[i]} == {"multiberts.s3"}


def test_the_embryology_curve_reads_the_released_checkpoints(tier):
    pm = _plan(tier, EMBRYOLOGY).measurements["steps"]
    assert pm.status == "ok" and sorted(pm.points) == [0, 20000, 40000, 700000, 2000000]
    spec = tier["assets"]["multiberts"]
    for step, runs in pm.points.items():
        encodes = {u for r in runs for u in r.upstream if u.kind == "probe-encode"}
        loads = {(u.instance, _asset(u)["id"], _asset(u).get("revision")) for u in encodes}
        if step == 0:  # the random initialisation: the twins
            assert {i for i, _, _ in loads} == {"multiberts.random-s1", "multiberts.random-s2"}
            continue
        final = step == 2000000
        want = {(f"multiberts.s{s}", f"google/multiberts-seed_{s}" + ("" if final else f"-step_{step // 1000}k"),
                 spec["revisions"][str(s)] if final else spec["checkpoints"]["revisions"][str(step)].get(str(s)))
                for s in range(5)}
        assert loads == want
        assert all(u.params.get("step") == (None if final else step) for u in encodes)
    assert all(runs == pm.points[0] for runs in pm.control_points.values())  # every point set beside the twin


def test_the_micro_tiers_curve_still_reads_the_workflows_checkpoints():
    micro = load_tier("micro")
    pm = _plan(micro, EMBRYOLOGY).measurements["steps"]
    train = micro["assets"]["micro-bert"]["train"]
    assert sorted(pm.points) == [0, *sorted(train["checkpoints"]), train["steps"]]
    encodes = {u for runs in pm.points.values() for r in runs for u in r.upstream if u.kind == "probe-encode"}
    assert {p.kind for u in encodes for p in u.upstream} <= {"pretrain", "tokenizer"}
    # the paper tier does not run the curve: bert-base-uncased has no checkpoints, and the reason says where some are
    paper = _plan(load_tier("paper"), EMBRYOLOGY).measurements["steps"]
    assert paper.status != "ok" and "paper-multiberts" in paper.reason


def test_prefetch_lists_every_seed_and_checkpoint_at_its_commit_and_the_unpinned_one_with_its_reason(tier):
    plans = plan_all(load_claims(REPO / "replications", [EMBRYOLOGY, STS]), tier)
    found = {a.repo_id: a for a in needed_assets(plans, tier) if a.asset == "multiberts"}
    assert set(found) == {r for r, _, _, _ in hub_family.repos(tier["assets"]["multiberts"])}
    assert found[UNPINNED].revision is None and found[UNPINNED].pin.startswith("@main (unpinned: no public source")
    assert found["google/multiberts-seed_4-step_700k"].pin == "@" + tier["assets"]["multiberts"]["checkpoints"][
        "revisions"]["700000"]["4"]
    assert standins.unsupported(list(found.values())) == []  # each has a stand-in of bert-base's published shape
    assert standins.published("google/multiberts-seed_17-step_300k").config == BERT_BASE_UNCASED


def test_plan_and_dry_run_prefetch_say_which_model_loads_main_and_why(tmp_path):
    cmd = [sys.executable, "-m", "plmclaims.cli"]
    common = ["--tier", "paper-multiberts", "--claims-dir", str(REPO / "replications"), "--claims", EMBRYOLOGY]
    plan = subprocess.run([*cmd, "plan", *common], capture_output=True, text=True, timeout=300)
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert "probing/embryology" in plan.stdout and "22 probe-encode" in plan.stdout
    assert re.search(rf"unpinned hub models \(1\).*\n  {UNPINNED}: no public source", plan.stdout)
    dry = subprocess.run([*cmd, "prefetch", *common, "--out", str(tmp_path / "hub"), "--dry-run"], capture_output=True,
                         text=True, timeout=300)
    assert dry.returncode == 0, dry.stderr[-2000:]
    lines = dry.stdout.splitlines()
    assert len([x for x in lines if x.startswith("model google/multiberts-seed_")]) == 20
    assert any(x.startswith(f"model {UNPINNED}@main (unpinned: no public source") for x in lines)


def test_a_dry_run_of_the_option_plans_every_seed_offline(tmp_path, data_root):
    claims = json.dumps([EMBRYOLOGY, STS])
    res = run_snakemake(REPO, tmp_path, "-n", "--config", "tier=paper-multiberts", f"data_root={data_root}",
                        f"claims_dir={REPO / 'replications'}", f"claims={claims}", env=OFFLINE)
    assert res.returncode == 0, res.stderr[-3000:]
    stats = res.stdout.split("Job stats")[1].split("\n\n")[0]
    # embryology: five seeds at three checkpoints and the end, two twins; the STS claim encodes each seed and twin
    assert re.search(r"^probe_encode\s+22$", stats, re.M), stats
    for inst in [*(f"multiberts.s{s}" for s in range(5)), "multiberts.random-s1", "multiberts.random-s2"]:
        assert f"/{inst}/" in res.stdout, inst
    # nothing is prefetched, so the dry run warns, naming the prefetch command, instead of failing
    assert "plmclaims prefetch --tier paper-multiberts" in res.stdout + res.stderr


# ---------------------------------------------------------------- the tier file: what it must say, in one line


def _family_tier(tmp_path, **changes) -> Path:
    spec = json.loads(json.dumps(load_tier("paper-multiberts")["assets"]["multiberts"]))
    for dotted, value in changes.items():
        node, *path = [spec, *dotted.split(".")]
        for k in path[:-1]:
            node = node[k]
        if value is None:
            node.pop(path[-1])
        else:
            node[path[-1]] = value
    path = tmp_path / "mine.yaml"  # on paper, which has no such asset: the spec is this one, not merged into another
    path.write_text(yaml.safe_dump({"base": "paper", "name": "mine", "roles": {"raw-encoder": {"asset": "multiberts"}},
                                    "assets": {"multiberts": spec}, "probing": {"layers": {"multiberts": 12}}}))
    return path


@pytest.mark.parametrize("changes, says", [
    ({"revisions.2": None}, r"field 'assets.multiberts.revisions.2': google/multiberts-seed_2 has no commit; pin it .* "
                            r"or say why .* 'assets.multiberts.unpinned'"),
    ({"unpinned": {}}, r"field 'assets.multiberts.checkpoints.revisions.20000.0': google/multiberts-seed_0-step_20k "
                       r"has no commit"),
    ({"revisions.1": "main"}, r"field 'assets.multiberts.revisions.1': 'main' does not match the pattern"),
    ({"checkpoints.steps": [20000, 60000]}, r"checkpoints.steps': step 60000 has no entry .*allowed values: 20000, "
                                            r"40000, 700000"),
    ({"checkpoints.final_step": 500000}, r"checkpoints.final_step': got 500000; it must be above every step"),
    ({"checkpoints.id": "google/multiberts-seed_{seed}"}, r"checkpoints.id'.* needs \{seed\} and \{step\}"),
    ({"id": "google/multiberts-seed_{seed}-{run}"}, r"field 'assets.multiberts.id'.*\{seed\} and no other"),
    ({"seeds": None}, r"field 'assets.multiberts.seeds': a family of pre-trainings"),
    ({"unpinned": "no reason per repository"}, r"field 'assets.multiberts.unpinned': a family names each repository"),
])
def test_a_family_without_a_pin_or_a_reason_is_refused_in_one_line(tmp_path, changes, says):
    with pytest.raises(UserError, match=says) as err:
        load_tier(str(_family_tier(tmp_path, **changes)))
    assert "\n" not in str(err.value) and "mine.yaml" in str(err.value)


def test_fewer_seeds_and_steps_are_a_tier_setting_of_the_same_pins(tmp_path):
    tier = load_tier(str(_family_tier(tmp_path, **{"seeds": [2, 4], "checkpoints.steps": [40000]})))
    pm = _plan(tier, EMBRYOLOGY).measurements["steps"]
    assert sorted(pm.points) == [0, 40000, 2000000]
    assert sorted({r.instance for r in pm.points[40000]}) == ["multiberts.s2", "multiberts.s4"]
    # seed 0's 20k checkpoint is not run, so no MultiBERTs repository loads main
    assert not [r for r in hub_family.unpinned_repos(tier) if r.startswith("google/multiberts")]


def test_a_single_repository_may_state_why_it_is_unpinned_without_moving_a_run(tmp_path):
    """paper.yaml's assets without a public pin load main; an 'unpinned' reason says why, and changes no run key."""
    path = tmp_path / "why.yaml"
    path.write_text(yaml.safe_dump({"base": "paper", "name": "why",
                                    "assets": {"glove-840b-300d": {"unpinned": "no public source pins it"}}}))
    paper, why = load_tier("paper"), load_tier(str(path))
    assert sorted(all_runs(_plan(paper, STS).score_runs())) == sorted(all_runs(_plan(why, STS).score_runs()))
    glove = "sentence-transformers/average_word_embeddings_glove.840B.300d"
    assert hub_family.unpinned_repos(why)[glove] == "no public source pins it"
    # every hub model of the paper tier has a commit or says why not (the plan never prints 'no reason')
    unpinned = [a for a in needed_assets([_plan(paper, STS)], paper) if a.repo_type == "model" and not a.revision]
    assert unpinned and all(a.unpinned for a in unpinned)
    assert hub_family.unpinned_repos(paper)[glove] not in ("", "no public source pins it")
    found = {a.repo_id: a for a in needed_assets([_plan(why, STS)], why)}
    assert found[glove].pin == "@main (unpinned: no public source pins it)"
    path.write_text(yaml.safe_dump({"base": "paper", "name": "why",
                                    "assets": {"bert-base-uncased": {"unpinned": "no public source pins it"}}}))
    with pytest.raises(UserError, match="field 'assets.bert-base-uncased': it has a revision and an 'unpinned' reason"):
        load_tier(str(path))


def test_a_list_base_lays_each_later_tier_without_its_own_base(tmp_path):
    mixed = load_tier("rehearsal-multiberts")
    option, rehearsal = load_tier("paper-multiberts"), load_tier("rehearsal")
    # rehearsal.yaml's own base (paper) is not laid again over the option's changes
    assert mixed["assets"] == option["assets"] and mixed["roles"] == option["roles"]
    assert mixed["rehearsal"] == rehearsal["rehearsal"] and mixed["finetune"] == rehearsal["finetune"]
    assert mixed["probing"] == {**rehearsal["probing"], "layers": option["probing"]["layers"]}
    (tmp_path / "a.yaml").write_text("base: [b.yaml, rehearsal]\nname: a\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\nname: b\n")
    with pytest.raises(UserError, match=r"field 'base'.*\(a cycle\)"):
        load_tier(str(tmp_path / "a.yaml"))


def test_rehearse_names_the_options_rehearsal(data_root):
    cmd = [sys.executable, "-m", "plmclaims.cli", "rehearse", "--tier", "paper-multiberts", "--data-root",
           str(data_root)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "its rehearsal is --tier rehearsal-multiberts" in res.stderr


# ---------------------------------------------------------------- the rehearsal, run


@pytest.mark.slow
def test_the_option_rehearses_one_sts_claim_and_the_embryology_curve(tmp_path, data_root):
    """CI's cut of rehearsal-multiberts: two seeds and one checkpoint, at 8 dimensions per head; stand-ins served by
    the local hub to the real prefetch, then the workflow offline to a report whose sides hold one run per seed."""
    overlay = tmp_path / "rehearsal-multiberts-ci.yaml"
    overlay.write_text(yaml.safe_dump({
        "base": str(TIERS / "rehearsal-multiberts.yaml"), "name": "rehearsal-multiberts-ci",
        "rehearsal": {"shapes": "cut", "head_size": 8}, "controls": {"random_weights_seeds": [1]},
        "assets": {"multiberts": {"seeds": [0, 1], "checkpoints": {"steps": [20000]}}},
        # the STS claim's further model (GPT-2) is the paper DAG's, rehearsed by tests/test_rehearsal.py
        "roles": {"pretrained-lm": {"unavailable": "rehearsal in CI: the option changes the raw encoder only"}}}))
    cmd = [sys.executable, "-m", "plmclaims.cli", "rehearse", "--tier", str(overlay), "--data-root", str(data_root),
           "--claims-dir", str(REPO / "replications"), "--claims", EMBRYOLOGY, STS, "--cores", "2"]
    res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    results = tmp_path / "results" / "rehearsal-multiberts-ci"
    hub_root = tmp_path / "resources" / "rehearsal-multiberts-ci" / "hub"
    manifest = json.loads((hub_root / "manifest.json").read_text())["assets"]
    tier = load_tier(str(overlay))
    want = {r: rev for r, rev, _, _ in hub_family.repos(tier["assets"]["multiberts"])}
    assert set(want) == {"google/multiberts-seed_0", "google/multiberts-seed_1", UNPINNED,
                         "google/multiberts-seed_1-step_20k"}
    for repo_id, rev in want.items():  # prefetched at its pin; the unpinned one at what main gave, with the reason
        entry = manifest[f"model:{repo_id}"]
        assert entry["pinned"] == (rev is not None) and (entry["revision"] == rev if rev else "unpinned" in entry)
    # each repository a stand-in with weights of its own: the seeds' runs differ as pre-trainings do
    assert len({manifest[f"model:{r}"]["files"]["model.safetensors"] for r in want}) == len(want)
    curve = json.loads((results / "claims" / "probing--embryology.json").read_text())["measurements"]["steps"]["curve"]
    assert [p["x"] for p in curve] == [0, 20000, 2000000]
    for point in curve[1:]:  # each point one run per seed, bootstrapped over seeds and sentences
        assert all(len(point["per_benchmark"][b]["seeds"]) == 2 for b in ("upos", "dependency"))
    sts = json.loads((results / "claims" / "sts--glove-avg-beats-bert-avg.json").read_text())["measurements"]
    assert sorted(sts["bert_avg"]["instances"]) == ["multiberts.s0", "multiberts.s1"]  # the twin is its floor
    assert "random-weights" in sts["bert_avg"]["floors"] and sts["bert_avg"]["random_weights"]["measured"] is not None
    assert all(len(b["seeds"]) == 2 for b in sts["bert_avg"]["per_benchmark"].values())
    encodes = [json.loads(p.read_text())["provenance"]["config"]
               for p in results.glob("runs/probe-encode/*/*/*/metrics.json")]
    assert {(c["instance"], c["step"], c["revision"]) for c in encodes if c["step"]} == {
        ("multiberts.s0", 20000, manifest[f"model:{UNPINNED}"]["revision"]),
        ("multiberts.s1", 20000, want["google/multiberts-seed_1-step_20k"])}
    report = (results / "claims.md").read_text()
    assert "**Unpinned hub models.**" in report and UNPINNED in report
    # the report's provenance names the tier's repositories that load main, each with the tier's reason
    unpinned = json.loads((results / "provenance.json").read_text())["unpinned"]
    assert unpinned[UNPINNED] == hub_family.unpinned(tier["assets"]["multiberts"], UNPINNED)
    assert unpinned == hub_family.unpinned_repos(tier)
