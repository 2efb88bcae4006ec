"""Non-language tasks the workflow generates itself (Lu et al. 2021, section 2.1), for the transfer family.

- `bit-memory`: the model is shown 5 random bitstrings, then a copy of one of them with each bit masked (set to 0)
  with probability 0.5, and must produce the original string. Bits are +1/-1 values, `bits_per_token` to a token,
  so an example is 6 * bits / bits_per_token tokens. Scored on the masked bits only: a model that copies the visible
  bits and guesses the rest gets 50% there (75% over all bits), so the masked bits' floor is the coin's.
- `bit-xor`: two random bitstrings of `bits` bits, one bit to a token; the model produces their elementwise XOR,
  bit i read at the second string's i-th token (so it must look back at the first string's).
- `listops`: nested MAX / MIN / MED / SM (sum modulo 10) expressions over the digits 0-9, as in the Long Range
  Arena's ListOps ("[MAX 2 9 [MIN 4 7 ] 0 ]" -> 9); the answer is one of 10 classes, read at the last token
  (sequences are left-padded, so a causal model has seen the whole expression there). Classes are balanced by
  rejection: each answer has the same number of examples, so chance is 10%.

Every generator is deterministic per seed (numpy's Generator from one SeedSequence): the same seed and settings give
the same bytes, so a pre-trained run and its random-weights twin score the same test items, paired. Only numpy:
the claim plan reads the sequence lengths without importing torch.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

from ..errors import UserError

TASKS = {"bit-memory": 2, "bit-xor": 2, "listops": 10}  # task -> classes per scored item
SPLIT_CODE = {"train": 0, "test": 1}
DEFAULTS = {
    "bit-memory": {"bits": 50, "strings": 5, "bits_per_token": 5, "mask": 0.5},
    "bit-xor": {"bits": 5},
    "listops": {"max_depth": 3, "max_args": 4, "max_length": 60, "leaf": 0.3},
}

# ListOps vocabulary: 0 pads, then the digits, the four operators and the closing bracket
OPS = ("MAX", "MIN", "MED", "SM")
PAD = 0
DIGIT = {d: 1 + d for d in range(10)}
OPEN = {op: 11 + i for i, op in enumerate(OPS)}
CLOSE = 15
VOCAB = 16


@dataclass
class TaskData:
    """One split of a task. Inputs are `x` (n, T, d) float values for bit tasks, or (n, T) token ids for ListOps; the
    head reads the tokens at `out_pos` and predicts `per_token` items at each, so an example has K = len(out_pos) *
    per_token items with labels `y` (n, K); `scored` (n, K) marks the items that are scored (bit memory: the masked
    bits); `mask` (n, T) is 1 on real tokens."""

    task: str
    x: np.ndarray
    mask: np.ndarray
    y: np.ndarray
    scored: np.ndarray
    out_pos: np.ndarray
    per_token: int
    classes: int

    @property
    def tokens(self) -> bool:
        return self.x.dtype.kind == "i"

    def __len__(self) -> int:
        return len(self.y)


def settings_of(task: str, given: dict | None) -> dict:
    if task not in TASKS:
        raise UserError(f"task {task!r}: not a generated task; allowed values: {', '.join(TASKS)}")
    extra = set(given or {}) - set(DEFAULTS[task]) - {"steps"}
    if extra:
        raise UserError(f"transfer.tasks.{task}: unknown settings {', '.join(sorted(extra))}; allowed: "
                        f"{', '.join(DEFAULTS[task])}, steps")
    return {**DEFAULTS[task], **{k: v for k, v in (given or {}).items() if k != "steps"}}


def sequence_length(task: str, given: dict | None = None) -> int:
    """Tokens per example: what the model's position embeddings must cover."""
    s = settings_of(task, given)
    if task == "bit-memory":
        return (s["strings"] + 1) * _tokens_per_string(s)
    if task == "bit-xor":
        return 2 * s["bits"]
    return s["max_length"]


def _tokens_per_string(s: dict) -> int:
    if s["bits"] % s["bits_per_token"]:
        raise UserError(f"transfer.tasks.bit-memory: bits ({s['bits']}) must be a multiple of bits_per_token "
                        f"({s['bits_per_token']})")
    return s["bits"] // s["bits_per_token"]


def rng_for(seed: int, split: str) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), SPLIT_CODE[split]]))


def generate(task: str, n: int, seed: int, split: str, given: dict | None = None) -> TaskData:
    """`n` examples of `task` for one split; train and test come from different streams of the same seed."""
    s = settings_of(task, given)
    rng = rng_for(seed, split)
    return {"bit-memory": bit_memory, "bit-xor": bit_xor, "listops": listops}[task](n, rng, **s)


def bit_memory(n: int, rng: np.random.Generator, bits: int, strings: int, bits_per_token: int, mask: float) -> TaskData:
    per = bits // bits_per_token
    if bits % bits_per_token:
        raise UserError(f"transfer.tasks.bit-memory: bits ({bits}) must be a multiple of bits_per_token ({bits_per_token})")
    memory = rng.integers(0, 2, size=(n, strings, bits))
    which = rng.integers(0, strings, size=n)
    target = memory[np.arange(n), which]  # (n, bits)
    hidden = rng.random((n, bits)) < mask
    signed = 2.0 * memory - 1.0
    query = np.where(hidden, 0.0, 2.0 * target - 1.0)
    seq = np.concatenate([signed, query[:, None]], axis=1)  # (n, strings + 1, bits)
    x = seq.reshape(n, (strings + 1) * per, bits_per_token).astype(np.float32)
    out_pos = np.arange(strings * per, (strings + 1) * per)
    return TaskData("bit-memory", x, np.ones(x.shape[:2], np.int64), target.astype(np.int64), hidden, out_pos,
                    bits_per_token, 2)


def bit_xor(n: int, rng: np.random.Generator, bits: int) -> TaskData:
    a = rng.integers(0, 2, size=(n, bits))
    b = rng.integers(0, 2, size=(n, bits))
    x = (2.0 * np.concatenate([a, b], axis=1) - 1.0)[..., None].astype(np.float32)  # one bit to a token
    y = np.bitwise_xor(a, b).astype(np.int64)
    return TaskData("bit-xor", x, np.ones(x.shape[:2], np.int64), y, np.ones_like(y, bool), np.arange(bits, 2 * bits), 1, 2)


# ---------------------------------------------------------------- ListOps

def evaluate(tree) -> int:
    """The value of a ListOps tree: a digit, or (operator, [arguments]). MED is the median of the arguments rounded
    down (Long Range Arena: int(np.median)); SM is their sum modulo 10."""
    if isinstance(tree, int):
        return tree
    op, args = tree
    vals = [evaluate(a) for a in args]
    if op == "MAX":
        return max(vals)
    if op == "MIN":
        return min(vals)
    if op == "MED":
        return int(statistics.median(vals))
    if op == "SM":
        return sum(vals) % 10
    raise ValueError(f"unknown ListOps operator {op!r}; allowed: {', '.join(OPS)}")


def to_text(tree) -> str:
    if isinstance(tree, int):
        return str(tree)
    op, args = tree
    return f"[{op} " + " ".join(to_text(a) for a in args) + " ]"


def parse(text: str):
    """A tree from its text ('[MAX 2 9 [MIN 4 7 ] 0 ]'): for tests and for reading examples back."""
    stack: list = [("", [])]
    for tok in text.split():
        if tok.startswith("["):
            stack.append((tok[1:], []))
        elif tok == "]":
            node = stack.pop()
            stack[-1][1].append(node)
        else:
            stack[-1][1].append(int(tok))
    (_, (tree,)), = stack
    return tree


def token_ids(tree) -> list[int]:
    if isinstance(tree, int):
        return [DIGIT[tree]]
    op, args = tree
    return [OPEN[op]] + [t for a in args for t in token_ids(a)] + [CLOSE]


def _tree(rng: np.random.Generator, depth: int, max_depth: int, max_args: int, leaf: float):
    if depth > 0 and (depth >= max_depth or rng.random() < leaf):
        return int(rng.integers(10))
    op = OPS[int(rng.integers(len(OPS)))]
    return op, [_tree(rng, depth + 1, max_depth, max_args, leaf) for _ in range(int(rng.integers(2, max_args + 1)))]


def listops(n: int, rng: np.random.Generator, max_depth: int, max_args: int, max_length: int, leaf: float) -> TaskData:
    quota = np.full(10, n // 10)
    quota[: n % 10] += 1  # n not a multiple of 10: the first classes get one more
    kept: list[tuple[list[int], int]] = []
    tries, limit = 0, 200 * n + 10000
    while quota.sum() and tries < limit:
        tries += 1
        tree = _tree(rng, 0, max_depth, max_args, leaf)
        ids, label = token_ids(tree), evaluate(tree)
        if len(ids) <= max_length and quota[label]:
            quota[label] -= 1
            kept.append((ids, label))
    if quota.sum():
        raise UserError(f"transfer.tasks.listops: no balanced sample of {n} expressions within {max_length} tokens "
                        f"(answers {np.flatnonzero(quota).tolist()} too rare); raise max_length or lower max_depth")
    order = rng.permutation(n)
    x = np.full((n, max_length), PAD, np.int64)
    mask = np.zeros((n, max_length), np.int64)
    y = np.zeros((n, 1), np.int64)
    for row, k in enumerate(order):
        ids, label = kept[k]
        x[row, max_length - len(ids):] = ids  # left-padded: the answer is read at the last token
        mask[row, max_length - len(ids):] = 1
        y[row, 0] = label
    return TaskData("listops", x, mask, y, np.ones_like(y, bool), np.array([max_length - 1]), 1, 10)


def item_ids(data: TaskData, split_seed: int) -> np.ndarray:
    """One string per scored item, '<task>:<seed>:<example>:<slot>': the identity the verdict pairs runs on."""
    rows, cols = np.nonzero(data.scored)
    return np.array([f"{data.task}:{split_seed}:{r}:{c}" for r, c in zip(rows, cols)])
