# The two commands of the README: `make demo` runs kiln, `make test` runs every test.
SHELL := /bin/bash
export TIKTOKEN_CACHE_DIR ?= $(abspath ../shared/tiktoken-cache)
PY := .venv/bin/python

.PHONY: setup demo test lint bench

setup:
	@scripts/setup.sh

# The main job: a generation from a chat message into a running app. With no API key set, the
# replay provider plays the built-in demo answer; the preview URL is printed at the end.
demo: setup
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
