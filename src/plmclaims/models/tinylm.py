"""The test tier's causal LM: a tiny Llama with random weights and a byte-level BPE trained on the corpus.

Only the `tiny` tier uses it, to run the language-model variant's wiring (training, peft adapters,
lm-eval on the generated tasks) in seconds without the 92 MB SmolLM2 package. Its scores mean nothing.
"""
from __future__ import annotations

from pathlib import Path

from ..provenance import atomic_dir


def build(corpus: Path, spec: dict, out_dir: Path, seed: int = 0) -> dict:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    special = ["<|endoftext|>", "<|pad|>"]
    trainer = trainers.BpeTrainer(vocab_size=int(spec.get("vocab", 800)), special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train([str(corpus)], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>",
                                   pad_token="<|pad|>")
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=int(spec.get("hidden", 32)),
                         intermediate_size=int(spec.get("ffn", 64)), num_hidden_layers=int(spec.get("layers", 2)),
                         num_attention_heads=int(spec.get("heads", 2)), num_key_value_heads=int(spec.get("heads", 2)),
                         max_position_embeddings=int(spec.get("max_length", 128)), tie_word_embeddings=True,
                         bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id)
    model = LlamaForCausalLM(config)
    with atomic_dir(out_dir) as tmp:
        model.save_pretrained(tmp)
        fast.save_pretrained(tmp)
    return {"parameters": sum(p.numel() for p in model.parameters()), "architecture": "LlamaForCausalLM",
            "vocab": len(fast), "weights": "random (test tier)", "seed": seed}
