"""Service start-up wiring shared by `kiln serve` and `kiln worker`: the stack of store, Redis,
sandboxes and workers, the embedded redis-server, the HTTP server.
"""
