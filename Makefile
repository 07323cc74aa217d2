# The two commands a new user needs: `make demo` and `make test`.
# Each one bootstraps its own environment: uv (from PyPI, into .tools/ if it is not installed)
# and then the locked environment in .venv/. Nothing is installed outside this folder.

SHELL := /bin/bash
PYTHON ?= python3
export UV_PYTHON_DOWNLOADS := never
export UV_NO_PROGRESS := 1

UV := $(shell command -v uv 2>/dev/null || echo .tools/bin/uv)
VENV_STAMP := .venv/.bottown-synced

.PHONY: demo test lint bench clean

demo: $(VENV_STAMP)
	$(UV) run --no-sync bottown demo

test: $(VENV_STAMP)
	$(UV) run --no-sync pytest

lint: $(VENV_STAMP)
	$(UV) run --no-sync ruff check .
	$(UV) run --no-sync ruff format --check .
	$(UV) run --no-sync mypy

bench: $(VENV_STAMP)
	$(UV) run --no-sync bottown bench retrieval

.tools/bin/uv:
	$(PYTHON) -m venv .tools
	.tools/bin/python -m pip install --quiet --disable-pip-version-check "uv>=0.5,<1"

$(VENV_STAMP): uv.lock pyproject.toml | $(UV)
	$(UV) sync --locked --all-extras --python $(PYTHON)
	touch $@

clean:
	rm -rf .venv .tools .mypy_cache .ruff_cache .pytest_cache
