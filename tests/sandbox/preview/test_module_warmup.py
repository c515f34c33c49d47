from __future__ import annotations

import anyio
import pytest

from sandbox import SandboxManager
from sandbox.preview.module_warmup import warm_dev_server, warm_module_graph

pytestmark = pytest.mark.anyio

PAGE = """<!doctype html><html><head>
<script type="module" src="/@vite/client"></script>
<script type="module">import RefreshRuntime from "/@react-refresh"</script>
</head><body><div id="root"></div>
<script type="module" src="/src/main.jsx"></script></body></html>"""
# Modules as Vite serves them: every import rewritten to a path on the dev server.
SERVED = {
    "/": PAGE,
    "/@vite/client": 'import "/@vite/env";',
    "/src/main.jsx": (
        'import __vite__cjsImport0 from "/node_modules/.vite/deps/react-dom_client.js?v=1a2b";\n'
        'import App from "/src/App.jsx";\nimport "/src/index.css";'
    ),
    "/src/App.jsx": (
        'import { useTodos } from "/src/store.js?t=1712";\n'
        'const Lazy = () => import("/src/Lazy.jsx");\nimport App2 from "/src/App.jsx";'
    ),
    "/src/store.js?t=1712": 'import { create } from "/node_modules/.vite/deps/zustand.js?v=1a2b";',
    "/src/Lazy.jsx": "export default 1;",
    "/src/index.css": "body{}",
    "/node_modules/.vite/deps/zustand.js?v=1a2b": 'import "/node_modules/.vite/deps/chunk-x.js";',
}


async def test_the_page_and_every_module_it_reaches_are_asked_for_once() -> None:
    asked: list[str] = []

    async def fetch(path: str) -> str | None:
        asked.append(path)
        return SERVED.get(path)

    assert await warm_module_graph(fetch) == len(asked) - 1
    assert asked[0] == "/"
    assert sorted(asked[1:]) == sorted(
        [
            "/@vite/client",
            "/src/main.jsx",
            "/node_modules/.vite/deps/react-dom_client.js?v=1a2b",
            "/src/App.jsx",
            "/src/index.css",
            "/src/store.js?t=1712",
            "/src/Lazy.jsx",
            "/node_modules/.vite/deps/zustand.js?v=1a2b",  # waited for, not read
        ]
    )


async def test_bounded_and_a_failed_request_is_skipped() -> None:
    asked: list[str] = []

    async def fetch(path: str) -> str | None:
        asked.append(path)
        return None if path == "/src/main.jsx" else SERVED.get(path)

    assert await warm_module_graph(fetch) == 2  # the client and main.jsx: nothing past it
    asked.clear()

    async def endless(path: str) -> str | None:
        asked.append(path)
        if path == "/":
            return '<script src="/src/0.js"></script>'
        number = int(path.removeprefix("/src/").removesuffix(".js"))
        return f'import "/src/{number + 1}.js";'

    assert await warm_module_graph(endless, max_modules=25) == 25


async def test_the_modules_of_one_import_level_are_asked_for_at_once_within_the_limit() -> None:
    in_flight, peaks = 0, list[int]()

    async def fetch(path: str) -> str | None:
        nonlocal in_flight
        in_flight += 1
        peaks.append(in_flight)
        await anyio.sleep(0)  # the others of its level start meanwhile
        in_flight -= 1
        return SERVED.get(path)

    assert await warm_module_graph(fetch, parallel=2) == 8
    assert max(peaks) == 2  # main.jsx's three imports, two at a time (one at a time before)


@pytest.mark.docker
async def test_a_real_dev_server_is_walked_from_its_page(manager: SandboxManager) -> None:
    sandbox = await manager.acquire("chat-warmup", "owner-1", "vite-react")
    try:
        await manager.wait_ready(sandbox.id)
        # The template's page: the client, main.jsx, react's bundles, App.jsx, its CSS...
        assert await warm_dev_server(sandbox.dev_url) >= 5
    finally:
        await manager.destroy(sandbox.id)
