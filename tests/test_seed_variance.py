"""P12 (Dodge et al. 2020): separate head and order seeds, the seed grid as a curve along the `seed` axis, its
verdict on synthetic predictions, and the two-way variance decomposition."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.stats import f as f_dist

from plmclaims import plan as P
from plmclaims import training
from plmclaims.claims import load_claim, load_claims
from plmclaims.data.glue import GlueData
from plmclaims.errors import UserError
from plmclaims.evaluation import seed_variance
from plmclaims.families.glue.plan import grid_skipped
from plmclaims.provenance import atomic_save_npz, atomic_write_json
from plmclaims.tiers import load_tier, with_overrides
from plmclaims.verdicts import decide_claim

P12 = "compression/seed-variance"


def _claim(repo, cid=P12, models: bool = False):
    """The shipped claim; without `models` on its own model only (the micro-BERT's grid these tests write)."""
    claim = load_claim(repo / "replications" / f"{cid}.yaml", repo / "replications")
    if models:
        return claim
    from dataclasses import replace

    return replace(claim, data={k: v for k, v in claim.data.items() if k != "models"})


def _variant(repo, tmp_path, **params):
    """The P12 claim with other measurement params, loaded from tmp_path."""
    data = yaml.safe_load((repo / "replications" / f"{P12}.yaml").read_text())
    data["measurements"]["grid"]["params"] = params
    path = tmp_path / f"{P12}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return load_claim(path, tmp_path)


# ---------------------------------------------------------------- separate seeds

@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory, minilm_path):
    """A 1-layer, 16-wide BERT with MiniLM's tokenizer: its classifier head is fresh whenever it is loaded."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    out = tmp_path_factory.mktemp("tiny-bert")
    tok = AutoTokenizer.from_pretrained(minilm_path)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=tok.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=64)).save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)


def _toy_sst2():
    rng = np.random.default_rng(0)
    words = "good bad fine awful great poor nice dull".split()
    texts = [" ".join(rng.choice(words, 6)) for _ in range(60)]
    labels = [int("good" in t or "great" in t) for t in texts]
    return GlueData("SST-2", "train", texts[:40], None, labels[:40]), GlueData("SST-2", "dev", texts[40:], None, labels[40:])


@pytest.mark.slow
def test_separate_seeds_change_only_what_they_own(tiny_bert, monkeypatch):
    """The order seed moves the training examples' order (and sample) and the generator dropout draws from, never
    the fresh head; the head seed moves the head and nothing else; the pre-trained weights move with neither."""
    import torch

    seen = []
    real_init, real_batches = training.init_model, training._batches

    def init(*args, **kwargs):
        model = real_init(*args, **kwargs)
        seen.append({"head": {n: p.detach().clone() for n, p in model.named_parameters() if n.startswith("classifier")},
                     "encoder": model.bert.encoder.layer[0].attention.self.query.weight.detach().clone(),
                     "rng": torch.get_rng_state(), "order": []})
        return model

    def batches(tokenizer, data, order, *args, **kwargs):
        if data.split == "train":
            seen[-1]["order"].append([data.text_a[i] for i in order])
        return real_batches(tokenizer, data, order, *args, **kwargs)

    monkeypatch.setattr(training, "init_model", init)
    monkeypatch.setattr(training, "_batches", batches)
    train, dev = _toy_sst2()
    budget = {"epochs": 2, "batch_size": 8, "max_length": 16, "max_train": 30}
    values = [training.finetune(tiny_bert, "full-finetuning", {"lr": 1e-3, **p}, train, dev, budget, 1, progress=False)[0]
              for p in ({}, {"order_seed": 2}, {"head_seed": 2})]
    base, order2, head2 = seen
    assert [(v["head_seed"], v["order_seed"]) for v in values] == [(1, 1), (1, 2), (2, 1)]
    assert len(base["order"]) == 2 and len(base["order"][0]) == 30  # two epochs over the 30-example sample

    same = lambda a, b: all(torch.equal(a[n], b[n]) for n in a)  # noqa: E731
    assert same(order2["head"], base["head"]) and not same(head2["head"], base["head"])
    assert order2["order"] != base["order"] and head2["order"] == base["order"]
    assert not torch.equal(order2["rng"], base["rng"]) and torch.equal(head2["rng"], base["rng"])  # dropout's stream
    assert all(torch.equal(s["encoder"], base["encoder"]) for s in (order2, head2))


def test_run_seeds_default_to_the_runs_seed():
    assert training.run_seeds({}, 7) == (7, 7)
    assert training.run_seeds({"head_seed": 2}, 7) == (2, 7)
    assert training.run_seeds({"order_seed": 3, "lr": 1e-3}, 7) == (7, 3)
    # the order seed's epochs: one permutation each, the same for the same seed
    a, b = training.epoch_orders(10, 2, 5), training.epoch_orders(10, 2, 5)
    assert all(np.array_equal(x, y) for x, y in zip(a, b)) and sorted(a[0]) == list(range(10))


# ---------------------------------------------------------------- the plan of the grid

@pytest.fixture(scope="module")
def claims(repo):
    return load_claims(repo / "replications")


@pytest.mark.parametrize("tier_name", ["tiny", "micro", "paper"])
def test_the_grid_moves_no_existing_run(claims, tier_name):
    """The seed plumbing and the tier's seed_grid leave every other claim's runs (keys) as they were, and no plain
    run carries a seed parameter."""
    tier = load_tier(tier_name)
    bare = copy.deepcopy(tier)
    del bare["finetune"]["seed_grid"]
    others = [c for c in claims if c.id != P12]
    keys = lambda t: [r.key for p in P.plan_all(others, t) for r in p.score_runs()]  # noqa: E731
    assert keys(tier) == keys(bare)
    plain = [r for p in P.plan_all(others, tier) for r in p.score_runs() if r.kind == "finetune"]
    assert plain and not any({"head_seed", "order_seed", "seeds"} & set(r.params) for r in plain)


@pytest.mark.parametrize("tier_name, points, shared_pairs", [
    ("tiny", 4, 1),  # (1, 1): the LoRA claim's full fine-tuning of the micro-BERT, seed 1
    ("micro", 9, 3),  # (s, s): the prompt-tuning ladder's medium full fine-tuning (the micro-BERT), seeds 1-3
    ("paper", 25, 0),  # no other claim fully fine-tunes bert-base-uncased
])
def test_grid_plan(claims, tier_name, points, shared_pairs):
    tier = load_tier(tier_name)
    plans = P.plan_all(claims, tier)
    mine = next(p for p in plans if p.claim.id == P12)
    pm = mine.measurements["grid"]
    grid = tier["finetune"]["seed_grid"]
    assert pm.status == "ok" and list(pm.points) == list(range(points)) == list(range(len(grid["head"]) * len(grid["order"])))
    # the claim's tasks the tier runs (micro skips CoLA and RTE; tiny runs MRPC only once plan.skipped_tasks adds
    # glue.plan.grid_skipped)
    tasks = [t for t in mine.claim.protocol["benchmarks"] if t not in P.skipped_tasks(mine.claim, tier)]
    assert all([r.task for r in rs] == tasks for rs in pm.points.values())
    assert len(pm.runs) == points * len(tasks) == len({r.key for r in pm.runs})
    # head-major: x = head index * len(order) + order index; the order seed is the run's seed
    pairs = [training.run_seeds(rs[0].params, rs[0].seed) for rs in pm.points.values()]
    assert pairs == [(h, o) for h in grid["head"] for o in grid["order"]]
    assert all("seeds" not in r.params and ("head_seed" in r.params) == (r.params.get("head_seed", r.seed) != r.seed)
               for r in pm.runs)
    others = {r.key for p in plans if p is not mine for r in p.score_runs()}
    shared = [r for r in pm.runs if r.key in others]
    assert len(shared) == shared_pairs * len(tasks)
    assert all(training.run_seeds(r.params, r.seed)[0] == r.seed for r in shared)  # only the diagonal is shared


def test_grid_tasks_of_a_test_tier(repo):
    tiny = load_tier("tiny")
    assert set(grid_skipped(_claim(repo), tiny)) == {"RTE", "CoLA", "SST-2"}
    assert "MRPC only" in grid_skipped(_claim(repo), tiny)["RTE"]
    assert grid_skipped(_claim(repo), load_tier("micro")) == {}
    assert grid_skipped(_claim(repo, "peft/lora-matches-finetuning"), tiny) == {}  # only a claim that sweeps seeds


def test_seed_params_are_validated(repo, tmp_path):
    pairs = _variant(repo, tmp_path, seeds=[[1, 2], [2, 1], [3, 3]])
    pm = P.plan_claim(pairs, load_tier("micro")).measurements["grid"]
    assert [training.run_seeds(rs[0].params, rs[0].seed) for rs in pm.points.values()] == [(1, 2), (2, 1), (3, 3)]
    for bad in (3, "some", [[1, 2]], [[1, 2], [1, 2]], [[1, 2, 3], [1, 1]], [[1, True], [2, 2]]):
        with pytest.raises(UserError, match=r"params.seeds.*must be 'all'"):
            _variant(repo, tmp_path, seeds=bad)
    tier = load_tier("micro")
    del tier["finetune"]["seed_grid"]
    pm = P.plan_claim(_claim(repo), tier).measurements["grid"]
    assert pm.status == "not-run" and "finetune.seed_grid" in pm.reason


def test_tier_seed_grid_is_validated(repo, tmp_path):
    data = yaml.safe_load((repo / "workflows" / "tiers" / "tiny.yaml").read_text())
    for grid, field in (({"head": [1, 1], "order": [1]}, "head"), ({"head": [1], "order": [2], "tasks": ["XNLI"]}, "tasks"),
                        ({"head": [1]}, "'order' is required")):
        data["finetune"]["seed_grid"] = grid
        path = tmp_path / "t.yaml"
        path.write_text(yaml.safe_dump(data))
        with pytest.raises(UserError, match=rf"t.yaml: field 'finetune.seed_grid.*{field}"):
            load_tier(str(path))


# ---------------------------------------------------------------- a synthetic verdict

def _write_grid(cplan, root: Path, accuracy, failed=frozenset(), n: int = 400):
    """Predictions for every grid run: accuracy(x, task) right answers (nested, so a higher accuracy is right
    wherever a lower one is), or constant predictions for the (x, task) in `failed`."""
    rng = np.random.default_rng(0)
    gold = {t: rng.integers(0, 2, n) for t in ("MRPC", "SST-2")}
    order = rng.permutation(n)
    pm = cplan.measurements["grid"]
    for x, runs in [(x, rs) for p in cplan.every_model() for x, rs in p.measurements["grid"].points.items()]:
        for run in runs:
            g = gold[run.task]
            if (x, run.task) in failed:
                pred = np.ones(n)
            else:
                pred = g.copy()
                wrong = order[int(accuracy(x, run.task) * n):]
                pred[wrong] = 1 - pred[wrong]
            out = Path(run.path(str(root)))
            atomic_save_npz(out.with_name("predictions.npz"), **{f"{run.task}::pred": pred, f"{run.task}::gold": g,
                                                                  f"{run.task}::subsets": np.full(n, run.task),
                                                                  f"{run.task}::index": np.arange(n)})
            values = {"benchmarks": {run.task: {"accuracy": 100 * float((pred == g).mean())}}}
            if (x, run.task) in failed:
                values["degenerate"] = f"{run.task}: constant predictions (all 1)"
            atomic_write_json(out, {"values": values})
    return pm


def test_synthetic_spread_holds_with_failed_runs(repo, tmp_path):
    """A 3 x 3 grid at micro (MRPC, SST-2): accuracies 66-82 across seed pairs, two MRPC runs collapsed to one class.
    The spread holds on both tasks; the failed runs are out of the spread and counted; CoLA and RTE are not run."""
    tier = with_overrides(load_tier("micro"), {"bootstrap.resamples": 200})
    cplan = P.plan_claim(_claim(repo), tier)
    pm = _write_grid(cplan, tmp_path, lambda x, t: 0.66 + 0.02 * x, failed={(1, "MRPC"), (5, "MRPC")})
    verdict = decide_claim(cplan, tier, str(tmp_path))
    checks = {c["details"][0]["on"]: c for c in verdict["checks"]}
    assert {t: c["outcome"] for t, c in checks.items()} == {"MRPC": "holds", "RTE": "not-run", "CoLA": "not-run",
                                                             "SST-2": "holds"}
    mrpc = checks["MRPC"]["details"][0]
    assert mrpc["failed"] == {"runs": 2, "of": 9, "share": pytest.approx(2 / 9)}
    assert mrpc["estimate"] == pytest.approx(16.0, abs=0.5) and mrpc["ci_low"] > 1.0  # 66 to 82, failed left out
    assert checks["SST-2"]["details"][0]["failed"]["runs"] == 0
    assert [p["x"] for p in verdict["measurements"]["grid"]["curve"]] == list(range(9))
    # each factor's share: here accuracy grows with x = 3 * head index + order index, so the head seed dominates
    summary = seed_variance.grid_summary(pm.runs, str(tmp_path), {"MRPC": "accuracy", "SST-2": "accuracy"})
    # the verdict carries it for the report (compared as JSON: a one-level factor's p-value is NaN)
    assert json.dumps(verdict["measurements"]["grid"]["seed_variance"], sort_keys=True) == json.dumps(summary, sort_keys=True)
    from plmclaims.report import markdown
    row = next(line for line in markdown([verdict], tier).splitlines() if line.startswith(f"| `{P12}` | MRPC |"))
    assert "| 3 x 3 |" in row and "| 2/9 |" in row
    sst = summary["SST-2"]
    assert sst["failed"] == 0 and sst["grid"][0] == pytest.approx([66.0, 68.0, 70.0])
    assert sst["decomposition"]["head"] == pytest.approx(0.9, abs=0.01) and sst["decomposition"]["residual"] < 1e-6
    assert summary["MRPC"]["failed"] == 2 and summary["MRPC"]["failed_share"] == pytest.approx(2 / 9)


def test_a_run_without_the_claims_metric_is_scored_from_its_predictions(repo, tmp_path):
    """A causal LM's lm-eval run records accuracy alone; the grid's CoLA cell is its Matthews correlation, computed
    from its predictions as the verdict computes it (found by the workstation tier's rehearsal)."""
    from plmclaims.evaluation import glue_metrics

    tier = with_overrides(load_tier("micro"), {"bootstrap.resamples": 200})
    pm = _write_grid(P.plan_claim(_claim(repo), tier), tmp_path, lambda x, t: 0.7)
    for run in pm.runs:  # the same runs, recorded as a CoLA run that names accuracy only
        out = Path(run.path(str(tmp_path)))
        with np.load(out.with_name("predictions.npz")) as npz:
            gold, pred = npz[f"{run.task}::gold"], npz[f"{run.task}::pred"]
        run.spec["fields"]["task"] = "CoLA"
        out = Path(run.path(str(tmp_path)))
        atomic_save_npz(out.with_name("predictions.npz"), **{"CoLA::pred": pred, "CoLA::gold": gold})
        atomic_write_json(out, {"values": {"benchmarks": {"CoLA": {"accuracy": 100 * float((pred == gold).mean())}}}})
    summary = seed_variance.grid_summary(pm.runs, str(tmp_path), {"CoLA": "matthews"})
    expected = glue_metrics.score("CoLA", gold, pred)["matthews"]
    assert summary["CoLA"]["grid"][-1][-1] == pytest.approx(expected) and 0 < expected < 100


def test_synthetic_seeds_that_agree_contradict(repo, tmp_path):
    tier = with_overrides(load_tier("micro"), {"bootstrap.resamples": 200})
    cplan = P.plan_claim(_claim(repo), tier)
    _write_grid(cplan, tmp_path, lambda x, t: 0.75)
    verdict = decide_claim(cplan, tier, str(tmp_path))
    judged = [c for c in verdict["checks"] if c["outcome"] != "not-run"]
    assert [c["outcome"] for c in judged] == ["contradicted", "contradicted"]
    assert all(c["details"][0]["ci_high"] <= 1.0 for c in judged)
    assert verdict["verdict"] == "not-reproduced"


# ---------------------------------------------------------------- the decomposition

def test_decomposition_of_a_hand_made_grid():
    additive = np.array([[0.0, 1.0, 2.0], [2.0, 3.0, 4.0]])  # head effects -1, +1; order effects -1, 0, +1
    d = seed_variance.decompose(additive)  # SS head 3 * 2 = 6, order 2 * 2 = 4, total 10
    assert (d["head"], d["order"], d["residual"]) == pytest.approx((0.6, 0.4, 0.0))
    noisy = additive + np.array([[1.0, -1.0, 0.0], [-1.0, 1.0, 0.0]])  # an interaction: residual SS 4
    d = seed_variance.decompose(noisy)
    assert (d["head"], d["order"], d["residual"]) == pytest.approx((6 / 14, 4 / 14, 4 / 14))
    assert d["head_p"] == pytest.approx(f_dist.sf((6 / 1) / (4 / 2), 1, 2))  # F = 3 on (1, 2) degrees of freedom
    assert d["order_p"] == pytest.approx(f_dist.sf((4 / 2) / (4 / 2), 2, 2))
    assert seed_variance.decompose(np.full((2, 2), 5.0))["head"] == 0.0  # no variance: no share


def test_an_incomplete_grid_is_not_decomposed():
    cells = {(1, 1): 70.0, (1, 2): 72.0, (2, 1): 75.0}
    s = seed_variance.task_summary(cells, {(2, 1)})
    assert s["decomposition"] is None and s["grid"] == [[70.0, 72.0], [75.0, None]]
    assert s["failed_share"] == pytest.approx(1 / 3) and s["spread"] == pytest.approx(5.0)
    json.dumps(s)  # the verdict JSON can carry it


def test_a_curve_with_too_few_usable_points_says_so(repo, tmp_path):
    """A spread over 9 runs of which 8 collapsed, and a 1 x 1 grid (as CI's rehearsal cuts it): no shape to judge,
    and the reason says how many points were usable rather than an empty list of degenerate runs."""
    tier = with_overrides(load_tier("micro"), {"bootstrap.resamples": 50})
    cplan = P.plan_claim(_claim(repo), tier)
    _write_grid(cplan, tmp_path, lambda x, t: 0.7, failed={(x, "MRPC") for x in range(1, 9)})
    verdict = decide_claim(cplan, tier, str(tmp_path))
    mrpc = next(c for c in verdict["checks"] if c["details"][0]["on"] == "MRPC")
    reason = mrpc["details"][0]["reason"]
    assert mrpc["outcome"] == "inconclusive" and "1 usable point(s)" in reason
    # the reason counts all 8 collapsed runs but names only the first few; claims.json keeps every one
    assert "8 point(s) without a number: " in reason and reason.count("constant predictions") == 3 and "and 5 more" in reason
    listed = [p.get("degenerate", {}).get("MRPC") for m in verdict["measurements"].values() for p in m.get("curve", [])]
    assert sum(x is not None for x in listed) == 8
    one = with_overrides(tier, {"finetune.seed_grid": {"head": [1], "order": [1]}})
    cplan = P.plan_claim(_claim(repo), one)
    _write_grid(cplan, tmp_path / "one", lambda x, t: 0.7)
    sst = next(c for c in decide_claim(cplan, one, str(tmp_path / "one"))["checks"] if c["details"][0]["on"] == "SST-2")
    assert sst["outcome"] == "inconclusive"
    assert sst["details"][0]["reason"] == "1 usable point(s) on the curve, a shape needs 2 or more"


def test_the_claim_on_a_causal_lm_is_a_seed_curve_of_its_full_finetuning(repo, tmp_path):
    """P12 on the real pre-trained LM (models: causal-lm): one point per seed of the LM budget, each the lm-tasks
    family's full fine-tuning on the tasks the tier fine-tunes the LM on (SST-2 at micro), the very runs the PEFT
    family's LM variant plans; seeds 3 points apart spread by more than 1 point, and the LM is the headline model."""
    tier = with_overrides(load_tier("micro"), {"bootstrap.resamples": 200})
    cplan = P.plan_claim(_claim(repo, models=True), tier)
    lm = cplan.models["causal-lm"].measurements["grid"]
    assert list(lm.points) == [0, 1, 2] and all(len(rs) == 1 and rs[0].task == "SST-2" for rs in lm.points.values())
    assert {r.kind for r in lm.runs} == {"lm"} and [r.seed for r in lm.runs] == tier["lm"]["seeds"]
    peft = P.plan_claim(load_claim(repo / "replications" / "peft/prefix-tuning-matches-finetuning.yaml",
                                   repo / "replications"), tier)
    assert {r.key for r in lm.runs} <= {r.key for r in peft.score_runs()}  # no new run: the PEFT claim's own
    _write_grid(cplan, tmp_path, lambda x, t: 0.70 + 0.03 * x)
    v = decide_claim(cplan, tier, str(tmp_path))
    assert v["headline_model"] == "causal-lm" and "SmolLM2" in v["headline_note"]
    sst = next(c for c in v["checks"] if c["details"][0]["on"] == "SST-2")
    assert sst["outcome"] == "holds", sst
    assert {c["details"][0]["on"] for c in v["checks"] if c["outcome"] == "not-run"} >= {"MRPC"}
