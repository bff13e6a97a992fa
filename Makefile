# memgym: two commands on a fresh machine, `make demo` and `make test`; both build .venv themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The CPU build of torch must come first: a plain `torch` requirement would pull a multi-GB CUDA build.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench venv clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[all,dev]"
	@touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/memgym bench --suite quick

test: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -n 2 --dist loadfile

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
