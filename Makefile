# Two commands set everything up on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
REPO ?= examples/model_repository

.PHONY: install install-test serve test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install --quiet -e .

install-test: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'

serve: install
	$(BIN)/openinfer serve --model-repository $(REPO)

test: install-test
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: install-test
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) build *.egg-info
