"""The micro-BERT: a small raw encoder pre-trained with MLM by the workflow itself.

No raw BERT checkpoint can be installed offline, so the micro tier builds one from text that
installs from the package registry: Penn Treebank (``treebank``) plus the English Wikipedia
extract in gensim's test data. Training is deterministic for a given seed: a fixed number of
steps (never a wall-clock budget), a seeded masking generator and a fixed data order.
The weights are saved at the steps the tier lists (later probing claims read them); a stopped run resumes from
its resume state (plmclaims.checkpoint), which lives apart from those outputs.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .. import checkpoint
from ..data import sentences
from ..errors import UserError
from ..optim import adamw, linear_warmup_decay
from ..provenance import atomic_write_json, sha256_file

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
MASK_PROBABILITY = 0.15  # BERT's share of positions chosen for the MLM loss (the plan prices the head's logits by it)


def _wiki_sentences(path: Path) -> list[str]:
    """The Wikipedia extract's sentences in file order (the contrastive objectives read the same articles whole)."""
    return [s for article in sentences.wiki_articles(path) for s in article]


def build_corpus(out_path: Path) -> dict:
    """Write the pre-training text, one sentence a line; return the sources with sha256."""
    import treebank

    ptb = sentences.ptb_sentences(treebank.penn["train"])
    wiki_path = sentences.wiki_path()
    wiki = _wiki_sentences(wiki_path)
    lines = ptb + wiki
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(out_path)
    return {"sentences": {"ptb-train": len(ptb), "gensim-enwiki": len(wiki)},
            "sources": {"treebank:penn/train": sentences.sha_text(treebank.penn["train"]), str(wiki_path): sha256_file(wiki_path)},
            "sha256": sha256_file(out_path)}


def train_tokenizer(corpus: Path, vocab_size: int, out_dir: Path, max_length: int) -> None:
    """A lower-casing WordPiece tokenizer trained with `tokenizers`, saved in transformers' format.

    The same corpus gives a byte-identical tokenizer.json. `tokenizers`' WordPiece trainer numbers the
    continuation pieces ("##e") in hash-map order, which changes from process to process, and breaks ties
    between equally frequent merges by those numbers, so even the vocabulary could differ
    (huggingface/tokenizers#1794). Handing the trainer every continuation piece of the corpus up front, in
    sorted order, fixes their numbers and with them every merge; they are then turned back into ordinary
    vocabulary entries.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    def fresh(model):
        tok = Tokenizer(model)
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        return tok

    tok = fresh(models.WordPiece(unk_token="[UNK]"))
    lines = corpus.read_text().splitlines()
    continuing = sorted({c for line in lines for word, _ in tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(line))
                         for c in word[1:]})
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=2,
                                        special_tokens=SPECIAL_TOKENS + [f"##{c}" for c in continuing])
    tok.train_from_iterator(lines, trainer)
    # rebuild from the trained vocabulary so that only the real special tokens are special
    tok = fresh(models.WordPiece(tok.get_vocab(with_added_tokens=False), unk_token="[UNK]"))
    tok.add_special_tokens(SPECIAL_TOKENS)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=max_length)
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out_dir))


def bert_config(arch: dict, vocab_size: int):
    from transformers import BertConfig

    return BertConfig(vocab_size=vocab_size, hidden_size=arch["hidden"], num_hidden_layers=arch["layers"],
                      num_attention_heads=arch["heads"], intermediate_size=arch["ffn"],
                      max_position_embeddings=arch["max_length"], type_vocab_size=2)


def _blocks(ids: list[list[int]], length: int, cls: int, sep: int) -> np.ndarray:
    """Concatenate tokenised lines and cut [CLS] ... [SEP] blocks of exactly `length` tokens."""
    flat = np.fromiter((t for line in ids for t in line), dtype=np.int64)
    body = length - 2
    n = len(flat) // body
    blocks = np.empty((n, length), np.int64)
    blocks[:, 0], blocks[:, -1] = cls, sep
    blocks[:, 1:-1] = flat[: n * body].reshape(n, body)
    return blocks


def _tokenise_file(tokenizer, path: Path) -> list[list[int]]:
    lines = [l for l in path.read_text().split("\n") if l.strip()]
    return tokenizer(lines, add_special_tokens=False)["input_ids"]


def unigram_loss(blocks: np.ndarray, vocab_size: int, special: set[int]) -> float:
    """Cross-entropy (nats) of a model that only knows token frequencies: the MLM floor to beat."""
    counts = np.bincount(blocks.ravel(), minlength=vocab_size).astype(np.float64)
    for s in special:
        counts[s] = 0
    p = counts / counts.sum()
    nz = p > 0
    return float(-(p[nz] * np.log(p[nz])).sum())


def _mask(batch, tokenizer, generator, prob: float = MASK_PROBABILITY):
    """BERT masking (80% [MASK], 10% random, 10% kept) drawn from a seeded generator."""
    import torch

    labels = batch.clone()
    special = (batch == tokenizer.cls_token_id) | (batch == tokenizer.sep_token_id) | (batch == tokenizer.pad_token_id)
    chosen = (torch.rand(batch.shape, generator=generator) < prob) & ~special
    labels[~chosen] = -100
    inputs = batch.clone()
    r = torch.rand(batch.shape, generator=generator)
    inputs[chosen & (r < 0.8)] = tokenizer.mask_token_id
    rand = chosen & (r >= 0.8) & (r < 0.9)
    inputs[rand] = torch.randint(len(tokenizer), batch.shape, generator=generator)[rand]
    return inputs, labels


def masked_lm_loss(model, input_ids, labels, attention_mask=None):
    """BertForMaskedLM's loss, with the vocabulary projection run only at the labelled (masked) positions.

    The model's own forward scores every position against the whole vocabulary and then ignores the 85% that carry
    no label; at the micro-BERT's size that head costs as much as the 4-layer encoder. The head works position by
    position (dense, GELU, LayerNorm, tied decoder), so scoring only the masked positions gives the same loss and
    the same gradients (up to float rounding) for 15% of the head's arithmetic: pre-training's step is 1.8x faster
    at the micro-BERT's shape, 3.3x at micro-bert-small's (tests/test_microbert.py checks the equality)."""
    import torch

    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    hidden = model.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    chosen = labels != -100
    if not bool(chosen.any()):  # nothing masked in this batch: no signal (the full head would give NaN)
        return hidden.sum() * 0.0
    logits = model.cls(hidden[chosen])
    return torch.nn.functional.cross_entropy(logits.float(), labels[chosen])


def pretrain(corpus: Path, tokenizer_dir: Path, arch: dict, train: dict, seed: int, out_dir: Path,
             valid_text: Path | None = None, progress: bool = True, resume: checkpoint.Resume | None = None) -> dict:
    """MLM pre-training for a fixed number of steps; saves the weights at train['checkpoints'] (outputs: later probing
    claims read them). `resume` (the run's checkpoint.Resume): a stopped run continues from its saved state."""
    import torch
    from tqdm.auto import tqdm
    from transformers import AutoTokenizer, BertForMaskedLM

    torch.manual_seed(seed)
    np.random.seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    blocks = _blocks(_tokenise_file(tokenizer, corpus), arch["max_length"], tokenizer.cls_token_id, tokenizer.sep_token_id)
    steps, bs = int(train["steps"]), int(train["batch_size"])
    if len(blocks) < bs:
        raise UserError(f"pre-training corpus {corpus} yields {len(blocks)} blocks of {arch['max_length']} tokens, fewer than one batch ({bs})")
    order_rng = np.random.default_rng(seed)
    model = BertForMaskedLM(bert_config(arch, len(tokenizer)))
    # CUDA where present, with bf16 autocast where the GPU supports it; masking stays on the CPU generator, so the
    # data a step sees does not depend on the device
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    opt = adamw(model.parameters(), lr=float(train["lr"]), weight_decay=0.01)
    warmup = int(train.get("warmup", max(1, steps // 10)))
    sched = linear_warmup_decay(opt, warmup, steps)
    gen = torch.Generator().manual_seed(seed)
    checkpoints = sorted(set(int(c) for c in train.get("checkpoints", [])) | {steps})
    resume = resume or checkpoint.Resume(None, "", "")
    # weights, optimiser, schedule, the masking and order generators and dropout's (torch's global one) come back
    restored = resume.attach(model, opt, sched, {"mask": gen, "order": order_rng})
    if restored is None:
        start, history, perm, pos = 0, [], order_rng.permutation(len(blocks)), 0
    else:
        start, history = restored.step, list(restored.loop["history"])
        perm, pos = restored.tensors["perm"].numpy(), int(restored.loop["pos"])
    use_bf16 = device == "cuda" and torch.cuda.is_bf16_supported()
    model.train()
    bar = tqdm(total=steps, initial=start, desc=f"pretrain seed {seed}", unit="step", disable=not progress, mininterval=10)
    for step in range(start, steps):
        if pos + bs > len(perm):
            perm, pos = order_rng.permutation(len(blocks)), 0
        batch = torch.from_numpy(blocks[perm[pos:pos + bs]])
        pos += bs
        inputs, labels = (t.to(device) for t in _mask(batch, tokenizer, gen))
        with torch.autocast(device, dtype=torch.bfloat16, enabled=use_bf16):
            loss = masked_lm_loss(model, inputs, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        history.append(round(loss.item(), 4))
        bar.update(1)
        if (step + 1) % 50 == 0:
            bar.set_postfix(loss=f"{np.mean(history[-50:]):.3f}")
        if step + 1 in checkpoints:
            _save_weights(model, tokenizer, step + 1, out_dir)
        resume.step(step + 1, lambda: ({"history": history, "pos": pos}, {"perm": perm}))
    resume.detach()
    bar.close()
    special = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id}
    result = {"steps": steps, "checkpoints": checkpoints, "device": device, "bf16": use_bf16, "blocks": int(len(blocks)),
              "train_loss_last50": float(np.mean(history[-50:])), "unigram_loss": unigram_loss(blocks, len(tokenizer), special),
              "loss_history": history}
    if valid_text is not None:
        result["valid_loss"] = evaluate_mlm(model, tokenizer, valid_text, arch["max_length"], seed)
    return result


def evaluate_mlm(model, tokenizer, text: Path, length: int, seed: int, max_blocks: int = 64) -> float:
    import torch

    blocks = _blocks(_tokenise_file(tokenizer, text), length, tokenizer.cls_token_id, tokenizer.sep_token_id)[:max_blocks]
    gen = torch.Generator().manual_seed(seed + 10_000)
    model.eval()
    losses = []
    device = next(model.parameters()).device
    with torch.inference_mode():
        for i in range(0, len(blocks), 32):
            inputs, labels = (t.to(device) for t in _mask(torch.from_numpy(blocks[i:i + 32]), tokenizer, gen))
            losses.append(float(masked_lm_loss(model, inputs, labels)))
    return float(np.mean(losses)) if losses else math.nan


def _ckpt_dir(out_dir: Path, step: int) -> Path:
    return out_dir / "checkpoints" / f"step-{step}"


def _save_weights(model, tokenizer, step: int, out_dir: Path) -> None:
    """The weights and tokenizer at `step`, written beside and renamed into place (whole or absent)."""
    from ..provenance import atomic_dir

    with atomic_dir(_ckpt_dir(out_dir, step)) as tmp:
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))


def write_model_card(out_dir: Path, info: dict) -> None:
    atomic_write_json(out_dir / "pretrain.json", info)
    (out_dir / "README.md").write_text("micro-BERT pre-trained by plmclaims; see pretrain.json for data, seed and losses.\n")
