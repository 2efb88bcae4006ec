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


rule probe:
    input:
        vectors=upstream("probe-encode"),
        data=data_of,
    output:
        metrics=LAYOUT["probe"].pattern(R),
        predictions=LAYOUT["probe"].pattern(R, "predictions.npz"),
    params:
        spec=spec_of,
    threads: THREADS
    resources:
        **rule_resources("probe"),
    log:
        LAYOUT["probe"].log(R),
    shell:
        "{CLI} probe --spec {params.spec:q} --data-root {DATA_Q} --vectors {input.vectors:q} --out {output.metrics:q} "
        "--threads {threads} > {log:q} 2>&1"
