# One forward pass per (data source, model instance, text form), shared by every pooling and claim.


rule encode:
    input:
        lambda wc: P.encode_inputs(RES, TIER, wc.instance),
    output:
        vectors=f"{R}/runs/encode/{{evaluator}}/{{instance}}/{{form}}/vectors.npz",
        metrics=f"{R}/runs/encode/{{evaluator}}/{{instance}}/{{form}}/metrics.json",
    threads: THREADS
    resources:
        **rule_resources("encode"),
    log:
        f"{R}/logs/encode/{{evaluator}}-{{instance}}-{{form}}.log",
    shell:
        "{CLI} encode --tier {TIER_ARG} --instance {wildcards.instance} --evaluator {wildcards.evaluator} "
        "--form {wildcards.form} --data-root {DATA_ROOT} --resources {RES} --out {output.vectors} --threads {threads} > {log} 2>&1"
