"""Resume state (plmclaims.checkpoint): every training loop, killed at a random step past its first save and run again,
gives the same bytes as a run never stopped; SIGTERM makes a job save and exit with the retry status; a state is never
resumed into another run, never executes what it reads, and never moves a run's key.

The kill tests run the rule commands (`python -m plmclaims.cli rule <command> --spec ...`) as the workflow's jobs do,
on a 2-layer, 32-wide BERT and Llama (seconds each); the uninterrupted run they are compared with is the same run body
called in this process with no resume state at all."""
from __future__ import annotations

import json
import os
import pickle
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
from plmclaims import plan as P
from plmclaims.checkpoint import Resume
from plmclaims.errors import UserError
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


# ---------------------------------------------------------------- the state itself, in one process

class _Loop(torch.nn.Module):
    """A model whose training step draws from every generator a loop may use."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.drop = torch.nn.Dropout(0.5)
        self.tied = torch.nn.Linear(4, 4, bias=False)
        self.tied.weight = self.lin.weight  # shared tensors, as a tied LM head: safetensors refuses them unless handled


def _train(resume: Resume, steps: int = 7, stop_after: int | None = None) -> list[float]:
    """A loop in the shape of the real ones; `stop_after`: raise after that step (a crash, nothing saved)."""
    from plmclaims.optim import adamw, linear_warmup_decay

    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)
    model, gen, rng = _Loop(), torch.Generator().manual_seed(1), np.random.default_rng(2)
    opt = adamw(model.parameters(), lr=1e-2)
    sched = linear_warmup_decay(opt, 2, steps)
    restored = resume.attach(model, opt, sched, {"gen": gen, "rng": rng})
    start, out = (restored.step, restored.loop["out"]) if restored else (0, [])
    for step in range(start, steps):
        x = torch.rand(3, 4, generator=gen) + float(rng.random()) + np.random.rand() + random.random()
        loss = model.drop(model.tied(model.lin(x))).pow(2).mean()
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()
        out.append(loss.item())
        resume.step(step + 1, lambda: ({"out": out}, {"weights": model.lin.weight}))
        if stop_after == step + 1:
            raise KeyboardInterrupt
    resume.detach()
    return out + [float(p.detach().sum()) for p in model.parameters()]


def test_a_resumed_loop_continues_every_generator_the_optimiser_and_the_schedule_exactly(tmp_path):
    full = _train(Resume(None, "k", "test"))
    for stop in (3, 4, 7):  # after an odd step (saved at 2), an even one (saved there), the last
        resume = Resume(tmp_path / f"s{stop}", "k", "test", every_steps=2)
        with pytest.raises(KeyboardInterrupt):
            _train(resume, stop_after=stop)
        saved = resume.latest()
        assert saved is not None and saved.name == f"step-{stop - stop % 2}"
        assert [p.name for p in saved.parent.iterdir()] == [saved.name]  # older states are removed
        assert _train(Resume(tmp_path / f"s{stop}", "k", "test", every_steps=2)) == full


def test_the_state_is_safetensors_and_json_with_the_run_key(tmp_path):
    resume = Resume(tmp_path, "abc123", "test", every_steps=3)
    _train(resume)
    state = resume.latest()
    assert sorted(p.name for p in state.iterdir()) == sorted([checkpoint.MODEL, checkpoint.TENSORS, checkpoint.META])
    meta = json.loads((state / checkpoint.META).read_text())
    assert (meta["key"], meta["kind"], meta["step"], meta["format"]) == ("abc123", "test", 6, checkpoint.FORMAT)
    assert set(meta["rng"]["generators"]) == {"rng"} and meta["scheduler"]["last_epoch"] == 6
    from safetensors.torch import load_file

    assert {"rng.torch", "rng.gen.gen", "loop.weights"} <= set(load_file(str(state / checkpoint.TENSORS)))
    resume.complete()
    assert not tmp_path.exists()
    kept = Resume(tmp_path / "kept", "abc123", "test", every_steps=3, keep=True)
    _train(kept)
    kept.complete()
    assert kept.latest().name == "step-6"


def test_sigterm_in_a_loop_saves_at_the_end_of_the_step_and_stops_with_the_retry_status(tmp_path):
    """No interval: the signal alone makes the loop save, after the step it arrived in; the run then resumes there."""
    resume = Resume(tmp_path, "k", "test")
    calls = []
    original = resume.save
    resume.save = lambda step, loop=None: (calls.append(step), original(step, loop))[1]
    stepped = resume.step

    def signalled(step, loop=None):
        if step == 3:
            os.kill(os.getpid(), signal.SIGTERM)  # arrives during step 3, is noticed at its end
        stepped(step, loop)

    resume.step = signalled
    handler = signal.getsignal(signal.SIGTERM)
    with pytest.raises(checkpoint.Stopped) as stop:
        _train(resume)
    assert stop.value.code == checkpoint.RETRY_STATUS and calls == [3]
    assert signal.getsignal(signal.SIGTERM) is handler  # the loop's handler is gone once it stopped
    assert _train(Resume(tmp_path, "k", "test")) == _train(Resume(None, "k", "test"))


def test_the_minutes_interval_saves_when_the_time_has_passed(tmp_path, monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(checkpoint.time, "monotonic", lambda: clock[0])
    resume = Resume(tmp_path, "k", "test", every_minutes=1.5)
    model = _Loop()
    resume.attach(model)
    saved = []
    for step in range(1, 6):
        clock[0] += 40  # seconds per step: due after 90 s, i.e. at steps 3 (120 s) and 6
        before = resume.latest()
        resume.step(step)
        if resume.latest() != before:
            saved.append(step)
    resume.detach()
    assert saved == [3]


def test_a_state_of_another_run_is_refused_in_one_line(tmp_path):
    _train(Resume(tmp_path, "aaaa", "finetune", every_steps=2))
    with pytest.raises(UserError) as err:
        _train(Resume(tmp_path, "bbbb", "finetune", every_steps=2))
    line = str(err.value)
    assert "\n" not in line and "written by finetune run aaaa" in line and "not by this finetune run bbbb" in line
    assert f"delete {tmp_path}" in line


def test_a_damaged_state_is_a_one_line_error_and_a_half_written_one_is_not_read(tmp_path):
    resume = Resume(tmp_path, "k", "test", every_steps=2)
    with pytest.raises(KeyboardInterrupt):
        _train(resume, stop_after=5)
    state = resume.latest()
    (state / checkpoint.META).write_text("{not json")
    with pytest.raises(UserError, match=r"step-4: unreadable \(JSONDecodeError.*delete .* to start this run from step"):
        _train(Resume(tmp_path, "k", "test", every_steps=2))
    # a state without one of its files was never renamed into place whole: it is not a state (start from step 0)
    (state / checkpoint.META).unlink()
    (tmp_path / ".step-6.tmp-1").mkdir()  # what a kill during a save leaves
    assert Resume(tmp_path, "k", "test").latest() is None
    assert _train(Resume(tmp_path, "k", "test", every_steps=2)) == _train(Resume(None, "k", "test"))


class _Planted:
    """Unpickling this creates a file: the proof that a loader executed code it was handed."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_a_planted_pickle_is_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    folder = tmp_path / "state"
    resume = Resume(folder, "k", "test", every_steps=2)
    with pytest.raises(KeyboardInterrupt):
        _train(resume, stop_after=2)
    state = resume.latest()
    for name in ("trainer_state.pt", "optimizer.pt", "rng_state.pth"):  # where other trainers keep pickles
        torch.save({"state": _Planted(marker)}, state / name)
    assert _train(Resume(folder, "k", "test", every_steps=2)) == _train(Resume(None, "k", "test"))  # never read
    state = Resume(folder, "k", "test").latest()
    (state / checkpoint.TENSORS).write_bytes(pickle.dumps(_Planted(marker)))  # a pickle under the tensors' name
    with pytest.raises(UserError, match="unreadable"):
        _train(Resume(folder, "k", "test", every_steps=2))
    assert not marker.exists()


def test_the_interval_reaches_jobs_through_the_environment_and_moves_no_run(repo, monkeypatch, tmp_path):
    from plmclaims.claims import load_claims

    tier = load_tier("micro")
    assert "checkpoint" in tier
    bare = {k: v for k, v in tier.items() if k != "checkpoint"}
    other = with_overrides(tier, {"checkpoint": {"every_steps": 1, "keep": True}})
    claims = load_claims(repo / "replications")
    runs = [{r.key: r.to_json(t) for p in P.plan_all(claims, t) for r in P.all_runs(p.score_runs()).values()}
            for t in (tier, bare, other)]
    assert runs[0] == runs[1] == runs[2]  # the same keys and the same specs (Snakemake's params): nothing reruns
    assert not any("every_minutes" in spec or "every_steps" in spec for spec in runs[0].values())
    value = checkpoint.workflow_settings(other, str(tmp_path))
    monkeypatch.setenv(checkpoint.ENV, value)
    run = next(r for r in P.all_runs(p for c in P.plan_all(claims, tier) for p in c.score_runs()).values()
               if r.kind == "finetune")
    resume = checkpoint.for_run(run)
    assert (resume.folder, resume.every_steps, resume.keep) == (tmp_path / "finetune" / run.key, 1, True)
    monkeypatch.setenv(checkpoint.ENV, "every 5 minutes")
    with pytest.raises(UserError, match="PLMCLAIMS_CHECKPOINT.*expected JSON"):
        checkpoint.for_run(run)
    monkeypatch.delenv(checkpoint.ENV)
    assert not checkpoint.for_run(run).enabled  # a library call outside the workflow writes no state


def test_slurm_is_asked_for_sigterm_ahead_of_the_time_limit(repo, tmp_path, data_root):
    """The lead (config slurm_signal_lead) is at most a fifth of the limit, and none below SLURM's minute of
    resolution; every job of the workflow carries it in the executor plugin's slurm_extra."""
    assert checkpoint.slurm_signal(240, 300) == "--signal=TERM@300"
    assert checkpoint.slurm_signal(10, 300) == "--signal=TERM@120"
    assert checkpoint.slurm_signal(4, 300) == "" and checkpoint.slurm_signal(240, 0) == ""
    dry = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(repo / "Snakefile"), "--directory",
                          str(tmp_path), "-n", "--cores", "1", "--config", "tier=tiny", f"data_root={data_root}",
                          f"claims_dir={repo / 'replications'}", 'claims=["transfer/frozen-pretrained-beats-random"]',
                          "slurm_signal_lead=90"], capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr[-2000:]
    jobs = [line for line in dry.stdout.splitlines() if "runtime=" in line]  # every job but the target rule `all`
    assert len(jobs) > 5 and all("runtime=10, slurm_extra=--signal=TERM@90," in line for line in jobs), jobs


# ---------------------------------------------------------------- every training kind, killed and run again

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


def test_the_overhead_benchmark_times_both_and_finds_the_same_outputs(repo, tmp_path, data_root):
    """benchmarks/bench_checkpoint.py on the tiny tier's costliest fine-tuning run (a packaged encoder, no upstream
    job): both runs go through, the run with resume state saves once (2 steps, every second step) and writes the same
    outputs."""
    res = subprocess.run([sys.executable, str(repo / "benchmarks" / "bench_checkpoint.py"), "--data-root", str(data_root),
                          "--tier", "tiny", "--kinds", "finetune", "--workdir", str(tmp_path)],
                         capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert res.returncode == 0, res.stderr[-2000:]
    row = next(line for line in res.stdout.splitlines() if line.startswith("finetune "))
    *_, saves, per_save, mb, same = row.split()
    assert (float(saves), same) == (1.0, "yes") and float(per_save) > 0 and float(mb) > 1, res.stdout
    assert "checkpoint interval {'every_steps': 2}" in res.stdout
