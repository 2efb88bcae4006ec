# Assets the workflow builds itself: the micro-BERT's corpus, tokenizer and pre-trained seeds.


rule corpus:
    output:
        f"{RES}/corpus/pretrain.txt",
    resources:
        **rule_resources("corpus"),
    log:
        f"{RES}/logs/corpus.log",
    shell:
        "{CLI} corpus --out {output} > {log} 2>&1"


rule tokenizer:
    input:
        f"{RES}/corpus/pretrain.txt",
    output:
        f"{RES}/tokenizers/{{asset}}/tokenizer.json",
    params:
        out=lambda wc, output: os.path.dirname(output[0]),
    resources:
        **rule_resources("tokenizer"),
    log:
        f"{RES}/logs/tokenizer-{{asset}}.log",
    shell:
        "{CLI} tokenizer --tier {TIER_ARG} --asset {wildcards.asset} --corpus {input} --out {params.out} > {log} 2>&1"


rule pretrain:
    input:
        corpus=f"{RES}/corpus/pretrain.txt",
        tokenizer=f"{RES}/tokenizers/{{asset}}/tokenizer.json",
    output:
        f"{RES}/models/{{asset}}.s{{seed}}/metrics.json",
    params:
        out=lambda wc, output: os.path.dirname(output[0]),
        tokenizer=lambda wc, input: os.path.dirname(input.tokenizer),
    threads: THREADS
    priority: 10  # the long pole: start pre-training before cheap encode jobs
    resources:
        **rule_resources("pretrain"),
    log:
        f"{RES}/logs/pretrain-{{asset}}.s{{seed}}.log",
    shell:
        "{CLI} pretrain --tier {TIER_ARG} --asset {wildcards.asset} --seed {wildcards.seed} --corpus {input.corpus} "
        "--tokenizer {params.tokenizer} --out {params.out} --threads {threads} > {log} 2>&1"
