# Probing family: one forward pass per (instance, scored UD split) keeps every layer's word vectors for the seeded
# sample; one probe run per (instance, method, task, layer) reads them.

wildcard_constraints:
    split=r"dev|test",
    layer=r"\d+",


rule probe_encode:
    input:
        model=lambda wc: [path_of(u) for u in planned(wc).upstream],
        data=data_of,
    output:
        vectors=LAYOUT["probe-encode"].pattern(R),
        metrics=LAYOUT["probe-encode"].pattern(R, "metrics.json"),
    params:
        spec=spec_of,
    threads: THREADS
    resources:
        **rule_resources("probe_encode"),
    log:
        LAYOUT["probe-encode"].log(R),
    shell:
        "{CLI} probe-encode --spec {params.spec:q} --data-root {DATA_Q} --resources {RES_Q} --out {output.vectors:q} "
        "--threads {threads} > {log:q} 2>&1"


# The probes that read one probe_encode run, in batches (common.smk: batches): one job runs each probe in turn
# (`plmclaims batch ... probe`), each writing its own metrics.json, predictions.npz and provenance.
for _name, _runs in batches("probe"):

    rule:
        name:
            f"probe_batch_{_name}"
        input:
            vectors=path_of(_runs[0].upstream[0]),
            data=sorted({f for r in _runs for f in DATA[r.key]}),
        output:
            batch_outputs(_runs, "predictions.npz"),
        params:
            # a function of the outputs, as spec_of: the runs' keys (their paths) are their identity, and the specs
            # hold '{data_root}', which a string here would read as a wildcard
            runs=lambda wc, output, runs=_runs: batch_runs(runs),
        threads: THREADS
        resources:
            **rule_resources("probe"),
        log:
            batch_log("probe", _name),
        shell:
            "{CLI} batch --runs {params.runs:q} probe --data-root {DATA_Q} --vectors {input.vectors:q} "
            "--threads {threads} > {log:q} 2>&1"
