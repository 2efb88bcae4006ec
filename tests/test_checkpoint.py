"""Resume state (plmclaims.checkpoint) itself: a resumed loop continues every generator, the optimiser and the schedule
exactly; SIGTERM saves at the end of the step and stops with the retry status; a state is never resumed into another
run, never executes what it reads, and never moves a run's key; SLURM is asked for SIGTERM ahead of the time limit;
the overhead benchmark runs. Every training kind, killed and run again through its rule command:
tests/test_checkpoint_runs.py."""
from __future__ import annotations

import json
import os
import pickle
import random
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch

from plmclaims import checkpoint
from plmclaims import plan as P
from plmclaims.checkpoint import Resume
from plmclaims.errors import UserError
from plmclaims.tiers import load_tier, with_overrides


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


def test_the_overhead_benchmark_times_both_and_finds_the_same_outputs(repo, tmp_path, data_root):
    """benchmarks/bench_checkpoint.py at its smallest size (tests/test_benchmarks.py leaves it to this test): the tiny
    tier's costliest fine-tuning run (a packaged encoder, no upstream job), in a scratch folder. Both runs go through,
    the run with resume state saves once (2 steps, every second step) and writes the same outputs."""
    res = subprocess.run([sys.executable, str(repo / "benchmarks" / "bench_checkpoint.py"), "--data-root", str(data_root),
                          "--smallest"], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert res.returncode == 0, res.stderr[-2000:]
    row = next(line for line in res.stdout.splitlines() if line.startswith("finetune "))
    *_, saves, per_save, mb, same = row.split()
    assert (float(saves), same) == (1.0, "yes") and float(per_save) > 0 and float(mb) > 1, res.stdout
    assert "checkpoint interval {'every_steps': 2}" in res.stdout
