"""Stand-ins for a rehearsal tier's hub assets: each hub model as a folder in the hub's layout with the asset's
published configuration, random weights and a tokenizer of the same kind and vocabulary size trained on the offline
text of the data root; each hub dataset rebuilt from the local release files.

`plmclaims rehearse` serves these folders through a local stand-in of the hub's HTTP API (plmclaims.fakehub) to the
real prefetch code, so the workflow's jobs load them through hub.resolve exactly as they would load the real assets.
The configurations are each repository's published config.json values (plmclaims.published); a hub model without an
entry there cannot be rehearsed and is named in one line.
"""
from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

from .errors import UserError
from .published import PUBLISHED, STATIC, WIDTH_KEYS, published, shaped  # noqa: F401 (WIDTH_KEYS: read by tests)


# ---------------------------------------------------------------- offline text and tokenizers

def offline_text(data_root: Path) -> list[str]:
    """The data root's sentences: UD EWT's text lines, SentEval STS's pairs and GLUE's text fields."""
    root = Path(data_root)
    lines = []
    for f in sorted(root.glob("ud/*.conllu")):
        lines += [line[9:].strip() for line in f.read_text().splitlines() if line.startswith("# text = ")]
    for f in sorted(root.glob("senteval/STS/*/STS.input.*.txt")):
        lines += [x for line in f.read_text(errors="replace").splitlines() for x in line.split("\t") if x.strip()]
    for f in sorted(root.glob("glue/*/*.tsv")):
        lines += [x for line in f.read_text(errors="replace").splitlines()[1:] for x in line.split("\t") if " " in x]
    if len(lines) < 10000:
        raise UserError(f"{root}: {len(lines)} sentences of offline text (UD, SentEval STS, GLUE); the stand-in tokenizers "
                        "need the whole data root (at least 10000); point --data-root at it")
    return lines


def train_tokenizer(kind: str, vocab: int, lines: list[str], max_length: int):
    """A transformers tokenizer of the architecture's own class, built from a vocabulary trained on `lines`."""
    import transformers
    from tokenizers import BertWordPieceTokenizer, ByteLevelBPETokenizer, SentencePieceUnigramTokenizer

    if kind.startswith("wordpiece"):
        lower = kind == "wordpiece"
        trainer = BertWordPieceTokenizer(lowercase=lower)
        trainer.train_from_iterator(lines, vocab_size=vocab, show_progress=False)
        tok = transformers.BertTokenizer(vocab=trainer.get_vocab(), do_lower_case=lower, model_max_length=max_length)
    elif kind in ("roberta-bpe", "gpt2-bpe"):
        specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"] if kind == "roberta-bpe" else []
        trainer = ByteLevelBPETokenizer()
        # GPT-2's one special token is its last id, as in the release (50256)
        trainer.train_from_iterator(lines, vocab_size=vocab - (0 if specials else 1), special_tokens=specials, show_progress=False)
        model = json.loads(trainer.to_str())["model"]
        merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
        vocab_map = dict(model["vocab"])
        if kind == "roberta-bpe":
            tok = transformers.RobertaTokenizer(vocab=vocab_map, merges=merges, model_max_length=max_length)
        else:
            vocab_map["<|endoftext|>"] = len(vocab_map)
            tok = transformers.GPT2Tokenizer(vocab=vocab_map, merges=merges, model_max_length=max_length)
    elif kind == "t5-unigram":
        trainer = SentencePieceUnigramTokenizer()
        # T5's ids: <pad> 0, </s> 1, <unk> 2; 100 sentinel tokens (<extra_id_*>) come on top of the 32000 pieces
        trainer.train_from_iterator(lines, vocab_size=vocab - 100, special_tokens=["<pad>", "</s>", "<unk>"],
                                    unk_token="<unk>", show_progress=False)
        pieces = [tuple(p) for p in json.loads(trainer.to_str())["model"]["vocab"]]
        tok = transformers.T5Tokenizer(vocab=pieces, extra_ids=100, model_max_length=max_length)
    else:
        raise ValueError(kind)
    if len(tok) != vocab:  # the offline text was too small for the published vocabulary: the stand-in would differ
        raise UserError(f"stand-in {kind} tokenizer: {len(tok)} tokens trained from the offline text, the release has "
                        f"{vocab}; point --data-root at the whole data root (UD, SentEval, GLUE)")
    return tok


# ---------------------------------------------------------------- models and datasets

def build_model(repo_id: str, folder: Path, tokenizer, shapes: str, head_size: int, seed: int = 0) -> dict:
    import torch
    import transformers

    pub = published(repo_id)
    config = shaped(pub, shapes, head_size)
    torch.manual_seed(seed)
    cfg = transformers.AutoConfig.for_model(config.pop("model_type"), **config)
    cfg.architectures = [pub.architecture]
    model = getattr(transformers, pub.architecture)(cfg)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if pub.sentence_transformers:  # the sentence-transformers files of the release: mean pooling, normalised
        st = pub.sentence_transformers
        modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
        if st.get("normalize"):
            modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
            (folder / "2_Normalize").mkdir(exist_ok=True)
        (folder / "modules.json").write_text(json.dumps(modules, indent=2))
        (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": st["max_seq_length"], "do_lower_case": False}))
        (folder / "1_Pooling").mkdir(exist_ok=True)
        (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": cfg.hidden_size,
                                                                      "pooling_mode_mean_tokens": True}))
    return {"config": {"model_type": cfg.model_type, **config}, "architecture": pub.architecture, "tokenizer": pub.tokenizer,
            "tokenizer_size": len(tokenizer), "parameters": sum(p.numel() for p in model.parameters())}


def build_static(folder: Path, dim: int, lines: list[str], seed: int = 0) -> dict:
    """A sentence-transformers word-embedding model (WordEmbeddings + mean pooling) over the offline text's words."""
    import numpy as np
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, WordEmbeddings
    from sentence_transformers.sentence_transformer.modules.tokenizer import WhitespaceTokenizer

    words = sorted({w for line in lines for w in line.split()})
    matrix = np.random.default_rng(seed).normal(size=(len(words), dim)).astype(np.float32)
    emb = WordEmbeddings(WhitespaceTokenizer(words, do_lower_case=False), matrix)
    SentenceTransformer(modules=[emb, Pooling(dim, "mean")], device="cpu").save(str(folder))
    return {"dimension": dim, "words": len(words)}


def build_sts_dataset(repo_id: str, folder: Path, data_root: Path) -> dict:
    """An MTEB STS repository (data/test-*.parquet: sentence1, sentence2, score) from the SentEval release files."""
    import datasets

    from .data import sts

    name = next((n for n, (rid, _) in sts.HUB_IDS.items() if rid == repo_id), None)
    data = sts.load_local(Path(data_root) / "senteval", name, "raw", "all" if name == "SICK-R" else "test")
    (folder / "data").mkdir(parents=True, exist_ok=True)
    datasets.Dataset.from_dict({"sentence1": data.sentence1, "sentence2": data.sentence2, "score": data.scores.tolist()}
                               ).to_parquet(str(folder / "data" / "test-00000-of-00001.parquet"))
    return {"pairs": len(data.scores), "from": f"{data_root}/senteval"}


# Hub datasets the stand-ins rebuild in the release's layout at its pinned commit: repo id -> {config: (columns,
# label names or None, {split: rows})}. The text is the offline text's sentences and the labels are seeded, so a
# rehearsal runs the real loader on the real layout; sizes are a few hundred rows (the budgets read fewer).
GLUE_HUB = {  # nyu-mll/glue at glue.HUB_REVISION: <config>/<split>-00000-of-00001.parquet; test labels are -1
    "mnli": (("premise", "hypothesis"), ("entailment", "neutral", "contradiction"),
             {"train": 2000, "validation_matched": 400, "validation_mismatched": 400, "test_matched": 100,
              "test_mismatched": 100}),
    "qqp": (("question1", "question2"), ("not_duplicate", "duplicate"), {"train": 2000, "validation": 400, "test": 100}),
}
ALL_NLI = {  # sentence-transformers/all-nli: <subset>/<split>-00000-of-00001.parquet; pair-class keeps NLI's labels
    "pair": (("anchor", "positive"), None, {"train": 2000, "dev": 200, "test": 200}),
    "pair-class": (("premise", "hypothesis"), ("entailment", "neutral", "contradiction"),
                   {"train": 2000, "dev": 200, "test": 200}),
    "triplet": (("anchor", "positive", "negative"), None, {"train": 2000, "dev": 200, "test": 200}),
}
PAIR_DATASETS = {"nyu-mll/glue": GLUE_HUB, "sentence-transformers/all-nli": ALL_NLI}


def build_pair_dataset(repo_id: str, folder: Path, lines: list[str], seed: int = 0) -> dict:
    """A hub dataset of sentence pairs in its release's layout (PAIR_DATASETS): one parquet file per config and split
    with the release's columns and label names (ClassLabel, declared in the README's dataset_info as on the hub),
    texts drawn from the offline text and seeded labels."""
    import datasets
    import numpy as np

    rng = np.random.default_rng(seed)
    pool = [x for x in lines if len(x.split()) >= 3]
    configs, info, rows = [], [], {}
    for config, (columns, names, splits) in PAIR_DATASETS[repo_id].items():
        features = {c: datasets.Value("string") for c in columns}
        if names:  # GLUE numbers its rows (idx); all-nli's pair-class carries the label alone
            features |= {"label": datasets.ClassLabel(names=list(names))}
            features |= {"idx": datasets.Value("int32")} if repo_id == "nyu-mll/glue" else {}
        features = datasets.Features(features)
        for split, n in splits.items():
            data = {c: [pool[i] for i in rng.integers(0, len(pool), n)] for c in columns}
            if names:
                data["label"] = [-1] * n if split.startswith("test") else rng.integers(0, len(names), n).tolist()
                data |= {"idx": list(range(n))} if "idx" in features else {}
            (folder / config).mkdir(parents=True, exist_ok=True)
            datasets.Dataset.from_dict(data, features=features).to_parquet(str(folder / config / f"{split}-00000-of-00001.parquet"))
            rows[f"{config}/{split}"] = n
        configs.append({"config_name": config, "data_files": [{"split": s, "path": f"{config}/{s}-*"} for s in splits]})
        info.append({"config_name": config, "features": features._to_yaml_list()})
    import yaml

    (folder / "README.md").write_text("---\n" + yaml.safe_dump({"configs": configs, "dataset_info": info}, sort_keys=False)
                                      + f"---\n# Stand-in for {repo_id}: offline text, seeded labels (plmclaims.standins)\n")
    return {"rows": rows, "from": "offline text (plmclaims.standins.offline_text), seeded labels"}


def build_wiki1m(folder: Path) -> dict:
    """SimCSE's wiki1m_for_simcse.txt (one sentence a line) from the offline Wikipedia extract's articles in order,
    then Penn Treebank's train lines: consecutive lines stay related for DeCLUTR's documents, as in the release."""
    from .data import sentences

    corpus = sentences.load_corpus({"sources": ["gensim-enwiki", "ptb-train"]})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / sentences.WIKI1M_FILE).write_text("".join(s + "\n" for s in corpus.sentences))
    return {"lines": len(corpus.sentences), "from": "gensim's Wikipedia extract and Penn Treebank train (offline)"}


def build_wikitext(folder: Path, lines: list[str], articles: int = 48, words: int = 2600) -> dict:
    """WikiText-103 in the hub release's layout (wikitext-103-raw-v1/<split>-0000i-of-0000n.parquet, one `text` column
    of lines ending in a newline, ' = Title = ' opening an article and ' = = Section = = ' inside it) from the offline
    text: `articles` articles of consecutive offline lines, each past DeCLUTR's 2048 words, so that its document filter
    keeps them as it keeps the release's long articles."""
    import datasets
    import yaml

    pool = [x for x in lines if len(x.split()) >= 3]
    rows, i = [], 0
    for a in range(articles):
        rows += [" \n", f" = Article {a} = \n", " \n"]
        n = 0
        while n < words:
            if n and i % 20 == 0:  # a section title now and then, as in the release
                rows += [" \n", f" = = Section {i} = = \n", " \n"]
            line = pool[i % len(pool)]
            rows.append(f" {line} \n")
            n, i = n + len(line.split()), i + 1
    config = "wikitext-103-raw-v1"
    (folder / config).mkdir(parents=True, exist_ok=True)
    half = len(rows) // 2
    for name, part in (("train-00000-of-00002", rows[:half]), ("train-00001-of-00002", rows[half:]),
                       ("validation-00000-of-00001", rows[:40]), ("test-00000-of-00001", rows[:40])):
        datasets.Dataset.from_dict({"text": part}).to_parquet(str(folder / config / f"{name}.parquet"))
    splits = [{"split": s, "path": f"{config}/{s}-*"} for s in ("train", "validation", "test")]
    card = yaml.safe_dump({"configs": [{"config_name": config, "data_files": splits}]}, sort_keys=False)
    note = "# Stand-in for Salesforce/wikitext: offline text (plmclaims.standins)"
    (folder / "README.md").write_text(f"---\n{card}---\n{note}\n")
    return {"articles": articles, "lines": len(rows), "from": "offline text (plmclaims.standins.offline_text)"}


# hub datasets built from the offline packages' text rather than the data root: repo id -> builder
TEXT_DATASETS = {"princeton-nlp/datasets-for-simcse": build_wiki1m}
# hub datasets of documents built from the offline text: repo id -> builder(folder, lines)
DOCUMENT_DATASETS = {"Salesforce/wikitext": build_wikitext}


def unsupported(assets) -> list[str]:
    """One line per hub asset that has no stand-in (no published configuration written here)."""
    from .data import sts

    known_data = ({rid for rid, _ in sts.HUB_IDS.values()} | set(PAIR_DATASETS) | set(TEXT_DATASETS)
                  | set(DOCUMENT_DATASETS))
    return [f"{a.repo_type} {a.repo_id} ({a.why}): no stand-in; add its published configuration to plmclaims.standins."
            f"{'PUBLISHED' if a.repo_type == 'model' else 'build_*'}"
            for a in assets if (a.repo_type == "model" and published(a.repo_id) is None and a.repo_id not in STATIC)
            or (a.repo_type == "dataset" and a.repo_id not in known_data)]


def build(assets, out: Path, data_root: Path, shapes: str = "real", head_size: int = 8, log=print) -> dict:
    """Stand-ins for `assets` (hub.HubAsset) under out/<type>s/<repo_id>; kept between calls when built with the same
    shapes (out/standins.json records what each folder holds). Returns {(repo_type, repo_id): folder}."""
    missing = unsupported(assets)
    if missing:
        raise UserError(f"{len(missing)} hub asset(s) cannot be rehearsed: " + "; ".join(missing))
    out = Path(out)
    record_path = out / "standins.json"
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    if record.get("shapes") != [shapes, head_size]:
        shutil.rmtree(out, ignore_errors=True)
        record = {"shapes": [shapes, head_size], "assets": {}}
    out.mkdir(parents=True, exist_ok=True)
    lines, tokenizers, repos = None, {}, {}
    for a in assets:
        folder = out / f"{a.repo_type}s" / a.repo_id
        repos[(a.repo_type, a.repo_id)] = folder
        if a.key in record["assets"] and folder.is_dir():
            continue
        shutil.rmtree(folder, ignore_errors=True)
        log(f"stand-in {a.repo_type} {a.repo_id} ({a.why})")
        lines = lines if lines is not None else offline_text(data_root)[::3]  # a third: enough for every published vocabulary, in a third of the time
        if a.repo_type == "dataset":
            info = (build_pair_dataset(a.repo_id, folder, lines) if a.repo_id in PAIR_DATASETS else
                    TEXT_DATASETS[a.repo_id](folder) if a.repo_id in TEXT_DATASETS else
                    DOCUMENT_DATASETS[a.repo_id](folder, lines) if a.repo_id in DOCUMENT_DATASETS else
                    build_sts_dataset(a.repo_id, folder, data_root))
        else:
            if a.repo_id in STATIC:
                info = build_static(folder, STATIC[a.repo_id], lines)
            else:
                pub = published(a.repo_id)
                if pub.tokenizer not in tokenizers:
                    tokenizers[pub.tokenizer] = train_tokenizer(pub.tokenizer, pub.vocab, lines, 512)
                # the releases' model_max_length: the positions (RoBERTa's 514 hold two offsets)
                positions = pub.config.get("max_position_embeddings", pub.config.get("n_positions", 512))
                tokenizers[pub.tokenizer].model_max_length = 512 if pub.tokenizer == "roberta-bpe" else positions
                # the members of a family (one repository per pre-training seed and step) get weights of their own
                seed = 0 if a.repo_id in PUBLISHED else zlib.crc32(a.repo_id.encode())
                info = build_model(a.repo_id, folder, tokenizers[pub.tokenizer], shapes, head_size, seed)
        record["assets"][a.key] = {"random_weights": a.repo_type == "model", **info}
        record_path.write_text(json.dumps(record, indent=1))  # after each: an interrupted build keeps what it has
    return repos


# ---------------------------------------------------------------- the rehearsal

def rehearse(tier_name: str, data_root: str, claims_dir: str = "replications", claims: list[str] | None = None,
             cores: int = 2, resources: str = "resources", results: str = "results", snakemake_args: list[str] = ()) -> None:
    """Build the stand-ins the selected claims need, prefetch them from a local hub through the real prefetch code,
    then run the workflow offline on that prefetch; a failed prefetch or workflow is one UserError."""
    import os
    import subprocess
    import sys

    from .assets import needed_assets
    from .claims import load_claims
    from .fakehub import FakeHub
    from .hub import MANIFEST, load_manifest
    from .plan import plan_all
    from .provenance import atomic_write_json
    from .schema import read_yaml
    from .tiers import TIERS_DIR, load_tier, read_tier

    tier = load_tier(tier_name)
    if not tier.get("rehearsal"):
        # the rehearsal tiers, and the one whose base chain starts at this tier
        ours = {t.stem: read_yaml(t).get("base") for t in sorted(TIERS_DIR.glob("*.yaml"))
                if "rehearsal" in read_tier(t)}
        of = [t for t, base in ours.items() if (base[0] if isinstance(base, list) else base) == tier["name"]]
        which = f"its rehearsal is --tier {of[0]}" if of else f"rehearse a rehearsal tier: {', '.join(ours)}"
        raise UserError(f"{tier['_path']}: tier {tier['name']} has no 'rehearsal' section, so its assets are the real "
                        f"ones; {which}")
    shapes, head_size = tier["rehearsal"]["shapes"], tier["rehearsal"].get("head_size", 8)
    root = Path(resources).resolve() / tier["name"]
    hub_root = root / "hub"
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    env.update(PLMCLAIMS_HUB_DIR=str(hub_root), HF_HOME=str(root / "hf-home"), HF_HUB_DISABLE_XET="1")
    os.environ["PLMCLAIMS_HUB_DIR"] = str(hub_root)  # needed_assets checks that this folder holds stand-ins
    # the marker first: every later load of this folder knows it holds stand-ins (hub.check_standins)
    manifest = load_manifest(hub_root)
    if manifest.get("standins", {}).get("shapes") != [shapes, head_size]:
        shutil.rmtree(hub_root, ignore_errors=True)
        manifest = {"assets": {}}
    manifest["standins"] = {"tier": tier["name"], "shapes": [shapes, head_size], "weights": "random",
                            "built_by": "plmclaims rehearse (plmclaims.standins)"}
    hub_root.mkdir(parents=True, exist_ok=True)
    atomic_write_json(hub_root / MANIFEST, manifest)
    assets = needed_assets(plan_all(load_claims(claims_dir, claims or None), tier), tier)
    repos = build(assets, root / "standins", Path(data_root), shapes, head_size)
    select = ["--claims", *claims] if claims else []
    with FakeHub(repos) as fake:
        res = subprocess.run([sys.executable, "-m", "plmclaims.cli", "prefetch", "--tier", tier["_path"], "--claims-dir",
                              claims_dir, *select, "--out", str(hub_root)], env={**env, "HF_ENDPOINT": fake.url})
    if res.returncode != 0:
        raise UserError(f"prefetch of the stand-ins from the local hub failed (exit status {res.returncode}; its error is above)")
    # offline from here: every job reads the prefetched stand-ins through hub.resolve, and nothing else
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    config = [f"tier={tier['_path']}", f"data_root={data_root}", f"claims_dir={claims_dir}", f"resources={resources}",
              f"results={results}"] + ([f"claims={json.dumps(claims)}"] if claims else [])
    snakefile = Path(__file__).resolve().parents[2] / "Snakefile"
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(snakefile), "--cores", str(cores), "--config", *config,
           *snakemake_args]
    print("+ " + " ".join(cmd), flush=True)
    rc = subprocess.run(cmd, env=env).returncode
    if rc:
        raise UserError(f"the rehearsal's workflow failed (snakemake exit status {rc}); the failed jobs' logs are under "
                        f"{results}/{tier['name']}/logs, and {results}/{tier['name']}/claims.md names them")
