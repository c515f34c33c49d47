"""Runs: admission, the queue, workers, events, cancel and the stale-run reaper.

The HTTP API only uses :class:`~app.runs.service.RunService`; ``kiln serve`` / ``kiln worker``
start :class:`~app.runs.worker.Worker` (see :mod:`app.service.worker_main`). The wiring is
``docs/service-contract.md``.
"""
