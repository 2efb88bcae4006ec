"""Fine-tuning runs: deterministic per seed, predictions in the score-run layout, parameter counts recorded."""
from __future__ import annotations

import numpy as np
import pytest

from plmclaims import stats, training
from plmclaims.data import glue

BUDGET = {"epochs": 1, "batch_size": 8, "max_length": 48, "max_train": 48}


@pytest.fixture(scope="module")
def rte(data_root):
    train = glue.load_local(data_root / "glue", "RTE", "train")
    dev = glue.load_local(data_root / "glue", "RTE", "dev")
    return train, training.sample(dev, 40, 0)


@pytest.mark.parametrize("method, params", [("full-finetuning", {"lr": 5e-5}), ("lora", {"r": 4, "lr": 1e-3}),
                                            ("adapter", {"size": 8, "lr": 1e-3}), ("bitfit", {"lr": 1e-3})])
@pytest.mark.slow
def test_finetune_runs_and_records(minilm_path, rte, method, params):
    train, dev = rte
    values, preds = training.finetune(minilm_path, method, params, train, dev, BUDGET, seed=1, progress=False)
    assert set(preds) == {"RTE::pred", "RTE::gold", "RTE::subsets", "RTE::index"} and len(preds["RTE::pred"]) == 40
    assert set(np.unique(preds["RTE::pred"])) <= {0.0, 1.0}
    acc = values["benchmarks"]["RTE"]["accuracy"]
    assert acc == pytest.approx(100 * np.mean(preds["RTE::pred"] == preds["RTE::gold"]))
    counts = values["parameters"]
    assert 0 < counts["trainable"] <= counts["total"]
    if method != "full-finetuning":
        assert counts["fraction"] < 0.05
    assert values["steps"] == 6 and values["peak_memory_mb"] > 0


@pytest.mark.slow
def test_same_seed_same_predictions(minilm_path, rte):
    train, dev = rte
    a, pa = training.finetune(minilm_path, "lora", {"r": 4, "lr": 1e-3}, train, dev, BUDGET, seed=3, progress=False)
    b, pb = training.finetune(minilm_path, "lora", {"r": 4, "lr": 1e-3}, train, dev, BUDGET, seed=3, progress=False)
    assert a["loss_history"] == b["loss_history"] and np.array_equal(pa["RTE::pred"], pb["RTE::pred"])


def test_regression_task_predicts_scores(minilm_path, data_root):
    train = glue.load_local(data_root / "glue", "STS-B", "train")
    dev = training.sample(glue.load_local(data_root / "glue", "STS-B", "dev"), 40, 0)
    values, preds = training.finetune(minilm_path, "full-finetuning", {"lr": 5e-5}, train, dev, BUDGET, seed=1, progress=False)
    assert values["benchmarks"]["STS-B"]["pearson"] == pytest.approx(100 * stats.pearson(preds["STS-B::pred"], preds["STS-B::gold"]))
    assert len(np.unique(preds["STS-B::pred"])) > 2  # scores, not classes
    # trained on targets centred on the training sample's mean, predicted with it added back: after one short epoch
    # the predictions sit around the gold scale's middle, not around the head's initial 0
    offset = values["target_offset"]
    assert offset == pytest.approx(np.mean(training.sample(train, BUDGET["max_train"], 1).labels))
    assert 1.5 < offset < 4.0 and abs(np.mean(preds["STS-B::pred"]) - offset) < 1.0


def test_the_training_optimiser_is_fused_adamw_with_adamws_update():
    """optim.adamw (every transformer training loop's optimiser) is torch's fused kernel: AdamW's rule to rounding
    (checked against the unfused loop over ten steps, weight decay included) and the same bytes run to run."""
    import torch

    from plmclaims.optim import adamw

    def trained(make):
        torch.manual_seed(0)
        layer = torch.nn.Linear(32, 16)
        opt = make(layer.parameters())
        gen = torch.Generator().manual_seed(1)
        for _ in range(10):
            for p in layer.parameters():
                p.grad = torch.randn(p.shape, generator=gen)
            opt.step()
        return torch.cat([p.detach().flatten() for p in layer.parameters()]), opt

    fused, opt = trained(lambda ps: adamw(ps, lr=1e-2, weight_decay=0.01))
    assert opt.defaults["fused"] is True and opt.defaults["weight_decay"] == 0.01
    loop, _ = trained(lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.01, foreach=False))
    start, _ = trained(lambda ps: torch.optim.AdamW(ps, lr=0.0))
    assert (fused - start).abs().max() > 0.05  # ten steps of 1e-2 moved the weights
    torch.testing.assert_close(fused, loop, rtol=0, atol=1e-6)
    assert torch.equal(fused, trained(lambda ps: adamw(ps, lr=1e-2, weight_decay=0.01))[0])


def test_dev_predictions_go_through_by_length_and_come_back_in_dev_order(minilm_path, data_root):
    """predict_dev batches dev by length (less padding) and returns each example's prediction at its own position:
    the same, to float rounding, as predicting each example alone (no padding at all). A regression task, so each
    prediction is a distinct number and a mix-up of positions would show."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    dev = training.sample(glue.load_local(data_root / "glue", "STS-B", "dev"), 40, 0)
    assert dev.num_labels == 1
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(minilm_path, num_labels=1).eval()
    tok = AutoTokenizer.from_pretrained(minilm_path)
    pred = training.predict_dev(model, tok, dev, 48, offset=2.5)
    alone = []
    with torch.inference_mode():
        for a, b in zip(dev.text_a, dev.text_b):
            enc = tok(a, b, truncation=True, max_length=48, return_tensors="pt")
            alone.append(float(model(**enc).logits[0, 0]) + 2.5)
    lengths = [len(a) + len(b) for a, b in zip(dev.text_a, dev.text_b)]
    assert lengths != sorted(lengths)  # dev is not already in length order: the reordering is exercised
    np.testing.assert_allclose(pred, alone, atol=1e-4)
    assert np.ptp(pred) > 1e-3  # distinct examples, distinct predictions: a mix-up of positions would show
