# Each target creates .venv on first use and installs graphwright with its pinned
# dependencies into it (torch 2.13.0's CPU wheel installs offline).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-quick bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	@for script in examples/*.py; do \
		echo "=== $$script ==="; \
		$(PY) $$script || exit 1; \
	done

test: $(STAMP)
	$(PY) -m pytest -q tests

test-quick: $(STAMP)
	$(PY) -m pytest -q -m "not slow" tests

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
