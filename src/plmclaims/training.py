"""Fine-tuning on a GLUE task with any registered method, deterministic for a seed.

One run = (model, method, params, task, seed): train on the task's train split (optionally a seeded
sample), predict the dev split, and return the dev predictions in the same layout as an STS score
run (``<task>::pred``, ``<task>::gold``, ``<task>::subsets``), so the paired bootstrap and the
verdicts work unchanged. The trained and total parameter counts and the peak memory are recorded:
a PEFT claim is about quality per trained parameter.
"""
from __future__ import annotations

import resource
import time

import numpy as np

from . import checkpoint, methods, stats
from .data import seeded_subset
from .data.glue import GlueData
from .evaluation import glue_metrics
from . import optim

def sample(data: GlueData, n: int | None, seed: int) -> GlueData:
    """A seeded sample of at most n examples (the whole split when n is None or not smaller)."""
    keep = seeded_subset(len(data), n, seed)
    if keep is None:
        return data
    pick = lambda xs: [xs[i] for i in keep] if xs is not None else None  # noqa: E731
    return GlueData(data.task, data.split, pick(data.text_a), pick(data.text_b), pick(data.labels), data.files)


def _batches(tokenizer, data: GlueData, order: np.ndarray, batch_size: int, max_length: int, offset: float = 0.0):
    """Tokenised batches with labels; a regression target is shifted by `offset` (the training mean, see finetune)."""
    import torch

    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        a = [data.text_a[i] for i in idx]
        b = [data.text_b[i] for i in idx] if data.text_b is not None else None
        enc = tokenizer(a, b, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        dtype = torch.float if data.num_labels == 1 else torch.long
        enc["labels"] = torch.tensor([data.labels[i] - offset for i in idx] if data.num_labels == 1 else
                                     [data.labels[i] for i in idx], dtype=dtype)
        yield enc


def _room_for_text(model) -> int:
    """Positions left for text: soft prompts (prompt tuning) take up positions of a model with learned positions."""
    config = getattr(model, "config", None)
    room = int(getattr(config, "max_position_embeddings", 10**6) or 10**6)
    peft_config = getattr(model, "peft_config", {}).get("default") if hasattr(model, "peft_config") else None
    if peft_config is not None and type(peft_config).__name__ == "PromptTuningConfig":
        room -= int(peft_config.num_virtual_tokens)
    return room


def epoch_orders(n_examples: int, epochs: int, seed: int) -> list[np.ndarray]:
    """The data order: one seeded permutation of the examples per epoch (the order seed's only use besides the
    training sample and dropout, see finetune)."""
    rng = np.random.default_rng(seed)
    return [rng.permutation(n_examples) for _ in range(epochs)]


def run_seeds(params: dict, seed: int) -> tuple[int, int]:
    """(head_seed, order_seed) of a fine-tuning run: the method parameters `head_seed` and `order_seed`, each the
    run's seed where absent (so a run planned before the two existed keeps its key and its result)."""
    return int(params.get("head_seed", seed)), int(params.get("order_seed", seed))


def init_model(model_path: str, method: str, params: dict, num_labels: int, head_seed: int, order_seed: int):
    """The model ready to train, its fresh parameters (the classifier head, and LoRA, adapter or prompt weights)
    drawn from `head_seed`, and torch's generator left where `order_seed` puts it for the training loop (dropout).

    Why build it under the order seed first: building consumes a fixed number of draws (the shapes fix it), so the
    generator afterwards, which drives dropout, depends on the order seed alone; and with equal seeds this is exactly
    the single-seed run the plan already had (same draws, same result). The fresh parameters are then redrawn from
    the head seed in a forked generator, which leaves the order seed's stream (CPU and CUDA) untouched."""
    import torch
    from transformers import AutoModelForSequenceClassification

    def build():
        model = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=num_labels)
        return methods.prepare(method, model, params)

    torch.manual_seed(order_seed)
    model = build()
    if head_seed != order_seed:
        with torch.random.fork_rng():
            torch.manual_seed(head_seed)
            fresh = build()
        model.load_state_dict(fresh.state_dict())  # pre-trained weights are equal in both; only the fresh ones differ
    return model


def param_groups(model, lr: float, head_lr: float | None) -> list:
    """The trainable parameters, as one list, or (a recipe with its own `head_lr`) two groups: the task head's at
    head_lr and the rest at lr (prompt tuning's soft prompt at 0.3 and a fresh head at a fine-tuning rate)."""
    trained = [p for p in model.parameters() if p.requires_grad]
    if head_lr is None:
        return trained
    from .methods.heads import head_parameters

    head = head_parameters(model)
    return [{"params": [p for p in trained if id(p) not in head], "lr": lr},
            {"params": [p for p in trained if id(p) in head], "lr": float(head_lr)}]


def train_epochs(model, batches, n_examples: int, epochs: int, steps: int, lr: float, seed: int, device: str, desc: str,
                 progress: bool = True, recipe: dict | None = None, after_epoch=None,
                 resume: checkpoint.Resume | None = None) -> list[float]:
    """The training loop both runners share: the recipe's optimiser on the trainable parameters (default AdamW,
    weight decay 0.01), its warm-up share (default 6%) and schedule (default linear decay), a seeded permutation of
    the examples per epoch, stopping after `steps` (the last epoch cut short where the recipe counts steps);
    `batches(order)` yields model inputs with labels, `after_epoch(epoch)`, if given, runs after each epoch with the
    model in eval mode. Returns the loss per step; the model is left in eval mode.

    With `resume` (a checkpoint.Resume), a stopped run continues where its state was saved: the epochs done are
    skipped, the batches of the epoch in progress already trained on are built again and skipped. A state is saved
    right after a step, before that epoch's `after_epoch`, so the epoch's selection runs after the resume; what
    `after_epoch` keeps comes back through its `resume_state()` and `restore(meta, tensors)`, where it has them."""
    from tqdm.auto import tqdm

    recipe = recipe or {}
    opt = optim.build(param_groups(model, lr, recipe.get("head_lr")), lr, recipe)
    sched = optim.schedule(opt, int(float(recipe.get("warmup_ratio", 0.06)) * steps), steps,
                           recipe.get("schedule", "linear"))
    keeps = after_epoch is not None and hasattr(after_epoch, "resume_state")
    resume = resume or checkpoint.Resume(None, "", "")
    restored = resume.attach(model, opt, sched)
    losses, at = [], (0, 0)  # the epoch in progress and how many of its batches were trained
    if restored is not None:
        losses, at = list(restored.loop["losses"]), tuple(restored.loop["at"])
        if keeps:
            after_epoch.restore(restored.loop["after_epoch"],
                                {k.removeprefix("after_epoch."): v for k, v in restored.tensors.items()})

    def state(epoch: int, done: int):  # the loop's own part of the resume state
        meta, tensors = after_epoch.resume_state() if keeps else ({}, {})
        return ({"losses": losses, "at": [epoch, done], **({"after_epoch": meta} if keeps else {})},
                {f"after_epoch.{k}": v for k, v in tensors.items()})

    bar = tqdm(total=steps, initial=len(losses), desc=desc, unit="step", disable=not progress, mininterval=10)
    model.train()
    for epoch, order in enumerate(epoch_orders(n_examples, epochs, seed)):
        if epoch < at[0]:  # trained and scored before the stop
            continue
        for done, batch in enumerate(batches(order), start=1):
            if len(losses) >= steps:
                break
            if epoch == at[0] and done <= at[1]:
                continue
            loss = model(**{k: v.to(device) for k, v in batch.items()}).loss
            loss.backward()
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            losses.append(round(loss.item(), 4))
            bar.update(1)
            resume.step(len(losses), lambda: state(epoch, done))
        if after_epoch is not None:
            model.eval()
            after_epoch(epoch)
            model.train()
    resume.detach()
    bar.close()
    model.eval()
    return losses


def predict_dev(model, tokenizer, dev: GlueData, max_len: int, offset: float = 0.0, device: str = "cpu") -> np.ndarray:
    """The model's prediction for each dev example, in dev order (a regression output with `offset` added back; a
    class otherwise). Examples go through in order of length, 64 at a time, so a batch pads to its own longest
    example and not to the split's; attention masks the padding, so each prediction is the example's own."""
    import torch

    by_length = np.argsort([len(a) + (len(dev.text_b[i]) if dev.text_b is not None else 0) for i, a in enumerate(dev.text_a)],
                           kind="stable")
    preds = []
    with torch.inference_mode():
        for batch in _batches(tokenizer, dev, by_length, 64, max_len):
            logits = model(**{k: v.to(device) for k, v in batch.items() if k != "labels"}).logits.float().cpu().numpy()
            preds.append(logits[:, 0] + offset if dev.num_labels == 1 else logits.argmax(-1))
    pred = np.empty(len(dev), dtype=np.float64)
    pred[by_length] = np.concatenate(preds)
    return pred


def peak_memory_mb(device: str) -> float:
    """Peak GPU memory allocated, or the process's peak resident memory on CPU."""
    import torch

    if device == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# methods whose trained model is a plain transformers model once saved (LoRA merged into its weights); adapters and
# soft prompts live in modules that AutoModelForSequenceClassification cannot load back
SAVABLE_METHODS = ("full-finetuning", "bitfit", "lora")


def save_model(model, tokenizer, offset: float, out_dir) -> None:
    """The trained model (encoder + task head) and its tokenizer, loadable with AutoModelForSequenceClassification.
    A regression head predicts the target centred on the training mean: `plmclaims_target_offset` in its config is
    the mean to add back. Written beside and renamed into place, so a folder that exists is complete."""
    import shutil
    from pathlib import Path

    out_dir = Path(out_dir)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    if hasattr(model, "merge_and_unload"):  # a peft model (LoRA): fold the update into the base weights
        model = model.merge_and_unload()
    model.config.plmclaims_target_offset = offset
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)


class BestEpoch:
    """Checkpoint selection on dev (a recipe's `selection: best-dev`, as fairseq keeps checkpoint_best and the LoRA
    scripts score dev every epoch): after each epoch the dev predictions are scored by the task's first GLUE metric
    (glue_metrics.TASK_METRICS) and the best epoch's predictions, and with `keep_state` its weights, are kept. It
    selects on the split it reports, as those recipes do: the report says so (docs/recipes.md)."""

    def __init__(self, model, tokenizer, dev: GlueData, gold: np.ndarray, max_len: int, offset: float, device: str,
                 keep_state: bool):
        self.model, self.tokenizer, self.dev, self.gold = model, tokenizer, dev, gold
        self.max_len, self.offset, self.device, self.keep_state = max_len, offset, device, keep_state
        self.metric = glue_metrics.TASK_METRICS[dev.task][0]
        self.history: list[float] = []
        self.best: tuple[int, float, np.ndarray, dict | None] | None = None

    def __call__(self, epoch: int) -> None:
        pred = predict_dev(self.model, self.tokenizer, self.dev, self.max_len, self.offset, self.device)
        value = glue_metrics.score(self.dev.task, self.gold, pred)[self.metric]
        self.history.append(round(value, 4))
        best = self.best[1] if self.best is not None else float("nan")
        if self.best is None or value > best or (np.isnan(best) and not np.isnan(value)):  # the earliest of equals
            state = ({k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
                     if self.keep_state else None)
            self.best = (epoch, value, pred, state)

    def finish(self) -> np.ndarray:
        """The best epoch's dev predictions, its weights loaded back into the model where they were kept."""
        if self.best is None:
            raise RuntimeError("no epoch was scored; best-dev selection needs at least one epoch")
        if self.best[3] is not None:
            self.model.load_state_dict(self.best[3])
        return self.best[2]

    def record(self) -> dict:
        return {"rule": "best-dev", "metric": self.metric, "epoch": self.best[0] + 1, "dev_by_epoch": self.history}

    def resume_state(self) -> tuple[dict, dict]:
        """What the selection has kept so far, for the training loop's resume state (train_epochs): the scores by
        epoch, the best epoch and its unrounded score (JSON), its predictions and kept weights (tensors)."""
        if self.best is None:
            return {"history": self.history, "best": None}, {}
        epoch, value, pred, state = self.best
        return ({"history": self.history, "best": [epoch, float(value)]},
                {"pred": pred, **{f"state.{k}": v for k, v in (state or {}).items()}})

    def restore(self, meta: dict, tensors: dict) -> None:
        """Take back what resume_state gave, so that later epochs are compared with the same best."""
        self.history = list(meta["history"])
        if meta["best"] is None:
            self.best = None
            return
        epoch, value = meta["best"]
        state = {k.removeprefix("state."): v for k, v in tensors.items() if k.startswith("state.")}
        self.best = (int(epoch), float(value), tensors["pred"].numpy(), state if self.keep_state else None)


def finetune(model_path: str, method: str, params: dict, train: GlueData, dev: GlueData, budget: dict, seed: int,
             progress: bool = True, save_to=None, resume: checkpoint.Resume | None = None) -> tuple[dict, dict]:
    """Train with `method` under `budget` (epochs or steps, batch_size, lr, max_length, max_train, and the recipe's
    optimizer, weight_decay, warmup_ratio, schedule, head_lr and selection: train_epochs, BestEpoch); return (values,
    predictions).
    With `save_to` (a folder), also save the trained model there (save_model), after predicting: the run's values
    and predictions are exactly those of the same run without it. `resume`: the run's resume state (train_epochs)."""
    import torch
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    if save_to is not None and method not in SAVABLE_METHODS:  # before training, not after
        raise ValueError(f"method {method!r}: its trained model cannot be saved as a plain transformers model; "
                         f"savable: {', '.join(SAVABLE_METHODS)}")
    # Two seeds (Dodge et al. 2020): the head seed draws the freshly initialised weights, the order seed the training
    # sample, the order of the examples and dropout (training-time noise, drawn step by step like the order, so the
    # head seed names a starting point and nothing else). Both default to the run's seed.
    head_seed, order_seed = run_seeds(params, seed)
    np.random.seed(order_seed)
    t0 = time.time()
    train = sample(train, budget.get("max_train"), order_seed)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = init_model(model_path, method, params, dev.num_labels, head_seed, order_seed)
    counts = methods.count_parameters(model)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    bs, epochs, max_len = int(budget.get("batch_size", 16)), int(budget.get("epochs", 1)), int(budget.get("max_length", 128))
    max_len = min(max_len, _room_for_text(model))
    lr = float(params.get("lr", budget.get("lr", 2e-5)))
    per_epoch = -(-len(train) // bs)
    if budget.get("steps"):  # a recipe that counts steps (prompt tuning's 30 000): as many epochs as they take
        steps = int(budget["steps"])
        epochs = -(-steps // per_epoch)
    else:
        steps = epochs * per_epoch
    # A regression head starts near 0 while STS-B's scores lie in 0-5 (mean about 2.7): in a short budget full
    # fine-tuning spends its steps moving the output to the mean and collapses to near-constant predictions (held-out
    # Spearman 23 at micro, 77 with centred targets; benchmarks/select_lr_micro.py). Every method trains on targets
    # centred on the training mean and predicts with it added back; correlations do not change under the shift.
    offset = float(np.mean(train.labels)) if dev.num_labels == 1 else 0.0
    gold = np.asarray(dev.labels, dtype=np.float64)
    chosen = BestEpoch(model, tokenizer, dev, gold, max_len, offset, device, keep_state=save_to is not None) \
        if budget.get("selection", "last") == "best-dev" else None
    losses = train_epochs(model, lambda order: _batches(tokenizer, train, order, bs, max_len, offset), len(train),
                          epochs, steps, lr, order_seed, device, f"{method} {train.task} seed {head_seed}/{order_seed}",
                          progress, recipe=budget, after_epoch=chosen, resume=resume)
    pred = chosen.finish() if chosen is not None else predict_dev(model, tokenizer, dev, max_len, offset, device)
    peak = peak_memory_mb(device)
    values = {"benchmarks": {dev.task: {**glue_metrics.score(dev.task, gold, pred), "examples": len(dev)}},
              "parameters": counts, "train_examples": len(train), "steps": steps, "target_offset": offset, "loss_last": float(np.mean(losses[-20:])),
              "loss_history": losses, "head_seed": head_seed, "order_seed": order_seed, "peak_memory_mb": round(peak, 1),
              "device": device, "train_wall_s": round(time.time() - t0, 2),
              **({"selection": chosen.record()} if chosen is not None else {})}
    predictions = {f"{dev.task}::pred": pred, f"{dev.task}::gold": gold, f"{dev.task}::subsets": np.asarray([dev.task] * len(dev)),
                   f"{dev.task}::index": stats.document_index(dev.text_a, dev.text_b)}  # verdicts pair runs on it
    degenerate = stats.degenerate(pred, losses)  # constant or NaN predictions, NaN or diverged loss: no number to bootstrap
    if degenerate:
        values["degenerate"] = f"{dev.task}: {degenerate}"
    if save_to is not None:
        save_model(model.cpu(), tokenizer, offset, save_to)
    return values, predictions
