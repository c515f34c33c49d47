# The two commands of the README: `make demo` runs kiln, `make test` runs every test.
SHELL := /bin/bash
export TIKTOKEN_CACHE_DIR ?= $(abspath ../shared/tiktoken-cache)
PY := .venv/bin/python

.PHONY: setup demo generate test lint bench

setup:
	@scripts/setup.sh

# The main job: the web chat at http://127.0.0.1:8000 (the login URL is printed). With no API
# key set, runs use the replay provider and its built-in demo answer.
demo: setup
	KILN_SANDBOX_CA_BUNDLE=$${KILN_SANDBOX_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt} \
	  .venv/bin/kiln serve --host 127.0.0.1 --port $${KILN_PORT:-8000}

# One generation from the terminal, printing the preview URL at the end.
generate: setup
	KILN_SANDBOX_CA_BUNDLE=$${KILN_SANDBOX_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt} \
	  .venv/bin/kiln run "make me a todo app"

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy

test: lint
	@$(PY) -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

bench: setup
	$(PY) bench/parser.py
