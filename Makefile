# Each target creates .venv on first use and installs graphwright with its pinned
# dependencies into it (torch 2.13.0's CPU wheel installs offline).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-quick test-breadth test-opinfo test-browser test-corpus-reference test-pytorch-suite test-cpython-suite fuzz fuzz-summary bench docs clean

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

# One worker process per core, each taking whole files (a file's module-scoped fixtures,
# such as the DDP runs, are made once), except that the real-model suite's file is taken one
# model at a time (tests/conftest.py: SPLIT_BY_FIRST_ID_PART); `PYTEST_WORKERS=0` runs in this process.
PYTEST_WORKERS ?= auto
PYTEST := $(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile

test: $(STAMP)
	$(PYTEST) -m "not breadth" tests

# The slow cases of the wide real-model matrices (every optimizer, diffusers and repo-style
# model under each backend, against torch.compile; the 33 breadth families of Hugging Face
# models under the eager backend and torch.compile's recorded graph counts for them): longer
# than CI's budget. `make test` keeps a slice of each matrix: its quick cases, every Hugging
# Face family under aot_eager (the eager backend's capture, then AOT autograd), and the
# counts of the 20 core models.
test-breadth: $(STAMP)
	$(PYTEST) -m breadth tests

# PyTorch's operator database (tests/opinfo): every op of op_db, compiled and compared with
# eager (`make test` sweeps a fixed slice of it); ops spread over both workers. The handful run
# under inductor changes every ISO week; `GW_OPINFO_SEED=...` picks another.
test-opinfo: $(STAMP)
	GW_OPINFO=all $(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist load tests/opinfo

test-quick: $(STAMP)
	$(PYTEST) -m "not slow and not browser" tests

# The HTML report in headless Chromium: Debian's chromium package (installed with apt-get when
# missing; needs root or sudo) driven by Playwright from PyPI through its executable_path
# (Playwright's own browser download is never used).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

test-browser: $(STAMP)
	test -x /usr/bin/chromium || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium chromium-driver; }
	$(PY) -c "import playwright" 2>/dev/null || $(PY) -m pip install --quiet playwright
	$(PY) -m pytest -q -m browser tests

# The differential corpus run through PyTorch's torch.compile: validates its expectations.
test-corpus-reference: $(STAMP)
	GW_CORPUS_REFERENCE=1 $(PY) -m pytest -q tests/programs

# PyTorch's own TorchDynamo tests (test/dynamo/*.py, kept in a folder OUTSIDE this repository)
# run on PyTorch and on graphwright (tools/pytorch_suite): per file, the portable tests that
# pass on each. Not part of CI. `make test-pytorch-suite PYTORCH_TESTS=DIR [PYTORCH_TEST_FILES=...]`
PYTORCH_TESTS ?=
PYTORCH_TEST_FILES ?=
test-pytorch-suite: $(STAMP)
	@test -n "$(PYTORCH_TESTS)" || { echo "set PYTORCH_TESTS to a folder with PyTorch's test/dynamo files"; exit 2; }
	$(PY) -m tools.pytorch_suite $(PYTORCH_TESTS) $(PYTORCH_TEST_FILES)

# CPython's own tests as PyTorch runs them (test/dynamo/cpython/3_13), on Python 3.11: with
# PYTORCH_TESTS naming a copy of that folder they run as they are; without it, the folder is made
# under CPYTHON_SUITE from CPython 3.13's Lib/test (tools/pytorch_suite/cpython_files.py).
# One file at a time, PyTorch's outcomes cached. `make test-cpython-suite [CPYTHON_TEST_FILES=...]`
CPYTHON_LIB_TEST ?= $(HOME)/.pyenv/versions/3.13.0/lib/python3.13/test
CPYTHON_SUITE ?= /tmp/graphwright-cpython-suite
CPYTHON_TEST_FILES ?= test_dict test_list test_tuple test_set test_userdict test_userlist test_ordered_dict \
	test_defaultdict test_collections test_exceptions test_baseexception test_exception_variations test_raise \
	test_generators test_generator_stop test_contextlib test_iter test_itertools test_functools test_class \
	test_descr test_funcattrs test_builtin test_bool test_int test_float test_complex test_math test_range \
	test_slice test_sort test_grammar
test-cpython-suite: $(STAMP)
	@if [ -z "$(PYTORCH_TESTS)" ]; then $(PY) -m tools.pytorch_suite.cpython_files $(CPYTHON_LIB_TEST) \
		$(CPYTHON_SUITE) $(CPYTHON_TEST_FILES) > /dev/null; fi
	$(PY) -m tools.pytorch_suite $(or $(PYTORCH_TESTS),$(CPYTHON_SUITE)) $(addsuffix .py,$(CPYTHON_TEST_FILES)) \
		--jobs 0 --timeout 60

# A long campaign of generated programs (tests/fuzz) with a random seed: prints a summary;
# shrunk failures are saved under tests/programs/found/. `make fuzz N=10000 SEED=7`;
# `RECORD=FILE` appends each program's outcome to FILE and `FIRST=K` starts at program K
# (a campaign in chunks); `make fuzz-summary RECORD=FILE` summarizes what was recorded.
N ?= 1000
SEED ?= random
FIRST ?= 0
RECORD ?=
fuzz: $(STAMP)
	PYTHONPATH=tests $(PY) -m fuzz --programs $(N) --seed $(SEED) --first $(FIRST) $(if $(RECORD),--record $(RECORD))

fuzz-summary: $(STAMP)
	PYTHONPATH=tests $(PY) -m fuzz --summarize $(RECORD) --features

# Fixed glibc malloc thresholds: otherwise, depending on a process's heap history,
# large per-call buffers are unmapped and faulted back in on every call (seen as
# a 10-15% slowdown of whichever side was unlucky), which is noise, not speed.
BENCH_MALLOC := glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=67108864

bench: $(STAMP)
	GLIBC_TUNABLES=$(BENCH_MALLOC) $(PY) -m bench

docs: $(STAMP)
	$(PY) -c "import graphwright; from graphwright.strict.interpreter import graph_breaks; graph_breaks.write_docs()"

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
