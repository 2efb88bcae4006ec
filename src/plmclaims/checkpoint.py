"""Resume state of a training loop, so a run stopped part-way (a time limit, a preemption, a kill) continues exactly.

A loop hands its objects to `Resume.attach` before its first step and calls `Resume.step` after each one. The state
written is everything the next step depends on: the model's tensors, the optimiser and scheduler state, every random
generator (Python's, numpy's global one, torch's CPU and CUDA ones, and each generator the loop names), and the loop's
own part (its position in the data, the losses so far, the checkpoint-selection history and best weights). A resumed
run therefore computes the same bytes as one never stopped. The state is safetensors plus JSON: neither can run code
when read, unlike a pickle, so a file planted in the folder can at worst make the resume fail, in one line.

When: every `every_steps` steps or `every_minutes` minutes (the tier's `checkpoint:` section; either, both, or neither),
and whenever SIGTERM arrives during the loop: the loop finishes its step, saves, and the process exits with
RETRY_STATUS, which the profile's retry turns into a resumed run. SLURM sends SIGTERM at the time limit, and ahead of
it when the profile asks (`--signal`, docs/clusters.md).

Where: `<dir>/<run kind>/<run key>/step-<n>/`, outside every rule's declared outputs (Snakemake deletes a failed job's
outputs). The workflow hands the folder and the interval to its jobs through the environment (PLMCLAIMS_CHECKPOINT),
never through a run's spec: the interval changes no result, so it must not move a run's key or rerun a finished job.
The state records its run's key and is refused, in one line, by a run with another key. It is deleted once the run's
outputs are written, unless the tier keeps it.
"""
from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import UserError

log = logging.getLogger("plmclaims")

ENV = "PLMCLAIMS_CHECKPOINT"  # JSON: {"dir": ..., "every_steps": n, "every_minutes": m, "keep": bool}
RETRY_STATUS = 75  # EX_TEMPFAIL: "try again later"; any non-zero status makes Snakemake retry the job
MODEL, TENSORS, META = "model.safetensors", "state.safetensors", "state.json"
FORMAT = 1


class Stopped(SystemExit):
    """A loop stopped on a signal after saving its state: the process exits with RETRY_STATUS (no traceback)."""

    def __init__(self, message: str):
        super().__init__(RETRY_STATUS)
        self.message = message


@dataclass
class Restored:
    """What a loop gets back from a saved state: the steps already done and its own part of the state."""

    step: int
    loop: dict = field(default_factory=dict)  # the JSON part the loop saved
    tensors: dict = field(default_factory=dict)  # the tensors the loop saved, by name


def workflow_settings(tier: dict, folder: str) -> str:
    """The value of PLMCLAIMS_CHECKPOINT for the jobs of a workflow run at `tier`: its checkpoint section (no
    section: no interval; a stop signal still saves) and the folder the resume states go in."""
    section = tier.get("checkpoint", {})
    given = {k: section[k] for k in ("every_steps", "every_minutes", "keep") if k in section}
    return json.dumps({"dir": folder, **given})


def slurm_signal(minutes: int, lead: int) -> str:
    """The sbatch option (the executor plugin's slurm_extra) that asks SLURM for SIGTERM `lead` seconds before a
    `minutes` time limit, so a training job saves and exits for the retry while its time lasts: at most a fifth of the
    limit, and none where that is under a minute (SLURM checks timed signals about once a minute, and may send them
    that much early; the time limit's own SIGTERM, followed by SIGKILL after the cluster's KillWait, serves there)."""
    lead = min(int(lead), minutes * 60 // 5)
    return f"--signal=TERM@{lead}" if lead >= 60 else ""


def settings() -> dict | None:
    """The checkpoint settings the workflow handed this job (None: no resume state, as for a library call)."""
    raw = os.environ.get(ENV)
    if not raw:
        return None
    try:
        cfg = json.loads(raw)
        assert isinstance(cfg, dict) and isinstance(cfg["dir"], str)
    except (ValueError, AssertionError, KeyError):
        raise UserError(f"environment variable {ENV}: got {raw!r}; expected JSON with 'dir' and optionally "
                        "'every_steps', 'every_minutes', 'keep' (the workflow sets it from the tier's checkpoint "
                        "section)") from None
    return cfg


def for_run(run) -> "Resume":
    """The resume state of a planned run (anything with `kind` and `key`), placed and timed as the workflow says."""
    cfg = settings()
    if cfg is None:
        return Resume(None, run.key, run.kind)
    return Resume(Path(cfg["dir"]) / run.kind / run.key, run.key, run.kind, cfg.get("every_steps"),
                  cfg.get("every_minutes"), bool(cfg.get("keep", False)))


class Resume:
    """One run's resume state. `folder=None`: off (attach restores nothing, step saves nothing, signals stay as
    they are)."""

    def __init__(self, folder: Path | str | None, key: str, kind: str, every_steps: int | None = None,
                 every_minutes: float | None = None, keep: bool = False):
        self.folder = Path(folder) if folder is not None else None
        self.key, self.kind, self.keep = key, kind, keep
        self.every_steps = int(every_steps) if every_steps else None
        self.every_minutes = float(every_minutes) if every_minutes else None
        self._objects: dict = {}
        self._stop: int | None = None
        self._previous = None
        self._last_save = time.monotonic()

    @property
    def enabled(self) -> bool:
        return self.folder is not None

    # ------------------------------------------------------------ the loop's side

    def attach(self, model, optimizer=None, scheduler=None, rngs: dict | None = None) -> Restored | None:
        """Bind the loop's objects; if a state was saved, load it into them and return the loop's part (else None).
        Call it right before the first step: nothing after it may draw from a random generator before the loop does.
        From here to `detach`, SIGTERM makes the loop save and stop at the end of its step."""
        self._objects = {"model": model, "optimizer": optimizer, "scheduler": scheduler, "rngs": dict(rngs or {})}
        if not self.enabled:
            return None
        self._listen()
        self._last_save = time.monotonic()
        path = self.latest()
        if path is None:
            return None
        meta, tensors = self._read(path)
        restored = _restore(path, meta, tensors, **self._objects)
        log.info("%s %s: resumed from step %d (%s)", self.kind, self.key, restored.step, path)
        return restored

    def step(self, step: int, loop=None) -> None:
        """After step `step` (1-based) is done: save if the interval has passed or a stop was asked for; after a stop,
        raise Stopped. `loop()` returns the loop's own (JSON part, tensors); it is called only when saving."""
        if not self.enabled:
            return
        due = self._stop is not None or (self.every_steps and step % self.every_steps == 0) or (
            self.every_minutes and time.monotonic() - self._last_save >= 60 * self.every_minutes)
        if due:
            self.save(step, loop)
        if self._stop is not None:
            self.detach()
            message = (f"{self.kind} {self.key}: stopped by signal {self._stop} after step {step}; resume state "
                       f"saved in {self.folder}; exiting with status {RETRY_STATUS}, so that the retry resumes there")
            log.warning(message)
            raise Stopped(message)

    def detach(self) -> None:
        """The loop is over: SIGTERM acts as before attach."""
        if self._previous is not None:
            try:
                signal.signal(signal.SIGTERM, self._previous)
            except ValueError:
                pass
            self._previous = None

    # ------------------------------------------------------------ the run's side

    def complete(self) -> None:
        """The run's outputs are written: its resume state is no longer needed (kept if the tier says so)."""
        self.detach()
        if self.enabled and not self.keep:
            shutil.rmtree(self.folder, ignore_errors=True)

    def latest(self) -> Path | None:
        """The newest whole state in the folder (a state is written beside and renamed into place whole)."""
        found = []
        for p in self.folder.glob("step-*") if self.enabled and self.folder.is_dir() else ():
            tail = p.name.removeprefix("step-")
            if tail.isdigit() and all((p / f).is_file() for f in (MODEL, TENSORS, META)):
                found.append((int(tail), p))
        return max(found)[1] if found else None

    def save(self, step: int, loop=None) -> Path:
        """Write the state after `step` beside the folder's states and rename it into place; older ones go."""
        from safetensors.torch import save_file, save_model

        loop_meta, loop_tensors = loop() if loop is not None else ({}, {})
        final = self.folder / f"step-{step}"
        tmp = self.folder / f".step-{step}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        o = self._objects
        save_model(o["model"], str(tmp / MODEL), force_contiguous=True)
        tensors, meta = _capture(o["optimizer"], o["scheduler"], o["rngs"])
        for name, value in loop_tensors.items():
            tensors[f"loop.{name}"] = _tensor(value)
        save_file(tensors, str(tmp / TENSORS))
        meta.update({"format": FORMAT, "kind": self.kind, "key": self.key, "step": int(step), "loop": loop_meta})
        (tmp / META).write_text(json.dumps(meta))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)  # a state exists whole or not at all
        for old in self.folder.iterdir():
            if old != final and (old.name.startswith("step-") or old.name.startswith(".step-")):
                shutil.rmtree(old, ignore_errors=True)
        self._last_save = time.monotonic()
        return final

    # ------------------------------------------------------------ internals

    def _listen(self) -> None:
        def stop(signum, frame):  # only a flag: the loop saves at the end of its step, where its state is whole
            self._stop = signum

        try:
            previous = signal.signal(signal.SIGTERM, stop)
        except ValueError:  # not the main thread: leave signals alone
            return
        if self._previous is None:
            self._previous = previous

    def _read(self, path: Path) -> tuple[dict, dict]:
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            meta = json.loads((path / META).read_text())
            tensors = load_file(str(path / TENSORS))
            assert isinstance(meta, dict) and isinstance(meta.get("step"), int), "no step"
        except (OSError, ValueError, AssertionError, SafetensorError) as e:
            raise UserError(f"resume state {path}: unreadable ({type(e).__name__}: {e}); delete {self.folder} to start "
                            "this run from step 0") from None
        if meta.get("key") != self.key or meta.get("kind") != self.kind or meta.get("format") != FORMAT:
            raise UserError(f"resume state {path}: written by {meta.get('kind')} run {meta.get('key')} (format "
                            f"{meta.get('format')}), not by this {self.kind} run {self.key} (format {FORMAT}); it is "
                            f"never resumed into another run: delete {self.folder} to start this run from step 0")
        return meta, tensors


def _tensor(value):
    import torch

    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(value))
    return value.detach().cpu().contiguous()


def _capture(optimizer, scheduler, rngs: dict) -> tuple[dict, dict]:
    """(tensors, JSON) of the optimiser, the scheduler and every random generator."""
    import torch

    tensors = {"rng.torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"rng.cuda.{i}"] = s
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    meta = {"rng": {"python": [version, list(internal), gauss], "numpy": [name, keys.tolist(), pos, has_gauss, cached],
                    "generators": {}}}
    for key, g in rngs.items():
        if isinstance(g, np.random.Generator):
            meta["rng"]["generators"][key] = g.bit_generator.state
        else:  # a torch.Generator
            tensors[f"rng.gen.{key}"] = g.get_state()
    if optimizer is not None:
        state = optimizer.state_dict()
        scalars: dict = {}
        for pid, entries in state["state"].items():
            for k, v in entries.items():  # AdamW keeps tensors only, "step" included; anything else goes to JSON
                if torch.is_tensor(v):
                    tensors[f"optimizer.{pid}.{k}"] = v.detach().cpu().contiguous()
                else:
                    scalars.setdefault(str(pid), {})[k] = v
        meta["optimizer"] = {"param_groups": state["param_groups"], "scalars": scalars}
    if scheduler is not None:
        meta["scheduler"] = scheduler.state_dict()
    return tensors, meta


def _restore(path: Path, meta: dict, tensors: dict, model, optimizer, scheduler, rngs: dict) -> Restored:
    import torch
    from safetensors.torch import load_model

    load_model(model, str(path / MODEL), strict=True)
    if optimizer is not None:
        state: dict = {}
        for key, value in tensors.items():
            if key.startswith("optimizer."):
                _, pid, name = key.split(".", 2)
                state.setdefault(int(pid), {})[name] = value
        for pid, entries in meta["optimizer"]["scalars"].items():
            state.setdefault(int(pid), {}).update(entries)
        # after the scheduler was built: building it sets the learning rate, which this restores
        optimizer.load_state_dict({"state": state, "param_groups": meta["optimizer"]["param_groups"]})
    if scheduler is not None:
        scheduler.load_state_dict(meta["scheduler"])
    rng = meta["rng"]
    version, internal, gauss = rng["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = rng["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(tensors["rng.torch"])
    cuda = sorted((int(k.rsplit(".", 1)[1]), v) for k, v in tensors.items() if k.startswith("rng.cuda."))
    if cuda and torch.cuda.is_available() and torch.cuda.device_count() == len(cuda):
        torch.cuda.set_rng_state_all([v for _, v in cuda])
    for key, g in rngs.items():
        if isinstance(g, np.random.Generator):
            g.bit_generator.state = rng["generators"][key]
        else:
            g.set_state(tensors[f"rng.gen.{key}"])
    loop_tensors = {k.removeprefix("loop."): v for k, v in tensors.items() if k.startswith("loop.")}
    return Restored(int(meta["step"]), meta.get("loop", {}), loop_tensors)
