# The text corpus of the `text` training task: the docstrings of one pinned installed package (config
# `training.corpus`), split by file, tokenised by a byte-level BPE trained in the build
# (attnid.training.corpus). Built only when a training task is `text`; its jobs and provenance read it.
from attnid.training.runs import job_priorities

CORPUS_DIR = f"{RESULTS}/corpus"
CORPUS_USED = any(t["task"] == "text" for t in config["training"]["tasks"])
# Above every training job's, and one thread: the longest jobs (text at d_model 128) wait for the corpus. With
# two threads the scheduler preferred two one-thread training jobs to it whenever two cores were free (paper
# build of 4c8ee9d: the corpus ran at minute 45, after every other job; at priority 20 and two threads, again
# last).
CORPUS_PRIORITY = max(job_priorities(config["training"]).values(), default=0) + 1


rule corpus:
    input:
        script_inputs("corpus.py"),
    output:
        train=f"{CORPUS_DIR}/train.npy",
        heldout=f"{CORPUS_DIR}/heldout.npy",
        tokenizer=f"{CORPUS_DIR}/tokenizer.json",
        manifest=f"{CORPUS_DIR}/manifest.json",
    log:
        logfile("corpus"),
    benchmark:
        benchfile("corpus")
    conda:
        CONDA_ENV
    threads: 1  # the tokenizer's thread pool (RAYON_NUM_THREADS); more would let training jobs go first
    priority: CORPUS_PRIORITY
    params:
        corpus=config["training"].get("corpus", {}),
    script:
        "../scripts/corpus.py"
