# The two commands of the README: `make demo` runs kiln, `make test` runs every test.
SHELL := /bin/bash
PY := .venv/bin/python

.PHONY: setup lock demo generate test lint bench parser-compiled

setup:
	@scripts/setup.sh

# Rewrites requirements.lock from pyproject.toml's ranges (and requirements-pip.lock, the pip
# that installs it, see scripts/setup.sh): exact versions with hashes for every
# platform and Python >= 3.11. uv rather than pip-tools: `uv pip compile --universal` writes one
# lock valid on every platform and Python version (pip-compile only for the interpreter it runs
# on), in a second. uv is only needed here; installing from the lock is plain pip.
# Versions already in the lock are kept; `make lock LOCK_FLAGS=--upgrade` takes the newest.
lock:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && python3 -m venv "$$tmp" \
	  && "$$tmp/bin/pip" install -q uv \
	  && "$$tmp/bin/uv" pip compile --quiet pyproject.toml --extra test --universal --python-version 3.11 \
	     --generate-hashes --custom-compile-command "make lock" $(LOCK_FLAGS) -o requirements.lock \
	  && echo "pip>=26,<27" | "$$tmp/bin/uv" pip compile --quiet - --universal --python-version 3.11 \
	     --generate-hashes --custom-compile-command "make lock" $(LOCK_FLAGS) -o requirements-pip.lock

# The main job: the web chat at http://127.0.0.1:8000 (the login URL is printed). With no API
# key set, runs use the replay provider and its built-in demo answer. Sandboxes trust the
# host's system CA bundle by default (a TLS-inspecting proxy's CA included).
demo: setup
	.venv/bin/kiln serve --host 127.0.0.1 --port $${KILN_PORT:-8000}

# One generation from the terminal, printing the preview URL at the end.
generate: setup
	.venv/bin/kiln run "make me a todo app"

# The optional mypyc build of parser/ into .parser-compiled/<digest of the sources>/ (see
# app/parser_choice.py, which loads it only when it matches the sources; setup runs this when a
# C compiler is present). Nothing to do when the current sources' build exists.
parser-compiled:
	$(PY) scripts/build_parser.py

# The web UI (app/web, plain ES modules) is type-checked and linted by tsc over its JSDoc types
# (scripts/web-check/tsconfig.json: every .js file there, unused names and missing returns too).
lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy
	scripts/web-check/node_modules/.bin/tsc -p scripts/web-check

# The whole suite runs with the compiled parser (KILN_PARSER=compiled in CI, where a missing
# build fails the run; elsewhere the fresh build if there is one), and beside it the parser's
# tests and `kiln parse`'s once more in pure Python (about 40 s; tests/parser/test_implementation.py
# checks which implementation each run loaded). Both runs always run; either failing fails.
# The suite runs in TEST_PROCESSES pytest-xdist processes (TEST_PROCESSES=0: in pytest's own
# process, as before): most of its time waits on Docker, npm, Vite and Chromium, not the CPU.
# tests/conftest.py gives every test a group (its module; tests/web is one) and `--dist loadgroup`
# runs a group whole in one process, so a module's served kiln and the web tests' browser and
# kiln are built once per run; the long groups start first (LONG_GROUPS there).
# Measured back to back: npm_proxy, networks, api end_to_end and sandboxes took 121 s in one
# process, 81 s in two. Three processes on a 2-core box: the groups mostly wait (containers,
# installs, a browser), so a third process fills the other two's waits (CI's pytest was 30.5 min
# in two processes).
PARSER_IN_TESTS := $(if $(filter true,$(CI)),compiled,auto)
PARSER_TESTS := tests/parser tests/app/test_parse_command.py
TEST_PROCESSES ?= 3
IN_PROCESSES := -n $(TEST_PROCESSES) --dist loadgroup --no-loadscope-reorder

# The pure-Python parser run goes beside the suite (its own temporary folder and output file,
# printed after the suite): it is CPU-bound and short, the suite's processes mostly wait.
test: lint
	@pure=$$(mktemp -d); \
	( KILN_PARSER=python $(PY) -m pytest -q -p no:cacheprovider --basetemp=$$pure/tmp \
	  $(PARSER_TESTS) > $$pure/out 2>&1; echo $$? > $$pure/rc ) & \
	KILN_PARSER=$(PARSER_IN_TESTS) $(PY) -m pytest $(IN_PROCESSES) --durations=25; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; rc=1; fi; \
	wait; echo "tests/parser again with the pure-Python parser (KILN_PARSER=python)"; \
	cat $$pure/out; rc2=$$(cat $$pure/rc); rm -rf $$pure; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; exit $$rc2

bench: setup
	$(PY) bench/parser.py
