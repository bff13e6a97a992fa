# memgym: two commands on a fresh machine, `make demo` and `make test`; both build .venv themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The CPU build of torch must come first: a plain `torch` requirement would pull a multi-GB CUDA build.
# Here pip finds the CPU wheel in its local wheel folder; elsewhere set
# TORCH_INDEX=https://download.pytorch.org/whl/cpu (pip's --index-url for the torch step only).
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
# The stamp's name carries the torch spec and index: changing either reinstalls (a plain stamp ignored them).
STAMP := $(VENV)/.installed-$(shell printf '%s|%s' '$(TORCH_SPEC)' '$(TORCH_INDEX)' | cksum | cut -d' ' -f1)

.PHONY: demo test lint bench venv clean

$(STAMP): pyproject.toml
	@# a .venv left half-built (interrupted before pip was in it) is rebuilt, not reused
	@$(PY) -m pip --version >/dev/null 2>&1 || $(PYTHON) -m venv --clear $(VENV)
	@# a stamp of another torch spec or index: that torch goes first (pip keeps an installed torch==X from
	@# any index, so a CUDA build stayed in place after TORCH_INDEX named the CPU wheels)
	@if ls $(VENV)/.installed-* 2>/dev/null | grep -qvx '$(STAMP)'; then $(PY) -m pip uninstall --quiet -y torch; fi
	@rm -f $(VENV)/.installed $(VENV)/.installed-*
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[all,dev]"
	@touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/memgym bench --suite quick

test: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -n 2 --dist loadfile

bench: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/memgym bench --suite default

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
