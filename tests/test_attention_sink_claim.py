"""The decoder's analogue of P6 (intrinsic/attention-sink-first-token, Xiao et al. 2023): its plan on the real
pre-trained decoder of each tier with the random-weights twin beside, the causal chance level its values are taken
against, and its verdicts on synthetic layers whose attention to the first token we control: shown, since its checks
are Llama-2-7B's layer profile, with what they measured; and, credited, what the engine would judge."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conftest import OFFLINE, run_snakemake
from plmclaims import plan as P
from plmclaims.claims import load_claims
from plmclaims.provenance import atomic_save_npz, atomic_write_json
from plmclaims.tiers import load_tier, random_twins, with_overrides
from plmclaims.verdicts import decide_claim

CID = "intrinsic/attention-sink-first-token"
BENCH = "attention-to-first"
REPO = Path(__file__).resolve().parents[1]


def _plan(tier: dict):
    (claim,) = load_claims(REPO / "replications", [CID])
    return P.plan_claim(claim, tier)


@pytest.mark.parametrize("tier_name, asset, layers, middle", [
    ("micro", "gemma-3-270m", 18, 9), ("paper", "gpt2", 12, 6), ("tiny", "tiny-gemma", 2, 1)])
def test_each_tier_plans_its_decoder_with_one_pass_per_model_and_the_twin_beside(tier_name, asset, layers, middle):
    tier = load_tier(tier_name)
    ms = _plan(tier).measurements
    assert tier["roles"]["pretrained-lm"]["asset"] == asset and tier["assets"][asset]["kind"] == "causal-lm"
    twins = {i.name for i in random_twins(tier, asset)}
    if tier_name == "micro":
        assert twins == {"gemma-3-270m.random-s1"}  # one twin seed for Gemma at micro: a floor needs no spread
    assert all(pm.status == "ok" and pm.measurement.role == "pretrained-lm" for pm in ms.values())
    assert {n: {r.layer for r in ms[n].runs} for n in ("bottom", "middle", "top")} == {
        "bottom": {1}, "middle": {middle}, "top": {layers}}
    curve = ms["layers"]
    assert list(curve.points) == list(range(1, layers + 1))  # the embeddings attend nowhere: no layer 0
    runs = [r for n in ("bottom", "middle", "top") for r in ms[n].runs + ms[n].controls]
    runs += [r for rs in list(curve.points.values()) + list(curve.control_points.values()) for r in rs]
    for n in ("bottom", "middle", "top"):
        assert {r.instance for r in ms[n].runs} == {asset} and {r.instance for r in ms[n].controls} == twins
    maps = {}
    for r in runs:
        assert r.kind == "attention" and r.split == "dev" and r.upstream[0].kind == "attention-maps"
        assert r.upstream[0].params == {}  # a decoder has no masked-LM head: no gradient is taken
        maps.setdefault(r.instance, set()).add(r.upstream[0].key)
    assert set(maps) == {asset} | twins and all(len(k) == 1 for k in maps.values())  # one pass serves every layer


def test_the_rehearsal_tier_reaches_the_decoder_attention_only_through_this_claim():
    """The rehearsal tests pick claims until every (rule, architecture) pair of the paper DAG is covered: the paper
    tier's GPT-2 attention passes are planned by this claim alone, so the rehearsal runs them through it."""
    claims = load_claims(REPO / "replications")
    for name in ("paper", "rehearsal"):
        tier = load_tier(name)
        by = {}
        for p in P.plan_all(claims, tier):
            for r in P.all_runs(p.score_runs()).values():
                if r.kind in ("attention-maps", "attention"):
                    by.setdefault(r.spec["fields"]["instance"].partition(".")[0], set()).add(p.claim.id)
        assert by["gpt2"] == {CID}, by


def test_values_are_taken_against_uniform_causal_attention(tmp_path):
    """Chance is causal: query q sees keys 0..q, so uniform attention gives the first token mean(1 / (q + 1)), not 1 / T.
    A sentence whose attention is uniform scores 0; the run's items are share minus that level."""
    from plmclaims.families.intrinsic.runs import attention
    from plmclaims.methods.attention import causal_uniform_share

    tier = load_tier("micro")
    run = _plan(tier).measurements["middle"].runs[0]
    lengths = [4, 7, 12]
    first = [np.arange(t) == 0 for t in lengths]
    uniform = np.array([causal_uniform_share(f) for f in first])
    assert uniform[0] == pytest.approx(np.mean([1, 1 / 2, 1 / 3, 1 / 4]))
    share = np.tile(uniform[:, None], (1, 18))
    share[1, run.layer - 1] = 0.9  # one sentence whose middle layer sinks
    maps = tmp_path / "maps" / "attention.npz"
    atomic_save_npz(maps, sentences=np.arange(3), sent_ids=np.array(["a", "b", "c"]), tokens=np.array(lengths),
                    **{"first::share": share.astype(np.float32), "first::uniform": uniform.astype(np.float32),
                       "punctuation::share": np.zeros((3, 18), np.float32), "punctuation::uniform": np.zeros(3, np.float32)})
    atomic_write_json(maps.with_name("metrics.json"), {"values": {}})
    out = tmp_path / "run" / "metrics.json"
    attention(tier, run, maps, out)
    pred = np.load(out.with_name("predictions.npz"))[f"{BENCH}::pred"]
    assert pred == pytest.approx([0, 0.9 - uniform[1], 0], abs=1e-6)
    values = json.loads(out.read_text())["values"]["benchmarks"][BENCH]
    assert values["uniform"] == pytest.approx(uniform.mean(), abs=1e-6)


# ---------------------------------------------------------------- synthetic verdicts

def _write(cplan, root: Path, value_of, n: int = 200) -> str:
    """value_of(layer, random) -> the layer's mean excess share, with the same small item noise in every run."""
    noise = np.random.default_rng(0).normal(scale=0.05, size=n)
    for pm in cplan.measurements.values():
        for run in pm.runs + pm.controls:
            out = Path(run.path(str(root)))
            pred = value_of(run.layer, "random" in run.instance) + noise
            atomic_save_npz(out.with_name("predictions.npz"), **{
                f"{BENCH}::pred": pred, f"{BENCH}::gold": np.zeros(n), f"{BENCH}::subsets": np.full(n, "ewt-dev"),
                f"{BENCH}::index": np.arange(n)})
            atomic_write_json(out, {"values": {"benchmarks": {BENCH: {"mean": float(pred.mean())}}}})
    return str(root)


def _sink(layer: int, random: bool) -> float:
    """Xiao et al.'s shape: the first layer local, a sink from the layers above; the twin near uniform."""
    if random:
        return 0.0
    return {1: 0.02, 2: 0.10}.get(layer, 0.45)


@pytest.fixture(scope="module")
def micro():
    tier = with_overrides(load_tier("micro"), {"bootstrap.resamples": 200})
    return tier, _plan(tier)


def _judged(cplan):
    """The plan with its checks credited: what the engine would make of Llama-2-7B's layer profile on a tier that ran
    Llama-2-7B itself (the claim shows the checks, since no tier does)."""
    checks = [{k: v for k, v in c.items() if k != "shown"} for c in cplan.claim.checks]
    return replace(cplan, claim=replace(cplan.claim, data={**cplan.claim.data, "checks": checks}))


def _measured(v: dict) -> list[str]:
    assert {c["outcome"] for c in v["checks"]} == {"shown"}, v["checks"]
    assert all("Llama-2-7B's layer profile" in c["reason"] for c in v["checks"])
    return [c["measured_outcome"] for c in v["checks"]]


def test_a_sink_above_the_bottom_layer_and_a_uniform_twin_is_shown_holding_on_gemma(tmp_path, micro):
    tier, cplan = micro
    results = _write(cplan, tmp_path, _sink)
    v = decide_claim(cplan, tier, results)
    assert v["verdict"] == "shown" and _measured(v) == ["holds", "holds"], v["note"]
    for name in ("middle", "top"):
        m = v["measurements"][name]
        assert m["measured"] == pytest.approx(45, abs=1) and m["instances"] == ["gemma-3-270m"]
        assert m["floors"]["chance"][BENCH] == 0.0  # uniform causal attention
        assert m["floors"]["random-weights"][BENCH] == pytest.approx(0, abs=1)
    curve = v["measurements"]["layers"]["curve"]
    assert [p["per_benchmark"][BENCH]["measured"] for p in curve] == pytest.approx(
        [100 * _sink(layer, False) for layer in range(1, 19)], abs=1)
    assert all(p["floors"]["random-weights"][BENCH] == pytest.approx(0, abs=1) for p in curve)
    credited = decide_claim(_judged(cplan), tier, results)
    assert credited["verdict"] == "reproduced", credited["note"]


def test_a_twin_with_the_trained_models_attention_leaves_the_checks_inconclusive(tmp_path, micro):
    """Rule: every credited side beats its twin. A twin that attends as the trained model does, or that shows the same
    rise above the first layer, leaves the sink the architecture's, not pre-training's."""
    tier, cplan = micro
    same = _write(cplan, tmp_path / "same", lambda layer, random: _sink(layer, False))
    assert _measured(decide_claim(cplan, tier, same)) == ["inconclusive"] * 2
    v = decide_claim(_judged(cplan), tier, same)
    assert v["verdict"] == "inconclusive" and "not above its random-weights floor" in v["note"], v["note"]
    below = lambda layer, random: _sink(layer, False) - (0.05 if random else 0.0)  # noqa: E731
    v = decide_claim(_judged(cplan), tier, _write(cplan, tmp_path / "rise", below))
    assert v["verdict"] == "inconclusive" and "the random-weights twin shows the same relation" in v["note"], v["note"]


def test_no_sink_is_inconclusive_and_a_sink_in_the_first_layer_contradicts_the_profile(tmp_path, micro):
    """Gemma's case at micro: its first layer already sinks, more than its middle layer; the profile's contradiction
    is shown, and would make the claim not-reproduced only where it is credited."""
    tier, cplan = micro
    v = decide_claim(_judged(cplan), tier, _write(cplan, tmp_path / "flat", lambda layer, random: 0.0))
    assert v["verdict"] == "inconclusive" and "not above its chance floor" in v["note"], v["note"]
    first = lambda layer, random: 0.0 if random else {1: 0.33, 18: 0.52}.get(layer, 0.22)  # noqa: E731
    results = _write(cplan, tmp_path / "first", first)
    v = decide_claim(cplan, tier, results)
    assert v["verdict"] == "shown" and _measured(v) == ["contradicted", "holds"], v["note"]
    assert decide_claim(_judged(cplan), tier, results)["verdict"] == "not-reproduced"


def test_the_tiny_tiers_random_gemma_is_judged_on_the_wiring_only(tmp_path):
    """tiny-gemma has random weights, as its twin: whatever it shows, its twin shows too, and the sink is not credited."""
    tier = with_overrides(load_tier("tiny"), {"bootstrap.resamples": 100})
    cplan = _plan(tier)
    v = decide_claim(_judged(cplan), tier, _write(cplan, tmp_path, lambda layer, random: _sink(layer + 1, False)))
    assert v["verdict"] == "inconclusive" and "not above its random-weights floor" in v["note"], v["note"]


def test_the_paper_tier_plans_gpt2_and_its_twin_offline(tmp_path, data_root):
    res = run_snakemake(REPO, tmp_path, "-n", "--config", "tier=paper", f"data_root={data_root}",
                        f"claims_dir={REPO / 'replications'}", f"claims={json.dumps([CID])}", env=OFFLINE)
    assert res.returncode == 0, res.stderr[-2000:]
    stats = res.stdout.split("Job stats")[1].split("\n\n")[0]
    assert "attention_maps" in stats and "verdict" in stats
    assert "instance=gpt2," in res.stdout and "instance=gpt2.random-s" in res.stdout
