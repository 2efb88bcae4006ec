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


rule attention:
    input:
        maps=upstream("attention-maps"),
    output:
        metrics=LAYOUT["attention"].pattern(R),
        predictions=LAYOUT["attention"].pattern(R, "predictions.npz"),
    params:
        spec=spec_of,
    threads: 1
    resources:
        **rule_resources("attention"),
    log:
        LAYOUT["attention"].log(R),
    shell:
        "{CLI} attention --spec {params.spec:q} --maps {input.maps:q} --out {output.metrics:q} > {log:q} 2>&1"
