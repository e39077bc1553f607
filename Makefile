# Two commands set everything up on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
REPO ?= examples/model_repository
# PyFlink brings its own pinned dependencies, so it lives in a venv of its own.
FLINK_VENV := .venv-flink

# `make image`: the container image (Dockerfile); EXTRAS picks the optional backends it installs.
ENGINE ?= docker
IMAGE ?= openinfer:latest
EXTRAS ?= onnx

.PHONY: install install-test flink-venv serve serve-openai test coverage conformance bench bench-flink docs image clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The bundled repository's classifier_onnx (and the pipeline ensemble that calls it) runs on
# ONNX Runtime, so `make serve` installs the `onnx` extra: every bundled model is READY.
install: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[onnx]'

install-test: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'

$(FLINK_VENV)/.installed:
	$(PYTHON) -m venv $(FLINK_VENV)
	$(FLINK_VENV)/bin/pip install --quiet apache-flink==2.3.0
	touch $@

flink-venv: $(FLINK_VENV)/.installed

serve: install
	$(BIN)/openinfer serve --model-repository $(REPO)

# A Triton Python model served as an OpenAI model (examples/openai_repository/echo_llm): the
# OpenAI API on :9000 beside the KServe ports; the `openai` extra brings the frontend.
serve-openai: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[openai]'
	$(BIN)/openinfer serve --model-repository examples/openai_repository --openai-port 9000

test: install-test flink-venv
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# The same suite under coverage.py (`[tool.coverage]` in pyproject.toml), the servers and workers
# it starts included: the line coverage of openinfer/ that the README quotes, per module in
# .coverage-data/report.txt. Slower than `make test`; a failed test does not stop the report.
coverage: install-test flink-venv
	rm -rf .coverage-data && mkdir -p .coverage-data
	-$(BIN)/python -m coverage run -m pytest -q $(PYTEST_ARGS)
	$(BIN)/python -m coverage combine -q
	$(BIN)/python -m coverage report --sort=cover > .coverage-data/report.txt
	@grep "^TOTAL" .coverage-data/report.txt

# The protocol cases sent to openinfer and to Triton 2.51 (the nvidia-pytriton wheel, installed
# into benchmarks/.venvs on first use as `make bench` installs it); prints where the answers differ.
conformance: install-test
	OPENINFER_CONFORMANCE=1 $(BIN)/python -m pytest -q -rs tests/conformance $(PYTEST_ARGS)

# One run, one progress line: the v2 grid, the LLM row, then the ONNX comparison; the charts
# (benchmarks/charts/*.svg, the plot extra) land in benchmarks/RESULTS.md and the README.
bench: install-test
	$(BIN)/python -m benchmarks

# docs/cli.md and the typed settings fields are written from the argument parsers; a test checks
# both are current.
docs: install
	$(BIN)/python -m openinfer.app.clidoc docs/cli.md
	$(BIN)/python -m openinfer.app.settings_schema

# PROVIDER_JARS: a folder with Flink's flink-model-triton jar and its dependencies (docs/flink.md);
# without it the provider's rows are skipped and the output says why.
bench-flink: install-test flink-venv
	$(BIN)/python -m tests.flink.bench_pyflink --rows 20000 --max-batch-size 256 --repeat 3 $(if $(PROVIDER_JARS),--provider-jars $(PROVIDER_JARS))

image:
	$(ENGINE) build --build-arg EXTRAS=$(EXTRAS) -t $(IMAGE) .

clean:
	rm -rf $(VENV) $(FLINK_VENV) build *.egg-info
