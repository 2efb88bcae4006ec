# Transfer family: one frozen-transformer run per (instance, generated task, seed). Its input is the model it wraps
# (the micro-BERT's pre-training run, or for a random-weights twin the tokenizer run that fixes its architecture).

rule transfer:
    input:
        model=lambda wc: [path_of(u) for u in planned(wc).upstream],
    output:
        metrics=LAYOUT["transfer"].pattern(R),
        predictions=LAYOUT["transfer"].pattern(R, "predictions.npz"),
    params:
        spec=spec_of,
    threads: THREADS
    resources:
        **rule_resources("transfer"),
    log:
        LAYOUT["transfer"].log(R),
    shell:
        "{CLI} transfer --spec {params.spec:q} --resources {RES_Q} --out {output.metrics:q} --threads {threads} "
        "> {log:q} 2>&1"
