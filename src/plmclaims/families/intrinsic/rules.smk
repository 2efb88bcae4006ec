# Intrinsic family: one geometry run per (instance, scored UD split, layer) reads the probing family's shared encode
# (rule probe_encode, which writes every layer's word vectors once).

rule geometry:
    input:
        vectors=upstream("probe-encode"),
        data=data_of,
    output:
        metrics=LAYOUT["geometry"].pattern(R),
        predictions=LAYOUT["geometry"].pattern(R, "predictions.npz"),
    params:
        spec=spec_of,
    threads: 1
    resources:
        **rule_resources("geometry"),
    log:
        LAYOUT["geometry"].log(R),
    shell:
        "{CLI} geometry --spec {params.spec:q} --data-root {DATA_Q} --vectors {input.vectors:q} --out {output.metrics:q} "
        "--threads {threads} > {log:q} 2>&1"
