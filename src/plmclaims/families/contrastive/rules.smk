# Contrastive family: one run per (instance, objective, text form, seed) that trains the objective on the tier's
# corpus, selects on STS-B dev and scores the STS test sets. Its input is the encoder it starts from (the micro-BERT's
# pre-training run, or for a random-weights twin the tokenizer run that fixes its architecture; none for hub models).

rule contrastive:
    input:
        model=lambda wc: [path_of(u) for u in planned(wc).upstream],
        data=data_of,
    output:
        metrics=LAYOUT["contrastive"].pattern(R),
        predictions=LAYOUT["contrastive"].pattern(R, "predictions.npz"),
    params:
        spec=spec_of,
    threads: THREADS
    resources:
        **rule_resources("contrastive"),
    log:
        LAYOUT["contrastive"].log(R),
    shell:
        "{CLI} contrastive --spec {params.spec:q} --data-root {DATA_Q} --resources {RES_Q} --out {output.metrics:q} "
        "--threads {threads} > {log:q} 2>&1"
