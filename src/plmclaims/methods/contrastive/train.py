"""The one training loop of every contrastive objective: same data, budget, schedule and checkpoint selection.

Checkpoint selection follows the recipes (SimCSE, DiffCSE, PromptBERT, ConSERT all select on STS-B dev): every
`eval_every` steps and at the last step, the Spearman of cosine on STS-B dev with the objective's test-time
`embed`; the best state is kept in memory (a copy on the CPU) and loaded back at the end. Each evaluation also records
the alignment and uniformity of the dev vectors (dev_measures), from the same forward pass.
"""
from __future__ import annotations

import time

import numpy as np

from . import get
from ... import checkpoint
from ...errors import UserError

BUDGET_KEYS = {"steps", "batch_size", "max_length", "lr", "eval_every", "warmup", "weight_decay", "selection",
               "eval_max_length"}
REQUIRED_BUDGET = {"steps", "batch_size", "max_length", "lr", "eval_every"}
SELECTIONS = ("best-dev", "last")


def check_budget(budget: dict) -> dict:
    unknown, missing = set(budget) - BUDGET_KEYS, REQUIRED_BUDGET - set(budget)
    if unknown or missing:
        raise KeyError(f"training budget: unknown keys {sorted(unknown)}, missing {sorted(missing)}; "
                       f"allowed: {sorted(BUDGET_KEYS)} (warmup optional, default 0)")
    if budget.get("selection", SELECTIONS[0]) not in SELECTIONS:
        raise KeyError(f"training budget: selection {budget['selection']!r} unknown; allowed: {', '.join(SELECTIONS)}")
    return {"warmup": 0, **budget}


# SimCSE section 5 (after Wang & Isola 2020): positive pairs are STS-B dev pairs scored above 4 of 5
POSITIVE_SCORE = 4.0


def dev_measures(objective, dev, batch_size: int, max_length: int) -> dict:
    """STS-B dev from one forward pass (each unique sentence embedded once): the Spearman of cosine, which selects the
    checkpoint, and the two measures SimCSE reads its training with (Wang & Isola 2020), on L2-normalised vectors:
    alignment = mean squared distance of positive pairs (gold > 4; lower is better) and uniformity = log mean
    exp(-2 x squared distance) over all pairs of distinct sentences (lower is more uniform). They tell why a score
    moves: vectors that spread apart (uniformity falls) while true paraphrases drift apart too (alignment rises)
    separate sentences without ranking them."""
    from ...stats import spearman

    sentences = dev.sentences()
    index = {s: i for i, s in enumerate(sentences)}
    vec = np.asarray(objective.embed(sentences, batch_size, max_length), dtype=np.float64)
    vec = vec / np.clip(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12, None)
    a = vec[[index[s] for s in dev.sentence1]]
    b = vec[[index[s] for s in dev.sentence2]]
    scores = np.asarray(dev.scores, dtype=np.float64)
    positive = scores > POSITIVE_SCORE
    # exp(-2 d^2) of unit vectors is exp(4 (cos - 1)), worked in place in ONE n x n buffer (STS-B dev: 3000 sentences,
    # 72 MB; a run's peak memory includes it), cos clipped at 1 as d^2 is at 0; the diagonal (a sentence with itself)
    # is taken out of the sum
    kernel = vec @ vec.T
    np.minimum(kernel, 1.0, out=kernel)
    kernel -= 1.0
    kernel *= 4.0
    np.exp(kernel, out=kernel)
    n = len(vec)
    off_diagonal = (kernel.sum() - np.trace(kernel)) / (n * (n - 1))
    return {"stsb_dev_spearman": spearman((a * b).sum(1), scores),
            "alignment": float(((a[positive] - b[positive]) ** 2).sum(1).mean()) if positive.any() else float("nan"),
            "uniformity": float(np.log(off_diagonal))}


def dev_spearman(objective, dev, batch_size: int, max_length: int) -> float:
    """STS-B dev Spearman of cosine (the checkpoint-selection score)."""
    return dev_measures(objective, dev, batch_size, max_length)["stsb_dev_spearman"]


class Batches:
    """Example indices per step: seeded permutations, epoch after epoch, the last short batch of an epoch dropped
    (in-batch negatives need full batches). Each epoch's permutation is drawn from `rng` when its first batch is
    asked for, after the previous step's augmentations drew from the same generator. `order` is the permutation of
    the epoch in progress: with it and `start` (the steps done) the batches continue where a stopped run left them."""

    def __init__(self, n_examples: int, batch_size: int, steps: int, rng: np.random.Generator, start: int = 0,
                 order: np.ndarray | None = None):
        self.n, self.size, self.steps, self.rng = n_examples, batch_size, steps, rng
        self.start, self.order = start, order

    def __iter__(self):
        per_epoch = max(1, self.n // self.size)
        for step in range(self.start, self.steps):
            i = step % per_epoch
            if i == 0 or self.order is None:
                self.order = self.rng.permutation(self.n)
            yield self.order[i * self.size:(i + 1) * self.size]


def train(objective: str, model_path: str, params: dict, corpus, dev, budget: dict, seed: int, device: str,
          random_weights: bool = False, desc: str = "", progress: bool = True, resume=None) -> dict:
    """Train `objective` from `model_path` on `corpus`; see notes/contrastive-api.md for the returned dict.

    Same seed, same bytes: the weights (torch.manual_seed before loading), the batches and augmentations (one numpy
    Generator from the seed) and the dropout masks (the torch seed) are all fixed by `seed`. With `resume` (a
    checkpoint.Resume), a stopped run continues from its saved state: weights, optimiser, schedule, generators, the
    epoch's permutation, and the selection history with the best weights so far."""
    import torch
    from tqdm.auto import tqdm

    from ...optim import adamw, linear_warmup_decay
    from ...training import peak_memory_mb

    budget = check_budget(budget)
    module = get(objective)
    torch.manual_seed(seed)
    model = module.Objective(model_path, params, seed, random_weights=random_weights).to(device)
    model.prepare(corpus)
    examples = corpus.documents if module.INPUT == "documents" else corpus.sentences
    if len(examples) < budget["batch_size"]:
        raise UserError(f"contrastive objective {objective}: the corpus has {len(examples)} training {module.INPUT} for a "
                        f"batch of {budget['batch_size']}; lower the budget's batch_size or give the corpus more text")
    rng = np.random.default_rng(seed)
    opt = adamw([p for p in model.parameters() if p.requires_grad], lr=budget["lr"],
                weight_decay=float(budget.get("weight_decay", 0.01)))
    sched = linear_warmup_decay(opt, budget["warmup"], budget["steps"])
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    eval_batch = max(64, budget["batch_size"])
    # the dev sentences cut where the recipe's own evaluation cuts them (SentEval's batcher: not at all)
    eval_length = int(budget.get("eval_max_length", budget["max_length"]))
    last_only = budget.get("selection") == "last"  # a recipe without checkpoint selection: its last step

    def evaluate(step: int) -> None:
        nonlocal best_state, best
        measured = dev_measures(model, dev, eval_batch, eval_length)
        rho = measured["stsb_dev_spearman"]
        history.append({"step": step, **measured})
        if last_only:
            if step == budget["steps"]:
                best = history[-1]  # the model as it ends is the result: nothing to copy and load back
            return
        if step > 0 and (best is None or rho > best["stsb_dev_spearman"]):  # strict: the earliest of equal steps
            best = history[-1]
            best_state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}

    def state():  # the loop's own part of the resume state
        best_index = None if best is None else next(i for i, h in enumerate(history) if h is best)
        return ({"history": history, "best_index": best_index, "losses": losses, "train_seconds": train_seconds},
                {"order": data.order, **{f"best.{k}": v for k, v in (best_state or {}).items()}})

    resume = resume or checkpoint.Resume(None, "", "")
    restored = resume.attach(model, opt, sched, {"batches": rng})
    if restored is None:
        # step 0 is recorded (the figure's starting point) but never selected: the result must be a trained model
        history, best, best_state = [], None, None
        evaluate(0)
        losses, train_seconds, start = [], 0.0, 0
        data = Batches(len(examples), budget["batch_size"], budget["steps"], rng)
    else:
        r = restored.loop
        history, losses, train_seconds, start = r["history"], r["losses"], r["train_seconds"], restored.step
        best = None if r["best_index"] is None else history[r["best_index"]]
        best_state = {k.removeprefix("best."): v for k, v in restored.tensors.items() if k.startswith("best.")} or None
        data = Batches(len(examples), budget["batch_size"], budget["steps"], rng, start,
                       restored.tensors["order"].numpy())
    model.train()
    bar = tqdm(total=budget["steps"], initial=start, desc=desc or objective, unit="step", disable=not progress,
               mininterval=10)
    for step, idx in enumerate(data, start=start + 1):
        t0 = time.perf_counter()
        batch = model.make_batch([examples[i] for i in idx], rng, budget["max_length"])
        batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
            loss = model.loss(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # the HF Trainer default the recipes ran with
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        model.after_step()
        losses.append(float(loss.detach()))
        train_seconds += time.perf_counter() - t0
        bar.update(1)
        if step % budget["eval_every"] == 0 or step == budget["steps"]:
            evaluate(step)
            model.train()
        resume.step(step, state)
    resume.detach()
    bar.close()
    if best is None:  # steps 0: the untrained model is the result (a released checkpoint's evaluation)
        best = history[0]
    elif best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    return {"objective": objective, "history": history, "best_step": best["step"],
            "best_spearman": best["stsb_dev_spearman"], "losses": losses,
            "steps_per_second": budget["steps"] / train_seconds if train_seconds else float("nan"),
            "peak_memory_mb": peak_memory_mb(device),
            "sentences_seen": budget["steps"] * budget["batch_size"],  # DeCLUTR: documents, one anchor each by default
            "budget": budget, "seed": seed, "objective_params": model.params, "random_weights": random_weights,
            "model": model}
