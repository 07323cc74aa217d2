# The two commands a new user needs: `make demo` and `make test`.
# Each one bootstraps its own environment: uv (from PyPI, into .tools/ if it is not installed)
# and then the locked environment in .venv/. Nothing is installed outside this folder.

SHELL := /bin/bash
# The interpreter the environment is built on (`make PYTHON=python3.12 test` picks another): the
# system's own /usr/bin/python3 when it is 3.11 or newer, else the first python3 on the PATH.
# Distributions build their Python with profile-guided and link-time optimisation, which pyenv
# and source builds leave out unless asked: on the development machine, Debian's 3.11 spends
# about 12% less CPU on a bench day of Smallville's event loop than pyenv's 3.11 (README,
# "A game day of Smallville").
SYSTEM_PYTHON := /usr/bin/python3
ifeq ($(origin PYTHON),undefined)
PYTHON := $(shell $(SYSTEM_PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
	2>/dev/null && echo $(SYSTEM_PYTHON) || echo python3)
endif
export UV_PYTHON_DOWNLOADS := never
export UV_NO_PROGRESS := 1
# Installed packages are compiled to bytecode once, at install: where PYTHONDONTWRITEBYTECODE is
# set, every command would otherwise compile chromadb, openai and SQLAlchemy anew on each start.
export UV_COMPILE_BYTECODE := 1

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
	$(UV) run --no-sync lint-imports

bench: $(VENV_STAMP)
	$(UV) run --no-sync bottown bench retrieval

.tools/bin/uv:  # (any python3 can install uv; Debian's own needs its python3-venv package)
	python3 -m venv .tools
	.tools/bin/python -m pip install --quiet --disable-pip-version-check "uv>=0.5,<1"

# (the environment is made again, on the interpreter chosen above, when this file changes)
$(VENV_STAMP): uv.lock pyproject.toml Makefile | $(UV)
	$(UV) sync --locked --all-extras --python $(PYTHON)
	touch $@

clean:
	rm -rf .venv .tools .mypy_cache .ruff_cache .pytest_cache
