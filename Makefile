# Homework 7 package. `make` installs everything and regenerates the releases;
# `make test` runs the package's own tests. See README.md.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
HW     ?= hw07
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all install release release-check test test-slow test-all grade bench clean

all: release

# A virtual environment of our own, from pinned requirements; re-created when they change.
$(STAMP): requirements.txt constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt -c constraints.txt
	$(PY) -m pip check
	touch $(STAMP)

install: $(STAMP)

# Regenerate student/, solutions/ and autograder/ from assignments/ (byte-identical on a re-run).
release: $(STAMP)
	$(PY) -m coursekit release $(HW)

# Fail if the committed releases differ from a fresh build.
release-check: $(STAMP)
	$(PY) -m pytest -q tests/test_release.py -k fresh

# The default suite (CI runs this): well under 15 minutes on 2 cores.
test: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

# Slow suites (long-running robustness and benchmark-sized cases).
test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

test-all: test test-slow

# TA batch grading: make grade SUBMISSIONS=<folder> OUT=<folder> [FORCE=1]
grade: $(STAMP)
	@test -n "$(SUBMISSIONS)" -a -n "$(OUT)" || { echo "usage: make grade SUBMISSIONS=<folder> OUT=<folder> [FORCE=1]"; exit 2; }
	$(PY) -m coursekit grade "$(SUBMISSIONS)" --out "$(OUT)" --jobs $(JOBS) $(if $(FORCE),--force,)

# Benchmarks print figures; they assert nothing.
bench: $(STAMP)
	$(PY) bench/release_benchmark.py
	$(PY) bench/grading_benchmark.py

clean:
	rm -rf build .pytest_cache
