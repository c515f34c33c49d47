"""kiln's service: config, providers, agent loop, runs, store, HTTP API, web UI and CLI."""
