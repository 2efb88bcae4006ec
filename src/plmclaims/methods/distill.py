"""A shallower student initialised from a BERT-style teacher's layers (P10; DistilBERT's initialisation).

Sanh et al. (2019) build DistilBERT by "taking one layer out of two" of BERT, keeping the embeddings. The student
here is the teacher's own class with ``num_hidden_layers`` reduced; its embeddings, the chosen transformer layers
(in order) and the pooler are copied from the teacher, so before any distillation it is the teacher with layers
dropped. `distill` then trains it so its sentence vectors match the teacher's: sentence-transformers' MSE
distillation (Reimers & Gurevych 2020), the loss its smaller students of sentence encoders are trained with.
"""
from __future__ import annotations

import copy
import logging

import numpy as np

from ..encoders import POOLINGS
from ..errors import UserError
from ..optim import adamw, linear_warmup_decay

WARMUP_SHARE = 0.1  # sentence-transformers' usual warm-up: the first 10% of the steps
log = logging.getLogger("plmclaims")
TRACK = 256  # sentences the MSE before and after training is reported on (a seeded sample of the training sentences)


def every_other_layer(n_layers: int) -> list[int]:
    """DistilBERT's choice, one layer out of two: 0, 2, 4, ... (half the depth, rounded up)."""
    return list(range(0, n_layers, 2))


def student_from_teacher(teacher, layers: list[int] | None = None):
    """A new model of the teacher's class with the teacher's `layers` (default: every other one) and embeddings."""
    n = teacher.config.num_hidden_layers
    layers = every_other_layer(n) if layers is None else list(layers)
    if not layers or any(not 0 <= i < n for i in layers) or len(set(layers)) != len(layers):
        raise UserError(f"student layers {layers} invalid; give distinct teacher layer indices in 0..{n - 1}")
    config = copy.deepcopy(teacher.config)
    config.num_hidden_layers = len(layers)
    student = type(teacher)(config).to(teacher.dtype)
    # everything outside the layer stack (embeddings, pooler, a task head) is copied whole
    in_stack = lambda key: "encoder.layer." in key  # noqa: E731
    outside = {k: v for k, v in teacher.state_dict().items() if not in_stack(k)}
    missing, unexpected = student.load_state_dict(outside, strict=False)
    if unexpected or not all(in_stack(k) for k in missing):
        raise UserError(f"{type(teacher).__name__}: student and teacher differ outside the layers: "
                        f"{unexpected or [k for k in missing if not in_stack(k)]}")
    for s_layer, t_index in zip(student.base_model.encoder.layer, layers):
        s_layer.load_state_dict(teacher.base_model.encoder.layer[t_index].state_dict())
    student.train(teacher.training)
    return student


def pooled(model, batch: dict, pooling: str = "mean"):
    """Differentiable sentence vectors of a tokenised batch: the torch twin of encoders.pool over encode_layers."""
    out = model(**batch, output_hidden_states=True)
    hs, mask = out.hidden_states, batch["attention_mask"].unsqueeze(-1).to(out.hidden_states[-1].dtype)
    mean = lambda i: (hs[i] * mask).sum(1) / mask.sum(1).clamp(min=1)  # noqa: E731
    last = len(hs) - 1
    pools = {"mean": lambda: mean(last), "cls": lambda: out.pooler_output, "cls-before-pooler": lambda: hs[-1][:, 0],
             "first-last": lambda: (mean(1) + mean(last)) / 2, "static-last": lambda: (mean(0) + mean(last)) / 2,
             "last2avg": lambda: (mean(last - 1) + mean(last)) / 2}
    if pooling not in pools:
        raise UserError(f"pooling {pooling!r} unknown; allowed values: {', '.join(POOLINGS)}")
    if pooling == "cls" and out.pooler_output is None:
        raise UserError("pooling 'cls' needs a pooler output, and this model has none; use 'cls-before-pooler'")
    return pools[pooling]()


def _vectors(model, tokenizer, sentences: list[str], pooling: str, max_length: int, batch_size: int = 64):
    """Pooled vectors of `sentences` without gradients (eval mode), in the given order; batches sorted by length."""
    import torch

    was_training, out = model.training, [None] * len(sentences)
    model.eval()
    order = np.argsort([-len(s) for s in sentences], kind="stable")  # length-sorted batches pad less
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            x = pooled(model, _tokens(tokenizer, [sentences[i] for i in idx], max_length), pooling).float()
            for i, v in zip(idx, x):
                out[i] = v
    model.train(was_training)
    return torch.stack(out)


def _tokens(tokenizer, texts: list[str], max_length: int) -> dict:
    b = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    return {k: v for k, v in b.items() if k in ("input_ids", "attention_mask", "token_type_ids")}


def distill(teacher, tokenizer, sentences: list[str], steps: int, batch_size: int, lr: float, seed: int,
            max_length: int = 128, pooling: str = "mean", layers: list[int] | None = None, resume=None):
    """Distil a student (student_from_teacher: the teacher's embeddings and every other layer) on `sentences`: MSE
    between the student's and the teacher's pooled vectors, AdamW with linear warm-up (10% of steps) and decay, in
    train mode (dropout on, as sentence-transformers trains), on a seeded data order (reshuffled each pass). The same
    seed gives the same student. Returns (student in eval mode, a record of what training did). `resume` (a
    checkpoint.Resume): a stopped run continues from its saved state (the data order is drawn again from the seed)."""
    import torch

    from .. import checkpoint

    sentences = list(dict.fromkeys(sentences))  # a repeated sentence would only weigh its target twice
    if not sentences or steps < 1 or batch_size < 1:
        raise UserError(f"distillation needs sentences, steps >= 1 and batch_size >= 1; got {len(sentences)} sentences, "
                        f"steps {steps}, batch_size {batch_size}")
    torch.manual_seed(seed)  # dropout masks
    targets = _vectors(teacher, tokenizer, sentences, pooling, max_length)
    student = student_from_teacher(teacher, layers)
    rng = np.random.default_rng(seed)
    track = np.sort(rng.choice(len(sentences), min(TRACK, len(sentences)), replace=False))
    mse = lambda: float(torch.nn.functional.mse_loss(  # noqa: E731
        _vectors(student, tokenizer, [sentences[i] for i in track], pooling, max_length), targets[torch.as_tensor(track)]))
    mse_start = mse()
    order = np.concatenate([rng.permutation(len(sentences)) for _ in range(-(-steps * batch_size // len(sentences)))])
    opt = adamw(student.parameters(), lr=lr, weight_decay=0.01)
    sched = linear_warmup_decay(opt, int(WARMUP_SHARE * steps), steps)
    student.train()
    resume = resume or checkpoint.Resume(None, "", "")
    restored = resume.attach(student, opt, sched)
    start, history = (restored.step, list(restored.loop["history"])) if restored else (0, [])
    for step in range(start, steps):
        idx = order[step * batch_size:(step + 1) * batch_size]
        loss = torch.nn.functional.mse_loss(
            pooled(student, _tokens(tokenizer, [sentences[i] for i in idx], max_length), pooling), targets[torch.as_tensor(idx)])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        history.append(loss.detach().item())
        if (step + 1) % 50 == 0 or step + 1 == steps:
            log.info("distill step %d/%d: MSE %.5f", step + 1, steps, history[-1])
        resume.step(step + 1, lambda: ({"history": history}, {}))
    resume.detach()
    student.eval()
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    return student, {"steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed, "sentences": len(sentences),
                     "final_loss": history[-1], "loss_history": [round(x, 8) for x in history],
                     "mse_start": mse_start, "mse_end": mse(), "mse_sentences": len(track),
                     "teacher_layers": teacher.config.num_hidden_layers, "student_layers": student.config.num_hidden_layers,
                     "teacher_parameters": count(teacher), "student_parameters": count(student)}
