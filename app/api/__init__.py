"""The HTTP API (Starlette): JSON endpoints, SSE, auth, the UI's static files and the preview.

:func:`app.api.app.build_app` assembles it; ``docs/service-contract.md`` is the API's table.
"""
