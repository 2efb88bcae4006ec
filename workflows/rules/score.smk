# Score one (instance, text form, pooling, post-processing) on every benchmark of its evaluator.


def score_vectors(wc):
    run = P.ScoreRun(wc.evaluator, wc.instance, wc.form, wc.method, wc.post)
    return [P.encode_path(R, run)] if P.needs_encode(run, TIER) else []


rule score:
    input:
        score_vectors,
    output:
        metrics=f"{R}/runs/score/{{evaluator}}/{{instance}}/{{form}}/{{method}}/{{post}}/metrics.json",
        predictions=f"{R}/runs/score/{{evaluator}}/{{instance}}/{{form}}/{{method}}/{{post}}/predictions.npz",
    params:
        vectors=lambda wc, input: f"--vectors {input[0]}" if input else "",
    resources:
        **rule_resources("score"),
    log:
        f"{R}/logs/score/{{evaluator}}-{{instance}}-{{form}}-{{method}}-{{post}}.log",
    shell:
        "{CLI} score --tier {TIER_ARG} --evaluator {wildcards.evaluator} --instance {wildcards.instance} "
        "--form {wildcards.form} --method {wildcards.method} --post {wildcards.post} --data-root {DATA_ROOT} "
        "{params.vectors} --out {output.metrics} > {log} 2>&1"
