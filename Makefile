# tsevo: the two commands a new user needs are `make demo` and `make test`.
# Both create .venv on first use (torch==2.13.0 first, then the project editable with dev extras)
# and are idempotent: the stamp below is only rebuilt when pyproject.toml changes.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.tsevo-setup-stamp
PYTEST_ARGS ?= -n 2

export HF_HUB_OFFLINE := 1
export HF_HUB_DISABLE_PROGRESS_BARS := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export MPLBACKEND := Agg
export PYTHONHASHSEED := 0
export JUPYTER_PLATFORM_DIRS := 1
export IPYTHONDIR := $(CURDIR)/.cache/ipython
export JUPYTER_RUNTIME_DIR := $(CURDIR)/.cache/jupyter-runtime

.PHONY: setup demo test lint typecheck pytest nbval bench test-live browser-setup test-browser test-lab notebooks clean-venv

setup: $(STAMP)

$(STAMP): pyproject.toml
	@bash .ci/setup.sh "$(PYTHON)" "$(VENV)"
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) -m tsevo demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check --diff .
	$(VENV)/bin/lint-imports --no-cache

typecheck: $(STAMP)
	$(VENV)/bin/mypy tsevo

pytest: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

test: $(STAMP)
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory lint typecheck pytest nbval || exit $$?; \
	echo "make test: all checks passed in $$(( $$(date +%s) - start ))s"

nbval: $(STAMP)
	$(PY) -m pytest --nbval-lax --nbval-current-env --nbval-sanitize-with notebooks/nbval_sanitize.cfg notebooks/
	$(VENV)/bin/nbstripout --keep-id notebooks/*.ipynb && git diff --exit-code notebooks/

notebooks: $(STAMP)
	$(PY) -c "from tsevo.notebook import QuickstartConfig, ensure_run; from tsevo.studies import execute_notebooks; execute_notebooks(ensure_run(QuickstartConfig(run_dir='runs/notebooks')))"

# Browser tiers (opt-in): Debian's chromium (no recommends) and Playwright from PyPI, never a
# browser download; both steps are skipped when already installed.
browser-setup: $(STAMP)
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium; }
	@$(PY) -c "import playwright" 2>/dev/null || $(PIP) install -q playwright
	@echo "browser setup: $$(chromium --version 2>/dev/null | head -1), playwright $$($(PY) -c 'import importlib.metadata as m; print(m.version("playwright"))')"

test-browser: browser-setup
	bash .ci/fetch_widget_assets.sh
	TSEVO_BROWSER=1 TSEVO_SCREENSHOT_DIR=$(CURDIR)/runs/browser $(PY) -m pytest -s -m browser tests/browser

# The workshop path in a real JupyterLab: jupyter lab from the venv (127.0.0.1, random port and
# token), the notebooks run from the menu in headless chromium, widgets checked live, screenshots
# in runs/lab. TSEVO_LAB_DISABLE=@jupyter-widgets/jupyterlab-manager breaks the widget front end
# on purpose (the tier must then fail).
test-lab: browser-setup
	@start=$$(date +%s); \
	TSEVO_LAB=1 TSEVO_SCREENSHOT_DIR=$(CURDIR)/runs/lab $(PY) -m pytest -s -m lab tests/lab || exit $$?; \
	echo "make test-lab: passed in $$(( $$(date +%s) - start ))s; screenshots in runs/lab"

test-live: $(STAMP)
	bash .ci/live.sh

bench: $(STAMP)
	$(PY) -m tests.bench

clean-venv:
	rm -rf $(VENV)
