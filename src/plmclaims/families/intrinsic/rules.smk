# Intrinsic family: one geometry run per (instance, scored UD split, layer) reads the probing family's shared encode
# (rule probe_encode, which writes every layer's word vectors once).

# in batches of the runs that read one encode (common.smk: batches), each run writing its own files and provenance
for _name, _runs in batches("geometry"):

    rule:
        name:
            f"geometry_batch_{_name}"
        input:
            vectors=path_of(_runs[0].upstream[0]),
            data=sorted({f for r in _runs for f in DATA[r.key]}),
        output:
            batch_outputs(_runs, "predictions.npz"),
        params:
            # a function of the outputs, as spec_of: the runs' keys (their paths) are their identity, and the specs
            # hold '{data_root}', which a string here would read as a wildcard
            runs=lambda wc, output, runs=_runs: batch_runs(runs),
        threads: 1
        resources:
            **rule_resources("geometry"),
        log:
            batch_log("geometry", _name),
        shell:
            "{CLI} batch --runs {params.runs:q} geometry --data-root {DATA_Q} --vectors {input.vectors:q} "
            "--threads {threads} > {log:q} 2>&1"


# Attention (P6): one eager-attention pass per (instance, scored UD split) keeps every layer's per-sentence shares
# (and the MLM loss's gradient on [SEP]); one attention run per (instance, split, layer) reads one layer of it.

rule attention_maps:
    input:
        model=lambda wc: [path_of(u) for u in planned(wc).upstream],
        data=data_of,
    output:
        maps=LAYOUT["attention-maps"].pattern(R),
        metrics=LAYOUT["attention-maps"].pattern(R, "metrics.json"),
    params:
        spec=spec_of,
    threads: THREADS
    resources:
        **rule_resources("encode"),
    log:
        LAYOUT["attention-maps"].log(R),
    shell:
        "{CLI} attention-maps --spec {params.spec:q} --data-root {DATA_Q} --resources {RES_Q} --out {output.maps:q} "
        "--threads {threads} > {log:q} 2>&1"


# in batches of the layers that read one attention_maps run (common.smk: batches)
for _name, _runs in batches("attention"):

    rule:
        name:
            f"attention_batch_{_name}"
        input:
            maps=path_of(_runs[0].upstream[0]),
        output:
            batch_outputs(_runs, "predictions.npz"),
        params:
            # a function of the outputs, as spec_of: the runs' keys (their paths) are their identity, and the specs
            # hold '{data_root}', which a string here would read as a wildcard
            runs=lambda wc, output, runs=_runs: batch_runs(runs),
        threads: 1
        resources:
            **rule_resources("attention"),
        log:
            batch_log("attention", _name),
        shell:
            "{CLI} batch --runs {params.runs:q} attention --maps {input.maps:q} > {log:q} 2>&1"
