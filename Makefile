# Entry points. `make lab` and `make test` install whatever is missing first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
READY := $(VENV)/.ready
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)

.PHONY: lab test unit notebooks env

$(READY): pyproject.toml tools/ensure_env.py
	$(PYTHON) tools/ensure_env.py --venv $(VENV)
	@touch $@

env: $(READY)

lab: $(READY)  ## open notebooks/ in JupyterLab, bound to localhost
	$(BIN)/jupyter lab --ip=127.0.0.1 --ServerApp.root_dir=notebooks $(ROOT_FLAG)

test: $(READY)  ## the whole suite: unit tests, nbval over every notebook, browser tests
	@command -v chromium >/dev/null || $(PYTHON) tools/ensure_env.py --chromium
	$(BIN)/python -m pytest

unit: $(READY)  ## unit tests only (fast)
	$(BIN)/python -m pytest tests

notebooks: $(READY)  ## re-execute every notebook in place (after a change that alters outputs)
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.timeout=600 notebooks/[0-9]*.ipynb
