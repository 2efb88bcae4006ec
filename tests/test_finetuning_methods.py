"""The fine-tuning family, driven by one table of cases: what each method trains, counted exactly."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from plmclaims import methods
from plmclaims.data import glue
from plmclaims.errors import UserError
from plmclaims.evaluation import glue_metrics

H, L, FFN, VOCAB, LABELS = 32, 2, 64, 100, 2


def tiny_model():
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    return BertForSequenceClassification(BertConfig(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=L, num_attention_heads=2,
                                                    intermediate_size=FFN, max_position_embeddings=64, num_labels=LABELS))


HEAD = H * H + H + H * LABELS + LABELS  # pooler dense + classifier
LAYER_NORMS = (2 * L + 1) * 2 * H  # two per layer plus the embeddings', weight and bias each
CASES = {
    # method: (params, expected trainable parameters)
    "full-finetuning": ({}, None),
    "bitfit": ({}, None),
    "lora": ({"r": 4, "alpha": 8}, L * 2 * (4 * H + H * 4) + HEAD),
    "adapter": ({"size": 8}, L * 2 * (H * 8 + 8 + 8 * H + H) + LAYER_NORMS + HEAD),
    "prompt-tuning": ({"virtual_tokens": 5}, 5 * H + HEAD),
}


@pytest.mark.slow
@pytest.mark.parametrize("method", list(CASES))
def test_trainable_parameters(method):
    params, expected = CASES[method]
    base_total = sum(p.numel() for p in tiny_model().parameters())
    model = methods.prepare(method, tiny_model(), params)
    counts = methods.count_parameters(model)
    if method == "full-finetuning":
        expected = base_total
    if method == "bitfit":
        expected = sum(p.numel() for n, p in tiny_model().named_parameters() if n.endswith(".bias")) + H * H + H * LABELS
    assert counts["trainable"] == expected
    assert counts["total"] >= base_total and 0 < counts["fraction"] <= 1


def test_lora_trains_only_a_and_b_besides_the_head():
    model = methods.prepare("lora", tiny_model(), {"r": 4})
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    body = [n for n in names if "classifier" not in n and "pooler" not in n]
    assert body and all("lora_A" in n or "lora_B" in n for n in body)
    assert {n.split("lora_")[0].rsplit(".", 2)[-2] for n in body} == {"query", "value"}


@pytest.mark.parametrize("method", ["full-finetuning", "bitfit", "prompt-tuning"])
def test_every_method_trains_t5s_classification_head(method):
    """T5ForSequenceClassification's head is `classification_head`, not `classifier`: a method that missed it would
    train a frozen random head (peft's modules_to_save and BitFit read the same list). LoRA and adapters target
    BERT-style modules (query/value, encoder.layer) and no claim runs them on T5, so they are not in the list."""
    from transformers import T5Config, T5ForSequenceClassification

    torch.manual_seed(0)
    t5 = T5ForSequenceClassification(T5Config(vocab_size=VOCAB, d_model=H, d_kv=8, d_ff=FFN, num_layers=L, num_heads=2,
                                              num_labels=LABELS, decoder_start_token_id=0))
    model = methods.prepare(method, t5, CASES[method][0])
    head = [(n, p.requires_grad) for n, p in model.named_parameters() if "classification_head" in n]
    assert head and all(trainable for _, trainable in head), head


@pytest.mark.parametrize("method", list(CASES))
def test_one_step_changes_only_trainable_parameters(method):
    model = methods.prepare(method, tiny_model(), CASES[method][0])
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
    batch = {"input_ids": torch.randint(1, VOCAB, (4, 12)), "attention_mask": torch.ones(4, 12, dtype=torch.long),
             "labels": torch.tensor([0, 1, 0, 1])}
    model.train()
    model(**batch).loss.backward()
    opt.step()
    for n, p in model.named_parameters():
        changed = not torch.equal(before[n], p.detach())
        if not p.requires_grad:
            assert not changed, n


def test_adapters_start_as_the_identity():
    base = tiny_model().eval()
    adapted = methods.prepare("adapter", tiny_model(), {"size": 8}).eval()
    x = torch.randint(1, VOCAB, (2, 10))
    with torch.no_grad():
        torch.testing.assert_close(base(input_ids=x).logits, adapted(input_ids=x).logits)


def test_prefix_tuning_on_an_encoder_says_why_it_cannot_run():
    with pytest.raises(UserError, match="past_key_values.*causal LM"):
        methods.prepare("prefix-tuning", tiny_model(), {"virtual_tokens": 5})


def test_prefix_tuning_on_a_causal_lm_trains_only_the_prefix():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    lm = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_embd=H, n_layer=L, n_head=2, n_positions=64))
    model = methods.prepare("prefix-tuning", lm, {"virtual_tokens": 5})
    assert methods.count_parameters(model)["trainable"] == 5 * L * 2 * H
    out = model(input_ids=torch.randint(1, VOCAB, (2, 8)), labels=torch.randint(1, VOCAB, (2, 8)))
    assert torch.isfinite(out.loss)


def test_unknown_method_is_one_clear_error():
    with pytest.raises(UserError, match="allowed values: full-finetuning, bitfit, lora"):
        methods.prepare("ia3", tiny_model())


def test_glue_metrics_match_definitions():
    from scipy.stats import pearsonr

    y = np.array([1, 0, 1, 1, 0, 1, 0, 0])
    p = np.array([1, 0, 0, 1, 0, 1, 1, 0])
    tp, tn, fp, fn = 3, 3, 1, 1
    mcc = (tp * tn - fp * fn) / np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    assert glue_metrics.score("CoLA", y, p)["matthews"] == pytest.approx(100 * mcc)
    assert glue_metrics.score("MRPC", y, p) == pytest.approx({"accuracy": 75.0, "f1": 75.0})
    s = np.array([0.1, 0.5, 0.3, 0.9])
    g = np.array([0.0, 2.0, 1.0, 5.0])
    assert glue_metrics.score("STS-B", g, s)["pearson"] == pytest.approx(100 * pearsonr(g, s)[0])


@pytest.mark.parametrize("task, split, n", [("CoLA", "dev", 1043), ("MRPC", "train", 3668), ("RTE", "dev", 277),
                                            ("STS-B", "dev", 1500), ("SST-2", "dev", 872), ("QNLI", "dev", 5463)])
def test_glue_known_counts(data_root, task, split, n):
    data = glue.load_local(data_root / "glue", task, split)
    assert len(data) == n and data.files
    assert (data.text_b is None) == (glue.TASKS[task][0] == "single")


def test_mrpc_train_is_rebuilt_without_dev_pairs(data_root):
    train = glue.load_local(data_root / "glue", "MRPC", "train")
    dev = glue.load_local(data_root / "glue", "MRPC", "dev")
    assert not set(zip(train.text_a, train.text_b)) & set(zip(dev.text_a, dev.text_b))
    assert any(p.endswith("msr_paraphrase_train.txt") for p in train.files)


def test_glue_offline_gaps_are_named(data_root):
    with pytest.raises(UserError, match="QNLI has dev only"):
        glue.load_local(data_root / "glue", "QNLI", "train")
    with pytest.raises(UserError, match="test sets are unlabelled"):
        glue.load_local(data_root / "glue", "RTE", "test")


def test_glue_hub_path_reads_a_hub_layout(tmp_path, data_root):
    """load_hub reads the hub's nyu-mll/glue layout (configs declared in the README), here from a local copy."""
    import datasets

    local = glue.load_local(data_root / "glue", "RTE", "dev")
    root = tmp_path / "glue"
    (root / "rte").mkdir(parents=True)
    datasets.Dataset.from_dict({"sentence1": local.text_a, "sentence2": local.text_b, "label": [int(v) for v in local.labels],
                                "idx": list(range(len(local)))}).to_parquet(str(root / "rte" / "validation-00000-of-00001.parquet"))
    (root / "README.md").write_text("---\nconfigs:\n- config_name: rte\n  data_files:\n  - split: validation\n"
                                    "    path: rte/validation-*\n---\n")
    data = glue.load_hub("RTE", "dev", hub_id=str(root))
    assert len(data) == 277 and data.text_a == local.text_a and data.labels == local.labels
