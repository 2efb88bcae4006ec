"""Shared test helpers: sample sentences for the tests that encode a handful of real sentences with
all-MiniLM-L6-v2, and the in-process runner of word-vector runs (probing and geometry)."""

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
