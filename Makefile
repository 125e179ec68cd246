# Course kit. `make` installs everything and regenerates the releases; `make test` runs the
# package's own tests. Every target takes HW=<assignment> (default: all of assignments/, or the
# only one); `make test Q=q6` runs only q6's tests and catalogue variants. See README.md.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
HW     ?=
Q      ?=
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
# HW= limits the tests to that assignment (its parametrized tests and assignments/HW/tests/);
# Q= to those questions (pytest -k, and the misconception catalogue's variants of Q only).
SELECTION  := $(if $(HW),COURSEKIT_HW=$(HW)) $(if $(Q),COURSEKIT_QUESTIONS=$(Q))
TEST_PATHS := $(if $(HW),tests $(wildcard assignments/$(HW)/tests))

.PHONY: all install release release-check test test-slow test-all test-browser grade bench clean

all: release

# A virtual environment of our own, from pinned requirements; re-created when they change.
# System packages (bubblewrap, chromium) come from apt-get when root; otherwise it says what to run.
$(STAMP): requirements.txt constraints.txt pyproject.toml scripts/ipython_kernel_config.py scripts/install-system-packages.sh
	scripts/install-system-packages.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt -c constraints.txt
	$(PY) -m pip install --quiet --disable-pip-version-check -e . --no-deps
	$(PY) -m pip check
	mkdir -p $(VENV)/etc/ipython && cp scripts/ipython_kernel_config.py $(VENV)/etc/ipython/
	touch $(STAMP)

install: $(STAMP)

# Regenerate student/, solutions/ and autograder/ from assignments/ (byte-identical on a re-run).
release: $(STAMP)
	$(PY) -m coursekit release $(HW)

# Fail if the committed releases differ from a fresh build.
release-check: $(STAMP)
	$(SELECTION) $(PY) -m pytest -q tests/test_release.py -k fresh

# The default suite (CI runs this): well under 15 minutes on 2 cores.
test: $(STAMP)
	$(SELECTION) $(PY) -m pytest -q -m "not slow and not browser" $(TEST_PATHS) $(if $(Q),-k "$(Q)")

# Slow suites (long-running robustness and benchmark-sized cases).
test-slow: $(STAMP)
	$(SELECTION) $(PY) -m pytest -q -m slow $(TEST_PATHS) $(if $(Q),-k "$(Q)") || [ $$? -eq 5 ]  # 5: none selected

test-all: test test-slow

# The student flow in JupyterLab, driven in headless Debian chromium by Playwright (CI runs this
# too); screenshots and check outputs land in artifacts/browser/. Says what to install if missing.
test-browser: $(STAMP)
	@$(PY) tests/browser/preflight.py
	$(SELECTION) $(PY) -m pytest -q -m browser tests/browser

# TA batch grading with HW's autograder zip, every notebook sandboxed, judged from outside:
#   make grade [HW=<name>] SUBMISSIONS=<folder> OUT=<folder> [FORCE=1] [OTTER=1 (otter's own pass as a column)]
grade: $(STAMP)
	@test -n "$(SUBMISSIONS)" -a -n "$(OUT)" || { echo "usage: make grade [HW=<name>] SUBMISSIONS=<folder> OUT=<folder> [FORCE=1]"; exit 2; }
	$(PY) -m coursekit grade "$(SUBMISSIONS)" --out "$(OUT)" --jobs $(JOBS) $(if $(HW),--hw $(HW)) $(if $(FORCE),--force,) $(if $(OTTER),--otter-pass,)

# Benchmarks print figures; they assert nothing.
bench: $(STAMP)
	$(PY) bench/release_benchmark.py $(HW)
	$(PY) bench/grading_benchmark.py

clean:
	rm -rf build .pytest_cache
