"""Resume state (plmclaims.checkpoint) of every training kind: each, killed at a random step past its first save and
run again, gives the same bytes as a run never stopped; a best-dev run keeps its selection across the stop; a run
killed while writing its outputs resumes at its last step; SIGTERM makes a job save and exit with the retry status.

The tests run the rule commands (`python -m plmclaims.cli rule <command> --spec ...`) as the workflow's jobs do, on a
2-layer, 32-wide BERT and Llama (seconds each); the uninterrupted run they are compared with is the same run body
called in this process with no resume state at all."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from plmclaims import checkpoint
from plmclaims.checkpoint import Resume
from plmclaims.tiers import load_tier, with_overrides

EVERY = 2  # the kill tests save every second step
# what differs between two honest runs: how long they took and the memory the process peaked at
VOLATILE = {"wall_time_s", "startup_s", "finished_at", "train_wall_s", "steps_per_second", "peak_memory_mb"}

# A rule command that SIGKILLs itself right after training step `sys.argv[1]` (a kill, no chance to save): the test's
# stand-in for a node that dies. Everything else is the CLI as the workflow runs it.
KILLER = """
import os, signal, sys
from plmclaims import checkpoint
at = int(sys.argv[1])
step = checkpoint.Resume.step
def killing(self, n, loop=None):
    step(self, n, loop)
    if n == at:
        os.kill(os.getpid(), signal.SIGKILL)
checkpoint.Resume.step = killing
from plmclaims.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory, minilm_path) -> dict:
    """A 2-layer, 32-wide BERT and Llama with all-MiniLM-L6-v2's tokenizer (seconds per run)."""
    from transformers import AutoTokenizer, BertConfig, BertModel, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(minilm_path)
    root = tmp_path_factory.mktemp("models")
    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=64, max_position_embeddings=64))
    bert.save_pretrained(root / "bert")
    tok.save_pretrained(root / "bert")
    llama = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                         tie_word_embeddings=True, pad_token_id=tok.pad_token_id,
                                         eos_token_id=tok.sep_token_id, bos_token_id=tok.cls_token_id))
    llama.save_pretrained(root / "llama")
    tok.save_pretrained(root / "llama")
    return {"bert": str(root / "bert"), "llama": str(root / "llama")}


@pytest.fixture(scope="module")
def tier(models) -> dict:
    """The tiny tier on the two small models, with budgets of 8-12 steps (fine-tuning and the LM cross an epoch)."""
    return with_overrides(load_tier("tiny"), {
        "assets.small-bert": {"kind": "transformer", "source": "local", "path": models["bert"], "max_length": 64},
        "assets.small-llama": {"kind": "causal-lm", "source": "local", "path": models["llama"]},
        "data.max_pairs": 24,
        "finetune.budget": {"epochs": 2, "batch_size": 4, "max_length": 32, "max_train": 20, "max_dev": 16},
        "lm.budget": {"epochs": 2, "batch_size": 4, "max_length": 48, "max_train": 16},
        "contrastive.budget": {"steps": 10, "batch_size": 8, "max_length": 16, "lr": 1.0e-4, "eval_every": 3},
        "transfer.budget": {"steps": 12, "batch_size": 8, "train_examples": 40, "test_examples": 30},
        "compression.distill": {"sentences": 48, "steps": 10, "batch_size": 8, "lr": 1.0e-3, "seed": 0},
    })


def _planned(kind: str, tier: dict):
    """(the run, its rule command, the files it writes, its total steps, a run-body call) of one training kind."""
    from plmclaims.families.compression.plan import compress_run
    from plmclaims.families.contrastive.plan import contrastive_run
    from plmclaims.families.glue.plan import finetune_run
    from plmclaims.families.lm_tasks.plan import lm_run
    from plmclaims.families.transfer.plan import transfer_run

    if kind == "fine-tuning":
        return finetune_run(tier, "small-bert", "full-finetuning", "MRPC", 1, {"lr": 1e-3}), "finetune", 10
    if kind == "contrastive":
        return contrastive_run(tier, "small-bert", "simcse", "raw", 1, {}), "contrastive", 10
    if kind == "causal-lm":
        return lm_run(tier, "small-llama", "full-finetuning", "SST-2", 1, {"lr": 1e-3}), "lm-train", 8
    if kind == "causal-lm-prefix-tuning":  # a peft model: its state is the frozen base plus the prefixes
        return lm_run(tier, "small-llama", "prefix-tuning", "SST-2", 1, {"lr": 1e-2}), "lm-train", 8
    if kind == "frozen-transfer":
        return transfer_run(tier, "small-bert", "bit-xor", 0, {"lr": 1e-3}), "transfer", 12
    return compress_run(tier, "senteval", "small-bert", "raw", "distillation", {}), "compress", 10


def _out(run, root: Path) -> Path:
    """The file the rule command is given as --out (the LM's: its model folder, train.json beside it)."""
    folder = root / run.key
    return folder / ("model" if run.kind == "lm" else "metrics.json")


def _command(run, tier: dict, command: str, root: Path, data_root) -> list[str]:
    args = ["rule", command, "--spec", run.to_json(tier), "--out", str(_out(run, root)), "--resources",
            str(root / "res"), "--threads", "1"]
    return args if command == "transfer" else args + ["--data-root", str(data_root)]


def _call(run, tier: dict, command: str, root: Path, data_root) -> None:
    """The run body the rule command calls, here in this process."""
    from plmclaims.cli import build_parser

    args = build_parser().parse_args(_command(run, tier, command, root, data_root))
    args.fn(args)


def _results(run, root: Path) -> dict:
    """Every output of the run, comparable: JSON values without VOLATILE fields, arrays, and saved weight files."""
    folder = root / run.key
    out = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.suffix == ".json" and path.name in ("metrics.json", "train.json"):
            data = json.loads(path.read_text())
            data.pop("provenance", None)
            out[name] = _without(data)
        elif path.suffix == ".npz":
            with np.load(path) as npz:
                out[name] = {k: npz[k].tolist() for k in npz.files}
        elif path.suffix == ".safetensors":
            out[name] = path.read_bytes()
    return out


def _without(obj):
    if isinstance(obj, dict):
        return {k: _without(v) for k, v in obj.items() if k not in VOLATILE and k != "out_dir"}
    return [_without(v) for v in obj] if isinstance(obj, list) else obj


def _env(state: Path, **extra) -> dict:
    return {**os.environ, checkpoint.ENV: json.dumps({"dir": str(state), "every_steps": EVERY, **extra}),
            "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


@pytest.mark.parametrize("kind", ["fine-tuning", "contrastive", "causal-lm", "causal-lm-prefix-tuning", "frozen-transfer",
                                  "distillation"])
def test_a_run_killed_at_a_random_step_and_run_again_gives_the_same_bytes(kind, tier, tmp_path, data_root):
    run, command, steps = _planned(kind, tier)
    _call(run, tier, command, tmp_path / "uninterrupted", data_root)
    reference = _results(run, tmp_path / "uninterrupted")
    assert reference, "the uninterrupted run wrote nothing"
    at = random.randrange(EVERY + 1, steps)  # past the first save, before the last step
    root, state = tmp_path / "killed", tmp_path / "state"
    killed = subprocess.run([sys.executable, "-c", KILLER, str(at), *_command(run, tier, command, root, data_root)],
                            env=_env(state), capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    folder = state / run.kind / run.key
    assert Resume(folder, run.key, run.kind).latest().name == f"step-{at - at % EVERY}", f"killed after step {at}"
    again = subprocess.run([sys.executable, "-m", "plmclaims.cli", *_command(run, tier, command, root, data_root)],
                           env=_env(state), capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"resumed from step {at - at % EVERY}" in again.stderr
    assert _results(run, root) == reference, f"killed after step {at}"
    assert not folder.exists()  # the run completed: its resume state is gone


@pytest.mark.parametrize("at", [5, 7])  # saved at step 4, the end of epoch 1 before its dev score; at step 6, after it
def test_a_best_dev_run_killed_and_run_again_keeps_its_selection_and_the_same_bytes(at, tier, tmp_path, data_root):
    """A recipe with checkpoint selection on dev (`selection: best-dev`), saving its model (`finetuned`: the best
    epoch's weights are kept and loaded back): the dev scores by epoch and the best weights so far are part of the
    resume state, so the resumed run selects the same epoch and saves the same weights."""
    from plmclaims.families.glue.plan import finetuned_run

    best_dev = with_overrides(tier, {"finetune.budget": {"epochs": 2, "batch_size": 4, "max_length": 32,
                                                          "max_train": 16, "max_dev": 16, "selection": "best-dev"}})
    run = finetuned_run(best_dev, "small-bert", "full-finetuning", "MRPC", 1, {"lr": 1e-3})
    _call(run, best_dev, "finetuned", tmp_path / "uninterrupted", data_root)
    reference = _results(run, tmp_path / "uninterrupted")
    selection = reference["metrics.json"]["values"]["selection"]
    assert selection["rule"] == "best-dev" and len(selection["dev_by_epoch"]) == 2, selection
    assert any(name.endswith(".safetensors") for name in reference), sorted(reference)  # the saved best weights
    root, state = tmp_path / "killed", tmp_path / "state"
    command = _command(run, best_dev, "finetuned", root, data_root)
    killed = subprocess.run([sys.executable, "-c", KILLER, str(at), *command], env=_env(state), capture_output=True,
                            text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    again = subprocess.run([sys.executable, "-m", "plmclaims.cli", *command], env=_env(state), capture_output=True,
                           text=True)
    assert again.returncode == 0 and f"resumed from step {at - at % EVERY}" in again.stderr, again.stderr[-2000:]
    assert _results(run, root) == reference, f"killed after step {at}"


def test_a_run_killed_while_writing_its_outputs_is_rerun_from_its_last_state(tier, tmp_path, data_root):
    """Killed after predictions.npz and before metrics.json (the file whose presence means done): the run is not
    done, and running it again resumes at its last step, predicts again and writes the same bytes."""
    run, command, steps = _planned("fine-tuning", tier)
    _call(run, tier, command, tmp_path / "uninterrupted", data_root)
    root, state = tmp_path / "killed", tmp_path / "state"
    killer = ("import os, signal, sys\nfrom plmclaims import provenance\nsave = provenance.atomic_save_npz\n"
              "def killing(*a, **k):\n    save(*a, **k)\n    os.kill(os.getpid(), signal.SIGKILL)\n"
              "provenance.atomic_save_npz = killing\nimport plmclaims.families.glue.runs as g\n"
              "g.atomic_save_npz = killing\nfrom plmclaims.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    killed = subprocess.run([sys.executable, "-c", killer, *_command(run, tier, command, root, data_root)],
                            env=_env(state), capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert (root / run.key / "predictions.npz").exists() and not (root / run.key / "metrics.json").exists()
    again = subprocess.run([sys.executable, "-m", "plmclaims.cli", *_command(run, tier, command, root, data_root)],
                           env=_env(state), capture_output=True, text=True)
    assert again.returncode == 0 and f"resumed from step {steps}" in again.stderr, again.stderr[-2000:]
    assert _results(run, root) == _results(run, tmp_path / "uninterrupted")


def test_sigterm_saves_and_exits_with_the_retry_status_within_the_grace_period(tier, tmp_path, data_root):
    """SIGTERM during training (SLURM's at a time limit, or the profile's --signal ahead of it): the rule command
    finishes its step, saves, and exits with RETRY_STATUS well inside SLURM's default grace (KillWait, 30 s)."""
    long = with_overrides(tier, {"transfer.budget": {"steps": 100_000, "batch_size": 8, "train_examples": 40,
                                                     "test_examples": 30}})
    run, command, _ = _planned("frozen-transfer", long)
    root, state = tmp_path / "stopped", tmp_path / "state"
    folder = state / run.kind / run.key
    proc = subprocess.Popen([sys.executable, "-m", "plmclaims.cli", *_command(run, long, command, root, data_root)],
                            env=_env(state, every_steps=50), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and Resume(folder, run.key, run.kind).latest() is None:
        time.sleep(0.1)  # training is under way once its first state (step 50) is written
    assert proc.poll() is None, "the run ended before it could be stopped"
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert proc.returncode == checkpoint.RETRY_STATUS and took < 30, (proc.returncode, took, err[-2000:])
    step = int(Resume(folder, run.key, run.kind).latest().name.removeprefix("step-"))
    assert 50 <= step < 100_000 and f"stopped by signal {int(signal.SIGTERM)} after step {step}" in err
    assert not (root / run.key / "metrics.json").exists()  # not done: the retry runs it again, from step `step`
