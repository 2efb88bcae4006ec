"""Truncation (distillation's student before any training step) on a GLUE classifier: the student keeps every other
layer and the teacher's task head, and predicts with the classifier's own forward pass."""
from __future__ import annotations

from types import SimpleNamespace

import torch
from transformers import BertConfig, BertForSequenceClassification

from plmclaims.families.compression.runs import _compressed_classifier


def test_truncation_of_a_classifier_returns_a_classifier_with_every_other_layer_and_the_teachers_head():
    torch.manual_seed(0)
    teacher = BertForSequenceClassification(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=4,
                                                       num_attention_heads=2, intermediate_size=32, num_labels=2))
    spec = SimpleNamespace(method="truncation", params={}, task="SST-2")
    student, info = _compressed_classifier(spec, teacher, None, {}, None, 16, 0.0, None)
    assert isinstance(student, BertForSequenceClassification) and student.config.num_hidden_layers == 2
    assert info["layers"] == [0, 2]  # every other layer of the teacher
    assert info["student_parameters"] < info["teacher_parameters"]
    assert torch.equal(student.classifier.weight, teacher.classifier.weight)
    out = student(input_ids=torch.tensor([[1, 5, 7, 2]]))
    assert out.logits.shape == (1, 2)
