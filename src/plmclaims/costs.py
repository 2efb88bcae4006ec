"""What a tier costs before it runs: runs, training steps and examples, device-hours, peak memory, prefetch disk.

`plmclaims plan --tier T [--claims ...]` prints it. Every figure is read from the planned runs (their specs hold the
budgets they train under) and scaled by FLOPs from a measured throughput table (benchmarks/throughput.py writes
benchmarks/throughput/<device>.json): training costs about 6 x parameters x tokens (4 x for parameter-efficient
methods: no weight gradients for the frozen weights), inference 2 x parameters x tokens. Token counts come from the
published split sizes below and typical tokenised lengths (assumptions, stated here); peak memory is analytic
(weights, gradients and Adam states, plus Korthikanti et al. 2022's activation estimate). Rules that run on the CPU
(scoring, probes, tokenizers, lm-eval task files) are counted as runs, not hours.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from . import families
from .data import synthetic
from .errors import UserError
from .models.microbert import MASK_PROBABILITY
from .plan import ClaimPlan, Run, all_runs

TABLE_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "throughput"

# Published split sizes (examples): GLUE (Wang et al. 2019, Table 1), SentEval's STS test sets with STS-B test and
# SICK-R test (the 7 STS benchmarks, pairs), UD English EWT 2.x (sentences).
GLUE_TRAIN = {"CoLA": 8551, "SST-2": 67349, "MRPC": 3668, "STS-B": 5749, "QQP": 363846, "MNLI": 392702,
              "QNLI": 104743, "RTE": 2490, "WNLI": 635}
GLUE_DEV = {"CoLA": 1043, "SST-2": 872, "MRPC": 408, "STS-B": 1500, "QQP": 40430, "MNLI": 9815, "QNLI": 5463,
            "RTE": 277, "WNLI": 71}
STS_PAIRS = 3108 + 1500 + 3750 + 3000 + 1186 + 1379 + 4927  # STS12-16, STS-B test, SICK-R test
# the union of the seven test sets' sentences, which the encode, compress and contrastive runs encode once (raw text;
# MTEB's SICK-R is all 9927 pairs): counted by benchmarks/encode_cost.py on the release files
STS_SENTENCES = {"senteval": 26_139, "mteb": 27_209}
UD_SENTENCES = {"train": 12543, "dev": 2001, "test": 2077}
DISTILL_SENTENCES = 2 * (5749 + 4500)  # STS-B and SICK train pairs, both sides
# Typical sub-word tokens per example with the special tokens, padded to the batch's longest (an assumption: about
# 1.3 pieces per word plus padding); a sentence pair counts both sides.
TOKENS = {"CoLA": 16, "SST-2": 32, "MRPC": 64, "STS-B": 40, "QQP": 40, "MNLI": 48, "QNLI": 64, "RTE": 96, "WNLI": 48}
STS_TOKENS, UD_TOKENS = 20, 32  # per sentence
BYTES_PER_PARAM = 4  # a float32 checkpoint file
# released models a CPU table leaves out (too slow there): parameters, layers, hidden size, heads of their config.json
KNOWN_SIZES = {"google-t5/t5-large": (737_668_096, 24, 1024, 16),
               # Lester et al.'s T5 1.1 LM-adapted ladder and GPT-2 small (the pretrained-lm role): counted from their
               # published configurations (plmclaims.published) on torch's meta device, the shared embedding once
               "google/t5-small-lm-adapt": (60_511_616, 8, 512, 6),
               "google/t5-base-lm-adapt": (222_903_552, 12, 768, 12),
               "google/t5-large-lm-adapt": (750_251_008, 24, 1024, 16),
               "openai-community/gpt2": (124_439_808, 12, 768, 12),
               # DiffCSE's generator at paper (DistilBertForMaskedLM of the published config)
               "distilbert/distilbert-base-uncased": (66_985_530, 6, 768, 12)}

# One training step of each contrastive objective as its loss() runs it (methods/contrastive/<name>.py; a test counts
# the sequences with hooks on a tiny model): sequences per batch example forward + backward through weights that train
# ('trained'), forward only through a frozen copy of the encoder ('frozen': BSL's EMA target, RankEncoder's base), and
# forward only through the recipe's generator asset ('generator': DiffCSE's MLM, the encoder's own when none is named);
# 'models': networks of the encoder's size whose weights, gradients and Adam states train (DiffCSE's discriminator)
CONTRASTIVE_STEP = {
    "simcse": {"trained": 2},  # two dropout views
    "consert": {"trained": 2},  # the cut-off view and the token-shuffle view
    "declutr": {},  # 'trained' per document: num_anchors x (1 anchor + num_positives spans), from its settings
    "bsl": {"trained": 2, "frozen": 2},  # online views; the EMA target's views without gradients
    "diffcse": {"trained": 4, "generator": 2, "models": 2},  # encoder and discriminator, two views each
    "promptbert": {"trained": 2},  # both views in their template (PROMPT_TOKENS more), + template-only denoising passes
    "rankencoder": {"trained": 2, "frozen": 1},  # the frozen base scores the batch for the rank targets
}
PROMPT_TOKENS = 10  # [CLS] This sentence : " [X] " means [MASK] . [SEP] around the sentence (an estimate)
# the recipe settings the passes depend on, as the objectives' DEFAULTS set them (a test checks they agree; a tier or
# claim that overrides one is priced at its own value): DeCLUTR's spans, BSL's predictor (blocks of Linear(d, h),
# Linear(h, h), Linear(h, d) with h = mult x d, trained with the encoder), RankEncoder's reference corpus (encoded
# twice per run: by the frozen base before training and by the trained model at test time)
CONTRASTIVE_DEFAULTS = {"declutr": {"num_anchors": 1, "num_positives": 2},
                        "bsl": {"predictor_blocks": 3, "predictor_hidden_mult": 10},
                        "rankencoder": {"corpus_size": 100_000}}


def contrastive_step(method: str, params: dict) -> tuple[dict, dict]:
    """(the objective's passes per step, its recipe settings with the run's overrides)."""
    settings = {**CONTRASTIVE_DEFAULTS.get(method, {}), **params}
    step = dict(CONTRASTIVE_STEP.get(method, {"trained": 2}))
    if method == "declutr":
        step["trained"] = int(settings["num_anchors"]) * (1 + int(settings["num_positives"]))
    return step, settings

# the GPU rules whose model computes in float32 (no autocast: the fine-tuning, causal-LM and frozen-transfer loops, and
# the forward passes of cka, compress-glue and attention-maps); a table with float32 rates (the GPU estimate's: TF32 is
# off by torch's default, so a float32 product runs at the GPU's float32 peak) prices them at those
FLOAT32_KINDS = {"finetune", "finetuned", "lm", "transfer", "cka", "compress-glue", "attention-maps"}
GPU_KINDS = {"pretrain", "encode", "finetune", "finetuned", "lm", "compress", "compress-glue", "probe-encode", "cka",
             "attention-maps", "transfer", "fitencode", "contrastive"}  # the rest (scoring, probes, CKA per layer, geometry) run on the CPU
# sentences per padded batch where the rule fixes it in code: compress-glue's dev pass (training._batches at 64),
# attention-maps (families/intrinsic/runs.py BATCH); cka's token states (an assumption: an encode-sized batch)
DEV_BATCH, ATTENTION_BATCH = 64, 32
RULES = {"lm": "lm_train + lm_eval", "probe-encode": "probe_encode", "lm_tasks": "lm_tasks", "lm_model": "lm_model"}


def load_table(path: str | Path | None = None, device_type: str | None = None) -> tuple[Path, dict] | tuple[None, None]:
    """The throughput table to scale from: `path`; else a committed table of `device_type` ('cuda': a GPU tier's,
    'cpu': a CPU tier's), or (None, None) when none is committed for it; else a GPU table when one is committed, else a
    CPU one."""
    if path is None:
        found = sorted(TABLE_DIR.glob("*.json"))
        tables = [(p, json.loads(p.read_text())) for p in found]
        if device_type is not None:
            return next(((p, t) for p, t in tables if t.get("device_type") == device_type), (None, None))
        if not found:
            raise UserError(f"{TABLE_DIR}: no throughput table; run python benchmarks/throughput.py to measure one")
        return next(((p, t) for p, t in tables if t.get("device_type") == "cuda"), tables[0])
    path = Path(path)
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise UserError(f"{path}: not a throughput table ({type(err).__name__}); write one with benchmarks/throughput.py") from None
    if not isinstance(table.get("architectures"), dict):
        raise UserError(f"{path}: field 'architectures' missing; write the table with benchmarks/throughput.py")
    return path, table


@dataclass
class Arch:
    name: str  # the table row whose measured rate is used
    params: int
    layers: int
    hidden: int
    heads: int
    scaled: bool = False  # the rate is another architecture's (same model type), scaled by FLOPs


def _bert_params(m: dict) -> int:
    h, f, v, n = m["hidden"], m["ffn"], m["vocab"], m.get("max_length", 512)
    return v * h + n * h + 2 * h + m["layers"] * (4 * h * h + 2 * h * f + 9 * h + f)


def _same_shape_row(repo_id: str, rows: dict) -> str | None:
    """The table row measured on a model of the same published shape (model type, depth, width, heads) as `repo_id`:
    a checkpoint fine-tuned from a measured base runs at the base's speed."""
    from .published import published

    pub = published(repo_id)
    if pub is None:
        return None
    c = pub.config
    shape = (c.get("model_type"), c.get("num_hidden_layers"), c.get("hidden_size"), c.get("num_attention_heads"))
    return next((n for n, r in rows.items() if (r["model_type"], r["layers"], r["hidden"], r["heads"]) == shape), None)


def architecture(spec: dict, table: dict) -> Arch | None:
    """The table row (and size) of a tier asset; None for what no transformer runs (static vectors, lexical)."""
    rows = table["architectures"]
    if spec["kind"] == "pretrain-mlm":
        key = "workflow:pretrain-mlm"
    elif spec.get("source") == "package":
        key = f"package:{spec.get('package')}"
    else:
        key = spec.get("id", "")
    name = next((n for n, r in rows.items() if key in r.get("assets", [])), None)
    if name is None and spec.get("source") == "hub":  # a fine-tuned release of a measured base (SimCSE, DeCLUTR, ...):
        name = _same_shape_row(spec.get("id", ""), rows)  # its published configuration's row
    if name is not None and spec["kind"] != "pretrain-mlm":
        r = rows[name]
        return Arch(name, r["params"], r["layers"], r["hidden"], r["heads"])
    model = spec.get("model", {})
    if spec["kind"] in ("pretrain-mlm", "causal-lm") and "hidden" in model:  # a model the workflow builds at its size
        base = name or next((n for n, r in rows.items() if r["model_type"] in ("bert", "llama")), None)
        if base is None:
            return None
        return Arch(base, _bert_params(model), model["layers"], model["hidden"], model["heads"], scaled=True)
    if spec.get("source") == "hub":  # a hub model the table lacks (t5-large on a CPU table): its type's largest row
        from .claims import architecture as model_type

        kind = model_type(spec)
        same = sorted((r["params"], n) for n, r in rows.items() if r["model_type"] == kind)
        size = KNOWN_SIZES.get(spec["id"])
        if same and size:
            return Arch(same[-1][1], *size, scaled=True)
    return None


@dataclass
class RunCost:
    kind: str
    steps: int = 0
    examples: int = 0  # training examples seen (epochs x examples)
    seconds: float = 0.0
    peak_mb: float = 0.0
    arch: str = ""
    unknown: bool = False  # a model run the table cannot size: its hours are missing from the sums


def _memory_mb(a: Arch, batch: int, seq: int, train: bool, full: bool, t5: bool, f32: bool = False) -> float:
    """Weights (+ gradients and Adam states when all weights train) and 16-bit activations (Korthikanti et al. 2022:
    34 s b h + 5 a s^2 b bytes per layer; every layer is kept for the backward pass, one at a time otherwise), twice
    that for a run that computes in float32."""
    layers = a.layers * (2 if t5 else 1)
    per_layer = (34 * seq * batch * a.hidden + 5 * a.heads * seq * seq * batch) * (2 if f32 else 1)
    states = (16 if full else 4) * a.params if train else 4 * a.params
    return (states + per_layer * (layers if train else 1)) / 2**20


def run_cost(run: Run, table: dict) -> RunCost:
    """One planned run's training steps and examples, device seconds on the table's device and peak memory."""
    tier = run.spec["tier"]
    cost = RunCost(run.kind)
    # a run names its model as an instance (<asset>[.s<seed>|.random-s<seed>]); pre-training names the asset it builds
    instance = run.spec["fields"].get("instance") or (run.spec["fields"].get("asset") if run.kind == "pretrain" else None)
    if instance is None or run.kind not in GPU_KINDS:
        if run.kind == "probe" and run.method == "structural-probe":
            s = tier.get("probing", {}).get("structural", {})
            enc = next((u.spec["tier"] for u in run.upstream if u.kind == "probe-encode"), tier)  # the sample it fits on
            n = min(enc.get("probing", {}).get("train_sentences") or UD_SENTENCES["train"], UD_SENTENCES["train"])
            cost.steps, cost.examples = s.get("epochs", 0) * math.ceil(n / s.get("batch_size", 20)), s.get("epochs", 0) * n
        return cost
    asset = instance.partition(".")[0]  # an instance is <asset>[.s<seed>|.random-s<seed>]
    spec = tier["assets"][asset]
    train_tokens = infer_tokens = 0
    full, batch, seq = True, 1, 128
    models, frozen_copies, generator, predictor = 1, 0, None, None  # contrastive only: see CONTRASTIVE_STEP
    if run.kind in ("finetune", "finetuned", "lm"):  # finetuned: the same fine-tuning, keeping its model for others
        section = tier["lm" if run.kind == "lm" else "finetune"]
        budget = section.get("budget", {})  # a zero-shot run reads no training budget
        task = run.task
        n = min(GLUE_TRAIN.get(task, 0), budget.get("max_train") or math.inf)
        epochs, batch = int(budget.get("epochs", 1)), int(budget.get("batch_size", 16))
        seq = min(int(budget.get("max_length", 128)), TOKENS.get(task, 64) * 4)  # the longest batch, not every one
        dev = min(GLUE_DEV.get(task, 0), section.get("eval_limit") or math.inf)
        if run.method != "zero-shot" and budget.get("steps"):  # a recipe that counts steps (prompt tuning's)
            cost.steps = int(budget["steps"])
            cost.examples = cost.steps * batch
            train_tokens = cost.examples * TOKENS.get(task, 64)
        elif run.method != "zero-shot":
            cost.steps, cost.examples = epochs * math.ceil(n / batch), epochs * int(n)
            train_tokens = cost.examples * TOKENS.get(task, 64)
        infer_tokens = dev * TOKENS.get(task, 64) * (2 if run.kind == "lm" else 1)  # lm-eval scores both answers
        full = run.method == "full-finetuning"
    elif run.kind in ("compress-glue", "cka"):
        # forward passes over the task's whole dev split at the fine-tuning budget's length: cka runs two (the
        # pre-trained and the fine-tuned model); compress-glue one, after head pruning's importance pass
        task, budget = run.task, tier["finetune"]["budget"]
        seq = min(int(budget.get("max_length", 128)), TOKENS.get(task, 64) * 4)
        infer_tokens = GLUE_DEV.get(task, 0) * TOKENS.get(task, 64) * (2 if run.kind == "cka" else 1)
        batch = DEV_BATCH
        if run.kind == "compress-glue" and run.method == "head-pruning":
            # Michel et al.'s importance: forward+backward over a train sample to the head gates (no weight gradients)
            c = tier.get("compression", {})
            n = min(c.get("importance_pairs") or math.inf, GLUE_TRAIN.get(task, 0))
            train_tokens, full, batch = int(n) * TOKENS.get(task, 64), False, int(c.get("importance_batch", 32))
    elif run.kind == "attention-maps":
        # the UD sample's sentences once without gradients, and with an MLM head once more with the loss's gradient
        # to the attention maps (no weight gradients)
        n = min(tier.get("probing", {}).get("eval_sentences") or math.inf, UD_SENTENCES.get(run.split, UD_SENTENCES["dev"]))
        infer_tokens = int(n) * UD_TOKENS
        if run.params.get("gradient"):
            train_tokens, full = infer_tokens, False
        batch, seq = ATTENTION_BATCH, min(int(tier.get("encode", {}).get("max_length", 128)), UD_TOKENS * 4)
    elif run.kind == "transfer":
        # every item is padded to the task's sequence length; gradients flow through the frozen layers to the input
        # layer (forward+backward through the whole model, weight gradients only for the few trained parameters),
        # then one forward pass over the test items
        t = tier["transfer"]
        seq = synthetic.sequence_length(run.task, t.get("tasks", {}).get(run.task))
        b = t["budget"]
        cost.steps, batch = int(b["steps"]), int(b["batch_size"])
        cost.examples = cost.steps * batch
        train_tokens, full = cost.examples * seq, False
        infer_tokens = int(b.get("test_examples", 0)) * seq
    elif run.kind == "contrastive":
        # the objective's passes per step (CONTRASTIVE_STEP), then STS-B dev (1500 pairs) at every evaluation and the
        # STS test sets once, without gradients
        c = tier["contrastive"]
        b = {**c["budget"], **({"steps": 0} if run.params.get("released") else {})}
        # a recipe in epochs: its steps estimated (through the registry: the core never imports a family's modules)
        estimated_steps = families.implementation("contrastive", "plan").estimated_steps
        b["steps"] = estimated_steps(b, c.get("corpus"), bool(run.params.get("transductive")))
        cost.steps, batch, seq = int(b["steps"]), int(b["batch_size"]), int(b["max_length"])
        cost.examples = cost.steps * batch
        step, settings = contrastive_step(run.method, run.params)
        per_seq = min(seq, STS_TOKENS * 2)  # a corpus sentence cut at the budget's length
        if run.method == "promptbert":  # the template around every view, and one template-only pass per length
            per_seq += PROMPT_TOKENS
            train_tokens = 2 * cost.steps * min(batch, seq) * PROMPT_TOKENS
        train_tokens += step["trained"] * cost.examples * per_seq
        frozen = step.get("frozen", 0) * cost.examples * per_seq
        if run.method == "rankencoder" and cost.steps:
            corpus = min(int(settings["corpus_size"]),
                         int(c.get("corpus", {}).get("max_sentences") or settings["corpus_size"]))
            frozen += 2 * corpus * STS_TOKENS
        evals = cost.steps // int(b["eval_every"]) + 2
        infer_tokens = (evals * 2 * 1500 + STS_SENTENCES["senteval"]) * STS_TOKENS + frozen
        if cost.steps:  # a released checkpoint only encodes: one model, no copies, no training batch
            models, frozen_copies = int(step.get("models", 1)), int("frozen" in step)
            if "generator" in step:
                name = run.params.get("generator")
                generator = (tier["assets"][name] if name else spec, step["generator"] * cost.examples * per_seq)
            if run.method == "bsl":
                predictor = (int(settings["predictor_blocks"]), int(settings["predictor_hidden_mult"]))
            # every view's activations are kept for the one backward pass, whether the views share a forward pass
            # (SimCSE's two dropout views) or not (DeCLUTR's spans, PromptBERT's templates)
            batch *= max(1, step["trained"] // models)
            seq = per_seq
    elif run.kind == "pretrain":
        t = spec["train"]
        cost.steps, cost.examples = int(t["steps"]), int(t["steps"]) * int(t["batch_size"])
        batch, seq = int(t["batch_size"]), int(spec["model"].get("max_length", 128))
        train_tokens = cost.examples * seq
    elif run.kind in ("encode", "compress"):
        pairs = min(STS_PAIRS, (tier.get("data", {}).get("max_pairs") or math.inf) * 7)
        # the union of the benchmarks' sentences, once (a sample's sentences seldom repeat)
        infer_tokens = min(2 * pairs, STS_SENTENCES.get(run.evaluator, 2 * STS_PAIRS)) * STS_TOKENS
        enc = tier.get("encode", {})
        batch, seq = int(enc.get("batch_size", 64)), int(enc.get("max_length", 128))
        if run.kind == "compress" and run.method == "distillation":
            d = tier["compression"]["distill"]
            cost.steps = int(d["steps"])
            cost.examples = cost.steps * int(d["batch_size"])
            train_tokens = cost.examples * STS_TOKENS
            infer_tokens += min(d.get("sentences") or DISTILL_SENTENCES, DISTILL_SENTENCES) * STS_TOKENS  # teacher vectors
            batch = int(d["batch_size"])
        elif run.kind == "compress" and run.method == "head-masking":
            pairs = tier["compression"].get("importance_pairs") or GLUE_TRAIN["STS-B"]
            # one forward+backward pass to the head gates for importance, no weight gradients: 4x, as compress-glue
            train_tokens, full = 2 * pairs * STS_TOKENS, False
    elif run.kind == "fitencode":  # one forward pass over the fit corpus (the NLI sentences whitening and flow fit on)
        corpus = next(iter(tier.get("fit_corpora", {}).values()), {})
        infer_tokens = int(corpus.get("max_sentences") or 100_000) * STS_TOKENS
        enc = tier.get("encode", {})
        batch, seq = int(enc.get("batch_size", 64)), int(enc.get("max_length", 128))
    elif run.kind == "probe-encode":
        p = tier.get("probing", {})
        n = min(p.get("train_sentences") or math.inf, UD_SENTENCES["train"])
        n += min(p.get("eval_sentences") or math.inf, UD_SENTENCES.get(run.split, UD_SENTENCES["dev"]))
        infer_tokens = int(n) * UD_TOKENS
        enc = tier.get("encode", {})
        batch, seq = int(enc.get("batch_size", 64)), int(enc.get("max_length", 128))
    a = architecture(spec, table)
    if a is None:  # no transformer (static vectors), or a model the table cannot size: steps but no hours
        cost.unknown = spec.get("kind") not in ("static-vectors", "lexical")
        return cost
    row = table["architectures"][a.name]
    cost.arch = a.name + (" (scaled)" if a.scaled else "")
    # every job starts an interpreter and imports torch and transformers before its model runs (the table measures
    # it; loading the weights and reading the data are not priced)
    cost.seconds = float(table.get("job_startup_s", 0.0))
    # FLOP/s the table's device reached; pre-training at the rate timed with its MLM head at its own shape, where the
    # table has it (the head's logits over the vocabulary, even at the masked positions only, are a large share of a
    # small encoder's arithmetic: benchmarks/throughput.py)
    rate = row.get("pretrain_tokens_per_s") if run.kind == "pretrain" else None
    f32 = "float32_" if run.kind in FLOAT32_KINDS and "float32_train_tokens_per_s" in row else ""
    train_rate = 6 * row["params"] * (rate or row[f32 + "train_tokens_per_s"])
    t5 = row["model_type"] == "t5"
    k = 6 if full else 4
    cost.seconds += k * a.params * train_tokens / train_rate + _forward_seconds(a, infer_tokens, table, f32)
    seq = min(seq, int(spec.get("max_length", seq)))
    cost.peak_mb = (models * _memory_mb(a, batch, seq, bool(train_tokens), full, t5, bool(f32))
                    + frozen_copies * 4 * a.params / 2**20)
    if run.kind == "pretrain":  # the MLM logits at the masked positions, with their softmax and gradient: 3 float32
        # copies (microbert.masked_lm_loss scores only those positions)
        cost.peak_mb += 3 * 4 * batch * seq * MASK_PROBABILITY * int(spec["model"].get("vocab", 0)) / 2**20
    if predictor is not None:  # BSL's predictor trains beside the encoder on one vector per view
        blocks, mult = predictor
        d = a.hidden
        head = blocks * (2 * d * mult * d + (mult * d) ** 2)
        cost.seconds += 6 * head * 2 * cost.examples / train_rate
        cost.peak_mb += 16 * head / 2**20
    if generator is not None:  # a frozen model of its own size, at its own row's rate
        g = architecture(generator[0], table)
        if g is None:
            cost.unknown = True
        else:
            cost.seconds += _forward_seconds(g, generator[1], table)
            cost.peak_mb += 4 * g.params / 2**20
    return cost


def _forward_seconds(a: Arch, tokens: float, table: dict, f32: str = "") -> float:
    """Inference at 2 x parameters x tokens FLOPs, at the FLOP/s the table's device reached on `a`'s row (f32:
    'float32_', the row's float32 rate)."""
    row = table["architectures"][a.name]
    return 2 * a.params * tokens / (2 * row["params"] * row[f32 + "forward_tokens_per_s"])


def prefetch_disk(plans: list[ClaimPlan], tier: dict, table: dict) -> list[tuple[str, float, str]]:
    """(hub asset, bytes, how known) for each hub model the plans load; datasets are left out (tens of MB)."""
    from .assets import needed_assets

    out = []
    by_id = {s.get("id"): s for s in tier["assets"].values()}
    for h in needed_assets(plans, tier):
        if h.repo_type != "model":
            continue
        spec = tier["assets"][h.asset] if h.asset in tier["assets"] else by_id.get(h.repo_id, {})
        if spec.get("kind") == "static-vectors":
            # GloVe 840B: 2,196,017 words x 300 float32 dimensions
            out.append((h.repo_id, 2_196_017 * 300 * 4.0, "estimate: vocabulary x dimensions x 4 bytes"))
            continue
        a = architecture(spec, table)
        if a is not None:
            out.append((h.repo_id, a.params * BYTES_PER_PARAM, "estimate: parameters x 4 bytes, one float32 weight file"))
        else:
            out.append((h.repo_id, float("nan"), "unknown"))
    return out


def copied_runs(runs: dict[str, Run]) -> set[str]:
    """The keys of the finetune runs whose finetuned twin (a run of the same spec under the other kind:
    glue.plan.saved_twin) is among `runs`: their job copies the twin's results (glue.runs.copy_saved_twin), so they
    cost a job's start-up and no training."""
    def same(r: Run) -> str:
        return json.dumps({k: v for k, v in r.spec.items() if k != "kind"}, sort_keys=True)

    twins = {same(r) for r in runs.values() if r.kind == "finetuned"}
    return {k for k, r in runs.items() if r.kind == "finetune" and same(r) in twins}


def plan_costs(plans: list[ClaimPlan], table: dict) -> dict:
    """Per claim and in total; a run that several claims share (same key) is counted once in the total."""
    costs: dict[str, RunCost] = {}
    claims = {}
    owners: Counter = Counter()
    every = all_runs(r for p in plans for r in p.score_runs())
    copied = copied_runs(every)
    for p in plans:
        runs = all_runs(p.score_runs())
        for key, r in runs.items():
            if key not in costs:
                costs[key] = (RunCost(r.kind, seconds=float(table.get("job_startup_s", 0.0))) if key in copied
                              else run_cost(r, table))
            owners[key] += 1
        claims[p.claim.id] = _sum(costs[k] for k in runs)
    total = _sum(costs.values())
    by_rule: dict[str, dict] = {}
    for c in costs.values():
        row = by_rule.setdefault(c.kind, {"runs": 0, "seconds": 0.0, "peak_mb": 0.0})
        row["runs"] += 1
        row["seconds"] += c.seconds
        row["peak_mb"] = max(row["peak_mb"], c.peak_mb)
    shared = sum(1 for k in owners if owners[k] > 1)
    return {"claims": claims, "total": total, "by_rule": by_rule, "shared": shared,
            "shared_extra": sum(n - 1 for n in owners.values()), "runs": every, "costs": costs, "copied": copied}


def _sum(costs) -> dict:
    out = {"runs": Counter(), "steps": 0, "examples": 0, "seconds": 0.0, "unknown": 0}
    for c in costs:
        out["unknown"] += c.unknown
        out["runs"][c.kind] += 1
        out["steps"] += c.steps
        out["examples"] += c.examples
        out["seconds"] += c.seconds
    return out


def _hours(seconds: float) -> str:
    h = seconds / 3600
    return f"{h:,.1f}" if h >= 0.1 else f"{h:.3f}"
