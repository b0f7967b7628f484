# Shortcuts for the README's commands (plain ./setup, .venv/bin/snakemake and .venv/bin/python work without make).
.PHONY: setup all smoke paper test test-fast
CORES ?= 2

setup:
	./setup

all: .venv/bin/snakemake
	.venv/bin/snakemake --cores $(CORES) all

smoke: .venv/bin/snakemake
	.venv/bin/snakemake --cores $(CORES) all --configfile=config/smoke.yaml

paper: .venv/bin/snakemake
	.venv/bin/snakemake --cores $(CORES) paper

test: .venv/bin/snakemake
	.venv/bin/python -m pytest -q

test-fast: .venv/bin/snakemake
	.venv/bin/python -m pytest -q -m "not slow"

.venv/bin/snakemake:
	./setup
