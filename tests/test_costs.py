"""The cost plan (`plmclaims plan`): per-claim and total figures from the planned runs and a throughput table."""
from __future__ import annotations

import copy
import subprocess
import sys

import pytest

from plmclaims import costs, plan_report
from plmclaims.claims import load_claims
from plmclaims.models import microbert
from plmclaims.plan import all_runs, plan_all
from plmclaims.tiers import load_tier

TABLE = {"device": "test CPU", "device_type": "cpu", "dtype": "float32", "date": "2000-01-01", "torch": "x",
         "architectures": {
             "bert-base-uncased": {"model_type": "bert", "params": 100_000_000, "layers": 12, "hidden": 768, "heads": 12,
                                   "assets": ["google-bert/bert-base-uncased"], "forward_tokens_per_s": 1000.0,
                                   "train_tokens_per_s": 250.0},
             "micro-bert": {"model_type": "bert", "params": 6_000_000, "layers": 4, "hidden": 256, "heads": 4,
                            "assets": ["workflow:pretrain-mlm"], "forward_tokens_per_s": 5000.0, "train_tokens_per_s": 2000.0}}}


@pytest.fixture(scope="module")
def paper(repo):
    tier = load_tier("paper")
    return tier, plan_all(load_claims(repo / "replications"), tier)


def test_total_is_per_claim_sum_minus_shared_runs(paper):
    tier, plans = paper
    res = costs.plan_costs(plans, TABLE)
    per_claim_runs = sum(sum(c["runs"].values()) for c in res["claims"].values())
    unique = all_runs(r for p in plans for r in p.score_runs())
    assert sum(res["total"]["runs"].values()) == len(unique) == per_claim_runs - res["shared_extra"]
    assert res["shared_extra"] > 0  # the lexical controls and the bert-base encodes are shared between STS claims
    # steps and hours: per-claim sums minus each shared run's figures counted once too many
    owners = {}
    for p in plans:
        for k in all_runs(p.score_runs()):
            owners[k] = owners.get(k, 0) + 1
    extra = [costs.run_cost(unique[k], TABLE) for k, n in owners.items() for _ in range(n - 1)]
    for field in ("steps", "examples", "seconds"):
        summed = sum(c[field] for c in res["claims"].values()) - sum(getattr(e, field) for e in extra)
        assert res["total"][field] == pytest.approx(summed)
    assert res["total"]["seconds"] > 0 and res["total"]["steps"] > 0


def test_a_run_shared_by_two_claims_is_counted_once(paper):
    tier, plans = paper
    sts = [p for p in plans if p.claim.id in ("sts/glove-avg-beats-bert-avg", "sts/whitening-improves-bert")]
    a, b = (set(all_runs(p.score_runs())) for p in sts)
    assert a & b  # both read the bert-base encodes and the lexical controls
    res = costs.plan_costs(sts, TABLE)
    assert sum(res["total"]["runs"].values()) == len(a | b)
    one = costs.plan_costs(sts[:1], TABLE)["total"]["seconds"]
    two = costs.plan_costs(sts[1:], TABLE)["total"]["seconds"]
    shared = sum(costs.run_cost(all_runs(sts[0].score_runs())[k], TABLE).seconds for k in a & b)
    assert shared > 0 and res["total"]["seconds"] == pytest.approx(one + two - shared)


def test_steps_follow_the_budget(paper):
    tier, plans = paper
    run = next(r for p in plans for r in p.score_runs() if r.kind == "finetune" and r.task == "RTE")
    c = costs.run_cost(run, TABLE)
    budget = run.spec["tier"]["finetune"]["budget"]  # the run's own: its method's recipe over the tier's budget
    assert c.steps == budget["epochs"] * -(-costs.GLUE_TRAIN["RTE"] // budget["batch_size"])
    assert c.examples == budget["epochs"] * costs.GLUE_TRAIN["RTE"]


def test_a_tier_without_training_has_zero_steps(repo):
    tier = copy.deepcopy(load_tier("paper"))
    plans = plan_all(load_claims(repo / "replications", ["sts"]), tier)  # encoding and scoring only
    res = costs.plan_costs(plans, TABLE)
    assert res["total"]["steps"] == 0 and res["total"]["examples"] == 0
    assert res["total"]["seconds"] > 0  # the encodes still cost time


def test_cli_prints_the_table_for_the_tiny_tier(repo, tmp_path):
    table = tmp_path / "t.json"
    import json

    table.write_text(json.dumps(TABLE))
    res = subprocess.run([sys.executable, "-m", "plmclaims.cli", "plan", "--tier", "tiny", "--claims-dir",
                          str(repo / "replications"), "--claims", "peft/*", "--throughput", str(table)],
                         capture_output=True, text=True, cwd=repo, timeout=300)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "tier tiny: 4 claims" in out and "test CPU" in out and "scale poorly to a GPU" in out
    assert "peft/lora-matches-finetuning" in out and "sts/" not in out
    total = next(line for line in out.splitlines() if line.startswith("total"))
    assert int(total.split()[1]) > 0 and "CPU-h" in out and "peak memory" in out


def test_committed_table_is_read(repo):
    path, table = costs.load_table()
    assert path.parent == costs.TABLE_DIR and table["architectures"]
    for name in ("bert-base-uncased", "roberta-base", "bert-large-cased", "t5-small", "t5-base", "gpt2-medium", "micro-bert"):
        row = table["architectures"][name]
        assert row["forward_tokens_per_s"] > 0 and row["train_tokens_per_s"] > 0 and row["params"] > 1e6


def _runs(plans, kind):
    return [r for r in all_runs(r for p in plans for r in p.score_runs()).values() if r.kind == kind]


def test_a_finetuned_run_costs_exactly_its_finetune_twin(paper):
    tier, plans = paper
    twins = {(r.instance, r.method, r.task, r.seed): r for r in _runs(plans, "finetune")}
    pairs = [(r, twins[(r.instance, r.method, r.task, r.seed)]) for r in _runs(plans, "finetuned")
             if (r.instance, r.method, r.task, r.seed) in twins]
    assert pairs  # the CKA and compression claims fine-tune the same models the GLUE claims do
    for kept, twin in pairs:
        a, b = costs.run_cost(kept, TABLE), costs.run_cost(twin, TABLE)
        assert a.steps == b.steps > 0 and a.examples == b.examples
        assert a.seconds == pytest.approx(b.seconds) and a.seconds > 0 and a.peak_mb == pytest.approx(b.peak_mb)


def test_compress_glue_head_pruning_pays_for_its_importance_pass(paper):
    tier, plans = paper
    runs = {(r.task, r.method): r for r in _runs(plans, "compress-glue")}
    task = next(t for t, m in runs if m == "head-pruning")
    plain, pruned = costs.run_cost(runs[(task, "uncompressed")], TABLE), costs.run_cost(runs[(task, "head-pruning")], TABLE)
    dev_s = 2 * 100e6 * costs.GLUE_DEV[task] * costs.TOKENS[task] / (2 * 100e6 * 1000.0)  # forward over dev only
    assert plain.seconds == pytest.approx(dev_s)
    n = min(tier["compression"].get("importance_pairs") or costs.GLUE_TRAIN[task], costs.GLUE_TRAIN[task])
    importance_s = 4 * 100e6 * n * costs.TOKENS[task] / (6 * 100e6 * 250.0)  # no weight gradients: 4 x, not 6 x
    assert pruned.seconds == pytest.approx(dev_s + importance_s)
    smaller = copy.deepcopy(runs[(task, "head-pruning")])
    smaller.spec["tier"]["compression"]["importance_pairs"] = 100
    assert plain.seconds < costs.run_cost(smaller, TABLE).seconds < pruned.seconds


def test_cka_runs_two_forward_passes_over_dev(paper):
    tier, plans = paper
    run = _runs(plans, "cka")[0]
    c = costs.run_cost(run, TABLE)
    assert c.steps == 0 and c.seconds == pytest.approx(2 * costs.GLUE_DEV[run.task] * costs.TOKENS[run.task] / 1000.0)


def test_attention_maps_gradient_pass_costs_extra(paper):
    tier, plans = paper
    run = _runs(plans, "attention-maps")[0]
    assert run.params.get("gradient")
    with_grad = costs.run_cost(run, TABLE).seconds
    no_grad = copy.deepcopy(run)
    no_grad.spec["params"] = {}
    n = costs.UD_SENTENCES[run.split] * costs.UD_TOKENS
    assert costs.run_cost(no_grad, TABLE).seconds == pytest.approx(n / 1000.0)
    assert with_grad == pytest.approx(n / 1000.0 + 4 * n / (6 * 250.0))


def test_transfer_hours_scale_with_steps_and_sequence_length(paper):
    tier, plans = paper
    run = next(r for r in _runs(plans, "transfer") if r.task == "listops")
    base = costs.run_cost(run, TABLE)
    b = run.spec["tier"]["transfer"]["budget"]
    assert base.steps == b["steps"] and base.examples == b["steps"] * b["batch_size"]
    test_s = 2 * b["test_examples"] * 512 / (2 * 1000.0)
    doubled = copy.deepcopy(run)
    doubled.spec["tier"]["transfer"]["budget"]["steps"] *= 2
    assert costs.run_cost(doubled, TABLE).seconds - test_s == pytest.approx(2 * (base.seconds - test_s))
    shorter = copy.deepcopy(run)
    shorter.spec["tier"]["transfer"]["tasks"]["listops"]["max_length"] = 256  # every item is padded to it
    assert costs.run_cost(shorter, TABLE).seconds == pytest.approx(base.seconds / 2)
    assert base.seconds > 0 and base.peak_mb > 0


def test_cpu_rules_are_marked_not_counted(paper):
    tier, plans = paper
    out = plan_report.render(plans, tier, costs.TABLE_DIR / "t.json", TABLE)
    rows = {line.split()[0]: line for line in out.splitlines() if line[:1].isalpha() and len(line.split()) >= 3}
    for rule in ("cka-layer", "geometry", "attention", "probe"):
        assert "(CPU work, not counted)" in rows[rule] and "0.000" not in rows[rule]
    for rule in ("finetuned", "compress-glue", "cka", "attention-maps", "transfer"):
        assert "GiB" in rows[rule] and float(rows[rule].split()[2].replace(",", "")) > 0


def test_a_released_finetune_of_a_measured_base_costs_at_the_base_row(repo):
    """The released contrastive checkpoints are not in the throughput table; each runs at the row of its published
    shape (DeCLUTR and SimCSE-RoBERTa: roberta-base; DiffCSE, PromptBERT: bert-base-uncased), not at an unknown cost."""
    _, table = costs.load_table()
    tier = load_tier("paper")
    got = {a: costs.architecture(tier["assets"][a], table) for a in
           ("declutr-base", "unsup-simcse-roberta-base", "diffcse-bert-base-sts", "promptbert-bert-base")}
    assert {a: arch.name for a, arch in got.items()} == {
        "declutr-base": "roberta-base", "unsup-simcse-roberta-base": "roberta-base",
        "diffcse-bert-base-sts": "bert-base-uncased", "promptbert-bert-base": "bert-base-uncased"}
    assert not any(arch.scaled for arch in got.values())
    # a hub model of no published shape stays unknown rather than borrowing a row
    assert costs.architecture({"kind": "transformer", "source": "hub", "id": "someone/unknown-model"}, table) is None


def test_pretraining_is_costed_at_its_own_steps_and_size(repo):
    """The micro-BERT's pre-training is a run like any other: its steps, examples and hours (it was priced at zero)."""
    tier = load_tier("micro")
    plans = plan_all(load_claims(repo / "replications", ["sts/whitening-improves-bert"]), tier)
    run = next(r for p in plans for r in all_runs(p.score_runs()).values() if r.kind == "pretrain")
    c = costs.run_cost(run, TABLE)
    train = tier["assets"][run.asset]["train"]
    assert c.steps == train["steps"] and c.examples == train["steps"] * train["batch_size"]
    assert c.arch == "micro-bert (scaled)" and c.seconds > 0 and c.peak_mb > 0 and not c.unknown
    longer = copy.deepcopy(run)
    longer.spec["tier"]["assets"][run.asset]["train"]["steps"] *= 2
    assert costs.run_cost(longer, TABLE).seconds == pytest.approx(2 * c.seconds)


def test_pretraining_is_priced_at_the_rate_timed_with_its_mlm_head(repo):
    """A table that timed pre-training itself (MLM head, the tier's shape) prices it at that rate, not at the encoder's
    (2.7x too cheap on the micro tier); the MLM logits add to its peak memory."""
    tier = load_tier("micro")
    plans = plan_all(load_claims(repo / "replications", ["sts/whitening-improves-bert"]), tier)
    run = next(r for p in plans for r in all_runs(p.score_runs()).values() if r.kind == "pretrain")
    encoder_only = costs.run_cost(run, TABLE)
    table = copy.deepcopy(TABLE)
    table["architectures"]["micro-bert"]["pretrain_tokens_per_s"] = 500.0  # a quarter of train_tokens_per_s
    with_head = costs.run_cost(run, table)
    assert with_head.seconds == pytest.approx(4 * encoder_only.seconds)  # TABLE has no start-up to add
    spec = tier["assets"][run.asset]
    masked = spec["train"]["batch_size"] * spec["model"]["max_length"] * microbert.MASK_PROBABILITY
    logits_mb = 3 * 4 * masked * spec["model"]["vocab"] / 2**20  # pre-training scores the masked positions only
    assert with_head.peak_mb == pytest.approx(encoder_only.peak_mb) and encoder_only.peak_mb > logits_mb
    # other kinds on the same row keep the encoder's rate
    encode = next(r for p in plans for r in all_runs(p.score_runs()).values()
                  if r.kind == "encode" and "micro-bert" in (r.instance or ""))
    assert costs.run_cost(encode, table).seconds == pytest.approx(costs.run_cost(encode, TABLE).seconds)


def test_throughput_times_pretraining_at_the_tiers_shape_with_its_mlm_head(repo):
    """benchmarks/throughput.py reads the pre-training shape from the tier file for the rows the workflow pre-trains
    (none for a released model), and its timed step trains an MLM model on the workflow's pre-training loss: the
    head scores the labelled positions only, and the gradient flows back through it."""
    import importlib.util

    import torch
    import transformers

    spec = importlib.util.spec_from_file_location("throughput_bench", repo / "benchmarks" / "throughput.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    micro = load_tier("micro")["assets"]["micro-bert"]
    assert bench.pretrain_shape("micro-bert") == {"seq_len": micro["model"]["max_length"],
                                                  "train_batch": micro["train"]["batch_size"]}
    assert bench.pretrain_shape("bert-base-uncased") is None
    cfg = transformers.BertConfig(vocab_size=200, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=16)
    model = transformers.BertForMaskedLM(cfg)
    scored, backward = [], []
    model.cls.register_forward_hook(lambda m, args, out: scored.append(args[0].shape))
    model.cls.register_full_backward_hook(lambda m, grad_in, grad_out: backward.append(grad_out[0].shape))
    rate, _ = bench.time_steps(model, torch.device("cpu"), 4, 8, True, None, 0, 1)
    assert rate > 0 and len(scored) == 1 and backward == [torch.Size([scored[0][0], 200])]
    # BERT's share of the 4 x 8 positions reaches the head (rows of hidden vectors), not all and not none
    assert len(scored[0]) == 2 and 0 < scored[0][0] < 4 * 8


def test_the_plan_prints_the_wall_time_of_jobs_side_by_side(paper):
    """A CPU table that measured jobs side by side turns the core-hours into a wall time at that many jobs; a table
    that did not says nothing about wall time."""
    tier, plans = paper
    path = costs.TABLE_DIR / "test.json"
    plain = plan_report.render(plans, tier, path, TABLE)
    total = costs.plan_costs(plans, TABLE)["total"]["seconds"]
    assert "slower beside the others" not in plain and f"at least {costs._hours(total / 2)} h" in plain
    table = {**TABLE, "side_by_side": {"jobs": 2, "slowdown": 1.5, "date": "2000-01-01"}}
    out = plan_report.render(plans, tier, path, table)
    line = next(l for l in out.splitlines() if "slower beside the others" in l)
    assert f"at least {costs._hours(total * 1.5 / 2)} h" in line and "1.50x" in line


def _contrastive(plans, method):
    return next(r for r in _runs(plans, "contrastive") if r.method == method and not r.params.get("released")
                and r.instance.startswith("bert-base-uncased"))  # the row TABLE has


def test_each_contrastive_objective_pays_for_its_own_passes(paper):
    """SimCSE: two trained views; BSL adds its EMA target's forward passes and weights and its trained predictor;
    DiffCSE a second trained BERT (the discriminator) and the generator's forward passes at the generator's size;
    DeCLUTR its anchor and positive spans; PromptBERT its templates; RankEncoder its frozen base and its reference
    corpus, encoded twice; every objective is in the table."""
    from plmclaims.methods.contrastive import OBJECTIVES

    assert set(costs.CONTRASTIVE_STEP) == set(OBJECTIVES)
    tier, plans = paper
    from plmclaims.families.contrastive.plan import estimated_steps

    simcse = _contrastive(plans, "simcse")
    base = costs.run_cost(simcse, TABLE)
    section = simcse.spec["tier"]["contrastive"]  # SimCSE's recipe (its epochs over wiki1m, as steps)
    b = {**section["budget"], "steps": estimated_steps(section["budget"], section["corpus"])}
    n = b["steps"] * b["batch_size"]
    per_seq = min(b["max_length"], 2 * costs.STS_TOKENS)
    evals = (b["steps"] // b["eval_every"] + 2) * 2 * 1500  # STS-B dev's sentences at each evaluation
    eval_s = (evals + costs.STS_SENTENCES["senteval"]) * costs.STS_TOKENS / 1000.0
    train_s = 2 * n * per_seq / 250.0  # 6 x params x tokens at 6 x params x 250 tokens/s
    assert base.seconds == pytest.approx(eval_s + train_s)

    def as_method(method, **params):
        run = copy.deepcopy(simcse)
        run.spec["fields"]["method"] = method
        run.spec["params"] = {**run.params, **params}
        return costs.run_cost(run, TABLE)

    bsl = as_method("bsl")
    head = 3 * (2 * 768 * 7680 + 7680 ** 2)  # three predictor blocks of Linear(d, 10d), Linear(10d, 10d), Linear(10d, d)
    assert bsl.seconds == pytest.approx(base.seconds + 2 * n * per_seq / 1000.0 + 6 * head * 2 * n / (6 * 100e6 * 250.0))
    assert bsl.peak_mb == pytest.approx(base.peak_mb + 4 * 100e6 / 2**20 + 16 * head / 2**20)  # target, predictor
    declutr = as_method("declutr")
    assert declutr.seconds == pytest.approx(eval_s + 3 * n * per_seq / 250.0) and declutr.peak_mb > base.peak_mb
    assert as_method("declutr", num_positives=4).seconds == pytest.approx(eval_s + 5 * n * per_seq / 250.0)
    prompt = as_method("promptbert")
    templates = 2 * b["steps"] * min(b["batch_size"], b["max_length"]) * costs.PROMPT_TOKENS
    assert prompt.seconds == pytest.approx(eval_s + (2 * n * (per_seq + costs.PROMPT_TOKENS) + templates) / 250.0)
    rank = as_method("rankencoder")
    corpus = min(100_000, section["corpus"].get("max_sentences") or 100_000)
    assert rank.seconds == pytest.approx(base.seconds + (n * per_seq + 2 * corpus * costs.STS_TOKENS) / 1000.0)
    assert as_method("rankencoder", corpus_size=10).seconds < rank.seconds
    diffcse = copy.deepcopy(_contrastive(plans, "diffcse"))
    diffcse.spec["tier"]["contrastive"] = copy.deepcopy(section)  # SimCSE's budget, so the two compare step for step
    gen = costs.architecture(tier["assets"][diffcse.params["generator"]], TABLE)
    assert gen is not None and gen.params < 100e6  # distilbert, scaled from the bert row by its own size
    d = costs.run_cost(diffcse, TABLE)
    generator_s = 2 * n * per_seq * gen.params / (100e6 * 1000.0)
    assert d.seconds == pytest.approx(base.seconds + train_s + generator_s)
    assert d.peak_mb > 2 * base.peak_mb  # two trained BERTs and the generator's weights


TABLE_ASSET = {"bert-base-uncased": {"kind": "transformer", "source": "hub", "id": "google-bert/bert-base-uncased"}}


def test_a_released_checkpoint_costs_one_encoding_model_whatever_its_objective(paper):
    """A released DiffCSE or BSL checkpoint is only encoded: no discriminator, target, generator or training batch."""
    tier, plans = paper
    released = next(r for r in _runs(plans, "contrastive") if r.params.get("released"))  # PromptBERT's, at paper

    def as_method(method):
        run = copy.deepcopy(released)
        run.spec["fields"]["method"] = method
        run.spec["tier"]["assets"] = {**run.spec["tier"]["assets"], **TABLE_ASSET}  # a row TABLE has
        run.spec["fields"]["instance"] = "bert-base-uncased"
        return costs.run_cost(run, TABLE)

    plain = as_method("simcse")
    assert plain.steps == 0 and plain.seconds > 0
    for method in ("diffcse", "bsl", "rankencoder", "declutr"):
        c = as_method(method)
        assert c.peak_mb == pytest.approx(plain.peak_mb) and c.seconds == pytest.approx(plain.seconds), method


def test_the_plan_piped_into_a_reader_that_stops_early_ends_quietly(repo):
    """`plmclaims plan | head -1`: the reader closes the pipe before the table is written (here: before anything is);
    the command stops with the shell's SIGPIPE status and no traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "plmclaims.cli", "plan", "--tier", "tiny", "--claims-dir",
                             str(repo / "replications")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=repo, text=True)
    proc.stdout.close()  # the table is printed after planning, seconds later: its write meets a closed pipe
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_a_tables_job_start_up_is_added_once_to_every_priced_run_and_to_no_cpu_rule(paper):
    tier, plans = paper
    started = {**TABLE, "job_startup_s": 7.5}
    unique = all_runs(r for p in plans for r in p.score_runs())
    priced = cpu = 0
    for run in unique.values():
        without, with_startup = costs.run_cost(run, TABLE), costs.run_cost(run, started)
        if run.kind in costs.GPU_KINDS and without.arch:  # a model the table prices: its arithmetic plus one start-up
            assert with_startup.seconds == pytest.approx(without.seconds + 7.5), run
            priced += 1
        else:  # scoring, probes, CKA layers: counted as runs, not hours; an unpriced model stays unpriced
            assert with_startup.seconds == without.seconds == 0, run
            cpu += 1
    assert priced > 100 and cpu > 100
    assert "adds its start-up, 7.5 s" in plan_report.render(plans, tier, costs.TABLE_DIR / "t.json", started)
    assert "job start-up is not priced" in plan_report.render(plans, tier, costs.TABLE_DIR / "t.json", TABLE)


# ---------------------------------------------------------------- what the plan prints: counts, expected time, GPU-h

def test_the_three_counts_are_the_verdicts_runs_the_plans_runs_and_snakemakes_jobs(repo, data_root, tmp_path):
    """`plmclaims validate` counts the runs the verdicts read, the plan every run (with those they read from), and
    Snakemake its jobs; the plan prints all three, and its job count is the one `snakemake -n` plans (tiny tier)."""
    import re

    tier = load_tier("tiny")
    plans = plan_all(load_claims(repo / "replications"), tier)
    res = costs.plan_costs(plans, TABLE)
    n = plan_report.job_counts(plans, res)
    assert n["read"] == len({r.key for p in plans for r in p.score_runs()}) < n["runs"] == len(res["runs"])
    dry = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "2", "--snakefile",
                          str(repo / "Snakefile"), "--directory", str(tmp_path), "--config", "tier=tiny",
                          f"data_root={data_root}",
                          f"claims_dir={repo / 'replications'}"], capture_output=True, text=True, timeout=600)
    assert dry.returncode == 0, dry.stderr[-2000:]
    total = int(re.search(r"^total\s+(\d+)", dry.stdout, re.M).group(1))
    assert n["jobs"] == total
    batched = [k for k in plan_report.batching.BATCHED_KINDS if k in n["jobs_by_rule"]]
    assert sum(n["jobs_by_rule"][k] for k in batched) < sum(1 for r in res["runs"].values() if r.kind in batched)
    out = plan_report.render(plans, tier, costs.TABLE_DIR / "t.json", TABLE)
    assert f"counts: {n['read']} runs the verdicts read" in out and f"{n['jobs']} Snakemake jobs" in out


def test_expected_time_is_the_lower_bound_times_each_rules_measured_factor(paper, tmp_path, monkeypatch):
    """A measured run of the tier (benchmarks/measured/<tier>.json) corrects each priced rule by its factor (measured
    job-seconds / what the plan priced then), gives a rule the plan does not price its measured seconds a run, takes a
    batched rule's saved start-ups off, and turns the sum into a wall time at --cores with the measured packing."""
    import json

    tier, plans = paper
    res = costs.plan_costs(plans, TABLE)
    rule = res["by_rule"]
    measured = {"tier": tier["name"], "commit": "0" * 40, "date": "2000-01-01", "machine": "test", "table": "t.json",
                "cores": 2, "wall_s": 1100.0, "job_seconds": 2000.0,
                "rules": {"finetune": {"runs": 10, "jobs": 10, "job_seconds": 300.0, "planned_s": 100.0},
                          "probe": {"runs": 10, "jobs": 10, "job_seconds": 50.0, "planned_s": 0.0},
                          "verdict": {"runs": 2, "jobs": 2, "job_seconds": 4.0, "planned_s": 0.0}},
                "batch_saves_s": {"probe": 1.0}}
    monkeypatch.setattr(plan_report, "MEASURED_DIR", tmp_path)
    (tmp_path / f"{tier['name']}.json").write_text(json.dumps(measured))
    jobs = plan_report.job_counts(plans, res)["jobs_by_rule"]
    got = plan_report.expected_seconds({**res, "claims_n": len(plans)}, measured, jobs)
    assert got["finetune"] == pytest.approx(3.0 * rule["finetune"]["seconds"])
    assert got["probe"] == pytest.approx(5.0 * rule["probe"]["runs"] - (rule["probe"]["runs"] - jobs["probe"]) * 1.0)
    assert jobs["probe"] < rule["probe"]["runs"] and got["verdict"] == pytest.approx(2.0 * len(plans))
    assert got["contrastive"] is None  # nothing measured for it: left out, and said so
    cpu = {**TABLE, "device_type": "cpu"}
    out = plan_report.render(plans, tier, tmp_path / "t.json", cpu, cores=2)
    line = next(l for l in out.splitlines() if l.strip().startswith("expected:") and " h (" in l)
    known = sum(v for v in got.values() if v is not None)
    assert f"expected: {costs._hours(max(known / 2 * 1.1, 0))} h" in line and "1.10 packing" in line
    assert "nothing measured for" in line and "contrastive" in line
    # a measurement priced with another table is not applied
    other = plan_report.render(plans, tier, tmp_path / "other.json", cpu)
    assert "no measured run of tier paper" in other


def test_a_gpu_tier_without_a_measured_gpu_table_is_an_estimate_from_flops(paper, repo):
    """GPU-hours from FLOPs at the named GPU's dense bf16 peak and the stated utilisation, labelled an estimate;
    per family, with peak memory and prefetch disk (what a workstation tier reads)."""
    tier, plans = paper
    assert plan_report.gpu_tier(tier) and not plan_report.gpu_tier(load_tier("micro"))
    est = plan_report.gpu_estimate(TABLE, "H100-SXM", 0.5)
    for row in est["architectures"].values():  # 2 x params FLOPs a token forward, 6 x with the backward
        assert 2 * row["params"] * row["forward_tokens_per_s"] == pytest.approx(989e12 * 0.5)
        assert 6 * row["params"] * row["train_tokens_per_s"] == pytest.approx(989e12 * 0.5)
    run = next(r for r in _runs(plans, "finetune") if r.instance.startswith("bert-base-uncased"))
    plain = costs.run_cost(run, TABLE)
    fast = costs.run_cost(run, est)
    assert fast.steps == plain.steps and 0 < fast.seconds < plain.seconds
    with pytest.raises(Exception, match="allowed values: A100"):
        plan_report.gpu_estimate(TABLE, "nosuch")
    res = subprocess.run([sys.executable, "-m", "plmclaims.cli", "plan", "--tier", "paper", "--gpu", "H100-SXM",
                          "--mfu", "0.4", "--claims-dir", str(repo / "replications")], capture_output=True, text=True,
                         cwd=repo, timeout=300)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "GPU-hours ESTIMATED from FLOPs" in out and "H100-SXM" in out and "989 TFLOP/s, at 40% utilisation" in out
    assert "GPU-h" in out and "CPU-h" not in out and "prefetch disk" in out
    fams = out[out.index("\nfamily "):]
    assert "glue " in fams and "contrastive " in fams and "GiB" in fams


def test_a_tier_states_the_gpu_and_utilisation_its_plan_is_priced_at(repo, tmp_path):
    """gpu_estimate in the tier file: `plmclaims plan` prices at it unless --gpu or --mfu say otherwise."""
    over = tmp_path / "priced.yaml"
    over.write_text("base: paper\nname: priced\ngpu_estimate: {gpu: H100-SXM, mfu: 0.5}\n")

    def plan(*args):
        res = subprocess.run([sys.executable, "-m", "plmclaims.cli", "plan", "--tier", str(over), "--claims-dir",
                              str(repo / "replications"), "--claims", "sts/released-simcse-reproduces", *args],
                             capture_output=True, text=True, cwd=repo, timeout=300)
        assert res.returncode == 0, res.stderr
        return res.stdout.splitlines()[0]
    assert "NVIDIA H100-SXM's dense bf16 peak, 989 TFLOP/s, at 50% utilisation" in plan()
    assert "NVIDIA A100's dense bf16 peak, 312 TFLOP/s, at 50% utilisation" in plan("--gpu", "A100")
    assert "NVIDIA H100-SXM's dense bf16 peak, 989 TFLOP/s, at 20% utilisation" in plan("--mfu", "0.2")


def test_the_gpu_estimate_prices_float32_loops_at_the_float32_peak(paper):
    """The fine-tuning, causal-LM and frozen-transfer loops compute in float32 (no autocast; torch leaves TF32 off), so
    the estimate prices them at the GPU's float32 peak, with 32-bit activations; the rules in bf16 autocast (contrastive
    training, encoding) at its bf16 peak."""
    tier, plans = paper
    est = plan_report.gpu_estimate(TABLE, "A100", 0.5)
    bert = est["architectures"]["bert-base-uncased"]
    assert 6 * bert["params"] * bert["float32_train_tokens_per_s"] == pytest.approx(19.5e12 * 0.5)
    assert 2 * bert["params"] * bert["float32_forward_tokens_per_s"] == pytest.approx(19.5e12 * 0.5)
    assert set(plan_report.GPU_FP32_TFLOPS) == set(plan_report.GPU_BF16_TFLOPS)
    assert all(plan_report.GPU_FP32_TFLOPS[g] < plan_report.GPU_BF16_TFLOPS[g] for g in plan_report.GPU_FP32_TFLOPS)
    finetune = next(r for r in _runs(plans, "finetune") if r.instance.startswith("bert-base-uncased"))
    bf16_only = copy.deepcopy(est)  # the same table without float32 rates: every rule at the bf16 peak
    for row in bf16_only["architectures"].values():
        del row["float32_train_tokens_per_s"], row["float32_forward_tokens_per_s"]
    start = est["job_startup_s"]
    f32, bf16 = costs.run_cost(finetune, est), costs.run_cost(finetune, bf16_only)
    assert (f32.seconds - start) == pytest.approx((bf16.seconds - start) * 312 / 19.5)
    assert f32.peak_mb > bf16.peak_mb  # float32 activations
    simcse = next(r for r in _runs(plans, "contrastive") if r.method == "simcse" and not r.params.get("released"))
    assert costs.run_cost(simcse, est).seconds == pytest.approx(costs.run_cost(simcse, bf16_only).seconds)


def test_every_hub_model_of_the_paper_tier_is_sized(paper):
    """No model run is left out of the estimate: the T5 1.1 LM-adapted ladder and GPT-2 small, which the CPU table
    lacks, are sized from their published configurations (KNOWN_SIZES, counted here on torch's meta device)."""
    import torch
    import transformers

    from plmclaims.published import PUBLISHED

    tier, plans = paper
    est = plan_report.gpu_estimate(costs.load_table(device_type="cpu")[1], "A100", 0.35)
    assert costs.plan_costs(plans, est)["total"]["unknown"] == 0
    for repo_id, (params, layers, hidden, heads) in costs.KNOWN_SIZES.items():
        pub = PUBLISHED[repo_id]
        config = dict(pub.config)
        cfg = transformers.AutoConfig.for_model(config.pop("model_type"), **config)
        with torch.device("meta"):
            model = getattr(transformers, pub.architecture)(cfg)
        assert sum(p.numel() for p in model.parameters()) == params, repo_id
        c = pub.config
        assert (layers, hidden, heads) == (c.get("num_layers", c.get("n_layer", c.get("n_layers"))),
                                           c.get("d_model", c.get("n_embd", c.get("dim"))),
                                           c.get("num_heads", c.get("n_head", c.get("n_heads")))), repo_id


def test_job_seconds_per_rule_are_read_from_snakemake_logs(tmp_path):
    """benchmarks/plan_vs_measured.py --snakemake-log: a job runs from the stamp above its rule block to the one above
    its `Finished jobid`; a batch's rule and a causal LM's two jobs count under their run kind; logs of a run resumed
    in pieces add up, and a job that never finished is left out."""
    sys.path.insert(0, str(costs.TABLE_DIR.parent))
    from plan_vs_measured import kind_of_rule, log_jobs

    (tmp_path / "a.log").write_text(
        "[Sat Dec  5 01:00:00 2026]\nlocalrule probe_batch_0123456789_0:\n    input: x\n    jobid: 7\n"
        "[Sat Dec  5 01:00:00 2026]\nrule lm_train:\n    jobid: 8\n"
        "[Sat Dec  5 01:00:30 2026]\nFinished jobid: 7 (Rule: probe_batch_0123456789_0)\n"
        "[Sat Dec  5 01:01:40 2026]\nFinished jobid: 8 (Rule: lm_train)\n"
        "[Sat Dec  5 01:01:40 2026]\nrule encode:\n    jobid: 9\n")
    (tmp_path / "b.log").write_text("[Sat Dec  5 02:00:00 2026]\nrule lm_eval:\n    jobid: 1\n"
                                    "[Sat Dec  5 02:00:05 2026]\nFinished jobid: 1 (Rule: lm_eval)\n")
    rules, wall = log_jobs([tmp_path / "a.log", tmp_path / "b.log"])
    assert rules == {"probe_batch_0123456789_0": [30.0], "lm_train": [100.0], "lm_eval": [5.0]} and wall == 105.0
    assert [kind_of_rule(r) for r in ("probe_batch_0123456789_0", "lm_train", "probe_encode", "cka_layer",
                                      "fit_encode", "verdict")] == ["probe", "lm", "probe-encode", "cka-layer",
                                                                    "fitencode", "verdict"]
