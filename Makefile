# Two commands set up everything on a fresh Debian/Ubuntu machine: `make demo`, `make test`.
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
FMNIST  := /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
TORCH   := torch==2.14.1 torchvision==0.29.1

.PHONY: setup test demo bench clean-venv

setup: $(STAMP) $(FMNIST)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check $(TORCH)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test,plot]'
	touch $@

# Debian's package puts the four IDX files under /usr/share/datasets/fashion-mnist.
$(FMNIST):
	$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq dataset-fashion-mnist

test: setup
	$(PY) -m pytest -q

demo: setup
	$(VENV)/bin/fineprune train --model lenet --dataset fashion-mnist --epochs 10 --prune \
		--window 4 --start 1 --block 2 --count 1 --milestones 6,8 --out results/runs/demo

bench: setup
	$(PY) experiments/bench/bench_trainer.py
	$(PY) experiments/bench/bench_prune.py

clean-venv:
	rm -rf $(VENV)
