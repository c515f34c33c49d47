# The two commands of the README: `make demo` runs kiln, `make test` runs every test.
SHELL := /bin/bash
export TIKTOKEN_CACHE_DIR ?= $(abspath ../shared/tiktoken-cache)
PY := .venv/bin/python

.PHONY: setup demo test lint bench

setup:
	@scripts/setup.sh

demo: setup
	$(PY) -m app parse app/demos/todo-app.txt --format summary

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy

test: lint
	@$(PY) -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

bench: setup
	$(PY) bench/parser.py
