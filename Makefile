# Entry points. `make lab` and `make test` install whatever is missing first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# One stamp per audience (pyproject.toml's extras): make lab installs the learner's set only.
LEARNER := $(VENV)/.ready-notebooks
READY := $(VENV)/.ready-test
BENCH_READY := $(VENV)/.bench-ready
HUB_PROXY := build/hub/node_modules/.bin/configurable-http-proxy
APP_PORT ?= 8866
CORES := $(shell $(PYTHON) -c 'import os; print(os.cpu_count() or 1)')
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
# Python may cache compiled modules (__pycache__/, git-ignored) even where the environment says not
# to: without the cache every pytest process rewrites the asserts of ~230 modules again (5 s each),
# and make test starts about ten of them.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: lab app book test unit portability notebooks env train-shakespeare train-induction bench bench-explorers system-packages assignments grade bench-grading hub-proxy hub-proxy-if-npm hub test-hub

$(VENV)/.ready-%: pyproject.toml tools/ensure_env.py
	$(PYTHON) tools/ensure_env.py --venv $(VENV) --extras $*
	@touch $@

.PRECIOUS: $(VENV)/.ready-%

# course and test also install the course kit, a package of its own (course/pyproject.toml: gptlib_course)
$(VENV)/.ready-course $(READY): course/pyproject.toml

env: $(LEARNER)

lab: $(LEARNER)  ## install the learner's set (the notebooks extra) where missing, then open notebooks/ in JupyterLab on 127.0.0.1
	$(BIN)/jupyter lab --ip=127.0.0.1 --ServerApp.root_dir=notebooks $(ROOT_FLAG)

app: $(VENV)/.ready-app  ## the four explorers as one page for the lecture hall: Voila on 127.0.0.1, code hidden, nothing fetched from elsewhere
	JUPYTER_PATH=$(CURDIR)/app/jupyter $(BIN)/voila app/explorers.ipynb --Voila.ip=127.0.0.1 --port=$(APP_PORT) --strip_sources=True "--Voila.config_file_paths=['app']"

book: $(VENV)/.ready-book  ## the executed notebooks as a static site in build/book/html: offline, nothing re-executed
	$(BIN)/python tools/build_book.py

system-packages:  ## Debian's Chromium (browser tests), bubblewrap (the grader's sandbox) and npm, each installed only when missing (root and apt-get)
	@$(PYTHON) tools/ensure_env.py --system-packages

test: $(READY) system-packages hub-proxy-if-npm  ## the whole suite: unit tests, nbval over every notebook, browser tests (a worker per core and one more, a file each; order: conftest.py)
	$(BIN)/python -m pytest -n $$(($(CORES) + 1)) --dist loadfile --no-loadscope-reorder

unit: $(READY)  ## the fast inner loop: unit tests only, no notebook kernel or browser (pytest -m unit, a worker per core)
	$(BIN)/python -m pytest -m unit -n $(CORES)

portability: $(READY)  ## nbval over every notebook natively and under every simulated CPU / thread count this CPU can run (tests/notebooks/test_portability.py, ~15 min)
	GPTLIB_PORTABILITY=all $(BIN)/python -m pytest -m portability tests/notebooks/test_portability.py

notebooks: $(LEARNER)  ## re-execute every notebook in place (after a change that alters outputs; no widget state: each explorer output carries its static copy)
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.timeout=600 --ExecutePreprocessor.record_timing=False --ExecutePreprocessor.store_widget_state=False notebooks/[0-9]*.ipynb

# The course kit (docs/teaching.md): SUBMISSIONS=folder of <student>/<NN_name>.ipynb
COURSE ?= build/course
SUBMISSIONS ?= submissions

assignments: $(VENV)/.ready-course  ## build $(COURSE)/student (release) and $(COURSE)/autograder (hidden tests) from notebooks/
	$(BIN)/python -m gptlib_course assign --out $(COURSE)

grade: $(VENV)/.ready-course system-packages  ## grade $(SUBMISSIONS)/<student>/<NN_name>.ipynb in parallel, each in a bubblewrap sandbox: $(COURSE)/grades/grades.csv and feedback/<student>.html
	$(BIN)/python -m gptlib_course grade $(SUBMISSIONS) --out $(COURSE)

$(HUB_PROXY):
	npm install --no-audit --no-fund --prefix build/hub configurable-http-proxy@4

hub-proxy: $(HUB_PROXY)  ## configurable-http-proxy from npm, into build/hub (JupyterHub's proxy)

hub-proxy-if-npm:  ## the same where npm exists; without it make test goes on and the hub test skips (in CI it fails)
	@[ -x $(HUB_PROXY) ] || ! command -v npm >/dev/null || $(MAKE) --no-print-directory hub-proxy

hub: $(VENV)/.ready-course $(HUB_PROXY)  ## JupyterHub for a class on this machine, 127.0.0.1:8000 (course/hub/jupyterhub_config.py)
	$(BIN)/jupyterhub -f course/hub/jupyterhub_config.py

test-hub: $(READY) $(HUB_PROXY)  ## the hub test alone (make test runs it too): two users log in, spawn, run a checker, see only their files (~1 min)
	$(BIN)/python -m pytest -p no:nbval -o addopts="" -q tests/course/test_hub.py

bench-grading: $(VENV)/.ready-course  ## the course kit's grading throughput on a synthetic class (every notebook, 10 students)
	$(BIN)/python -m benchmarks.course_grading

# `make train-shakespeare DEVICE=cuda` (or mps) trains on a GPU when torch has one
DEVICE ?= cpu

train-shakespeare: $(LEARNER)  ## retrain gptlib/checkpoints/shakespeare.pt (the course GPT on tiny Shakespeare; every CPU core, or DEVICE=cuda|mps)
	$(BIN)/python -m gptlib.train shakespeare --steps 4500 --batch-size 32 --lr 3e-3 --eval-every 500 --seed 0 --device $(DEVICE) --out gptlib/checkpoints/shakespeare.pt --state build/shakespeare.state.pt

train-induction: $(LEARNER)  ## retrain gptlib/checkpoints/induction.pt (two-layer attention-only induction model, a few minutes; DEVICE=cuda|mps too)
	$(BIN)/python -m gptlib.train induction --steps 3000 --batch-size 32 --lr 1e-3 --warmup 100 --eval-every 250 --seed 0 --device $(DEVICE) --out gptlib/checkpoints/induction.pt --state build/induction.state.pt

$(BENCH_READY): $(READY) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python -m pip install --quiet --no-deps 'transformer-lens>=3,<4'  # skips wandb, accelerate, ...: unused here
	@touch $@

bench: $(BENCH_READY)  ## gptlib vs HF GPT-2, TransformerLens and a fused nanoGPT-style model: logits check, interleaved timings, MFU, the nbval suite's time; writes benchmarks/results/ (table.md is the README's table)
	$(BIN)/python -m benchmarks.run --nbval
	$(MAKE) bench-explorers

bench-explorers: $(READY) system-packages  ## the explorers' frame times (key press -> next frame) in JupyterLab, Voila and the book, then each book page's bytes and time to its first picture and model, Chromium headless
	$(BIN)/python -m benchmarks.roundtrip
	$(BIN)/python tools/build_book.py
	$(BIN)/python -m benchmarks.book_load build/book/html
