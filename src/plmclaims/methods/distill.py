"""A shallower student initialised from a BERT-style teacher's layers (P10; DistilBERT's initialisation).

Sanh et al. (2019) build DistilBERT by "taking one layer out of two" of BERT, keeping the embeddings. The student
here is the teacher's own class with ``num_hidden_layers`` reduced; its embeddings, the chosen transformer layers
(in order) and the pooler are copied from the teacher, so before any distillation it is the teacher with layers
dropped. Training it (e.g. sentence-transformers' MSE distillation on the teacher's vectors) is the caller's job.
"""
from __future__ import annotations

import copy

from ..errors import UserError


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
