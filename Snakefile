# plmclaims: replicate published claims about pre-trained language models.
#   snakemake --cores 2 --config tier=micro data_root=../shared/data
import os

from snakemake.utils import min_version

min_version("9.0")


configfile: os.path.join(workflow.basedir, "config", "config.yaml")


include: "workflows/rules/common.smk"
include: "workflows/rules/assets.smk"
include: "workflows/rules/encode.smk"
include: "workflows/rules/score.smk"
include: "workflows/rules/finetune.smk"
include: "workflows/rules/lm.smk"
include: "workflows/rules/verdict.smk"
include: "workflows/rules/report.smk"


rule all:
    input:
        REPORT_FILES,
    default_target: True
