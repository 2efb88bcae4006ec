"""The test tier's causal LMs: a tiny Llama or Gemma3 with random weights and a byte-level BPE trained on the corpus.

Only the `tiny` tier uses them, to run the language-model variant's wiring (training, peft adapters, lm-eval on the
generated tasks) and the pre-trained-LM measurements (a Gemma3 whose tokenizer adds <bos>, as Gemma's does) in
seconds, without the SmolLM2 or Gemma packages. Their scores mean nothing.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from ..provenance import atomic_dir

ARCHITECTURES = ("llama", "gemma3")


def _tokenizer(corpus: Path, vocab: int, architecture: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    special = ["<|endoftext|>", "<|pad|>"] if architecture == "llama" else ["<pad>", "<eos>", "<bos>"]
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train([str(corpus)], trainer)
    if architecture == "llama":
        return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>",
                                       pad_token="<|pad|>")
    # Gemma's tokenizer puts <bos> before every text: the first position, which the decoder poolings leave out
    bos = tok.token_to_id("<bos>")
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", pair="<bos> $A $B",
                                                       special_tokens=[("<bos>", bos)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", bos_token="<bos>", pad_token="<pad>")


def build(corpus: Path, spec: dict, out_dir: Path, seed: int = 0) -> dict:
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM

    architecture = spec.get("architecture", "llama")
    if architecture not in ARCHITECTURES:
        raise UserError(f"tiny LM field 'model.architecture': got {architecture!r}; allowed values: "
                        f"{', '.join(ARCHITECTURES)}")
    fast = _tokenizer(corpus, int(spec.get("vocab", 800)), architecture)
    hidden, heads = int(spec.get("hidden", 32)), int(spec.get("heads", 2))
    common = dict(vocab_size=len(fast), hidden_size=hidden, intermediate_size=int(spec.get("ffn", 64)),
                  num_hidden_layers=int(spec.get("layers", 2)), num_attention_heads=heads,
                  max_position_embeddings=int(spec.get("max_length", 128)), tie_word_embeddings=True,
                  bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id)
    torch.manual_seed(seed)
    if architecture == "llama":
        model = LlamaForCausalLM(LlamaConfig(**common, num_key_value_heads=heads))
    else:  # Gemma 3's shape at toy size: grouped queries (one key/value head), sliding and full attention layers
        config = Gemma3TextConfig(**common, num_key_value_heads=int(spec.get("kv_heads", 1)), head_dim=hidden // heads,
                                  sliding_window=int(spec.get("sliding_window", 64)),
                                  query_pre_attn_scalar=hidden // heads)
        model = Gemma3ForCausalLM(config)
    with atomic_dir(out_dir) as tmp:
        model.save_pretrained(tmp)
        fast.save_pretrained(tmp)
    return {"parameters": sum(p.numel() for p in model.parameters()), "architecture": type(model).__name__,
            "vocab": len(fast), "weights": "random (test tier)", "seed": seed}
