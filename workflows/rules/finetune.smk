# Fine-tune one encoder with one method on one GLUE task for one seed, and score the dev split (glue family).
# The method's hyper-parameters travel as JSON; their short hash ({pkey}) is part of the run's path.


rule finetune:
    input:
        lambda wc: P.encode_inputs(RES, TIER, wc.instance),
    output:
        metrics=f"{R}/runs/finetune/{{instance}}/{{method}}/{{pkey}}/{{task}}/s{{seed}}/metrics.json",
        predictions=f"{R}/runs/finetune/{{instance}}/{{method}}/{{pkey}}/{{task}}/s{{seed}}/predictions.npz",
    params:
        hyper=lambda wc: shlex.quote(json.dumps(TRAIN_PARAMS[("finetune", wc.method, wc.pkey)])),
    threads: THREADS
    resources:
        **rule_resources("finetune"),
    log:
        f"{R}/logs/finetune/{{instance}}-{{method}}-{{pkey}}-{{task}}-s{{seed}}.log",
    shell:
        "{CLI} finetune --tier {TIER_ARG} --instance {wildcards.instance} --method {wildcards.method} "
        "--pkey {wildcards.pkey} --task {wildcards.task} --seed {wildcards.seed} --params {params.hyper} "
        "--data-root {DATA_ROOT} --resources {RES} --out {output.metrics} --threads {threads} > {log} 2>&1"
