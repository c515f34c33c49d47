"""The error reporter in a real Chromium: a page served through the preview proxy reports its
failed fetch, failed module loads and uncaught errors (mapped to the original file:line) into
its sandbox's Redis stream; a hostile page is capped and attributed to its own sandbox only.

The last test runs a real vite-react sandbox (Docker): a render error in ``src/App.jsx``
arrives mapped through the source map Vite serves to the line of the original JSX.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re
import threading
import uuid
import zipfile
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import redis
import redis.asyncio
import websockets
from playwright.sync_api import BrowserContext, WebSocketRoute, expect
from playwright.sync_api import Route as BrowserRoute
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from websockets.sync.client import connect as ws_connect
from websockets.typing import Subprotocol

from app.projects.git_store import GitProjectStore
from app.projects.store import VersionInfo
from app.projects.sync import ProjectSync
from sandbox.images.templates import SANDBOX_UID, WORKSPACE
from sandbox.preview.error_ingest import PreviewErrorIngest
from sandbox.preview.error_reports import MAX_MESSAGE
from sandbox.preview.error_stream import PreviewErrorStream, errors_key
from sandbox.preview.module_warmup import warm_dev_server
from sandbox.preview.proxy import PreviewProxy
from tests.sandbox.preview import test_proxy as proxy_tests
from tests.sandbox.preview.test_proxy import ViteSandbox, write_into
from tests.servers import UvicornThread, wait_until

vite_sandbox = proxy_tests.vite_sandbox
LIMIT_SECONDS = 30.0  # deadline guards, not speed assertions
# Generated line 3 of /src/app.js comes from line 12, column 5 of App.jsx (0-based: 11, 4).
SOURCE_MAP = {"version": 3, "sources": ["App.jsx"], "names": [], "mappings": ";;AAWI"}
APP_MODULE = (
    "// a module as a dev server serves it, with its inline source map\n"
    "function render() {\n"
    '  throw new Error("render failed")\n'
    "}\n"
    "setTimeout(render)\n"
    "//# sourceMappingURL=data:application/json;base64,"
    + base64.b64encode(json.dumps(SOURCE_MAP).encode()).decode()
    + "\n"
)
PAGE = """<!doctype html><html><head><title>app</title>
<script type="module" src="/src/app.js"></script>
<script type="module" src="/src/gone.js"></script>
<script type="module">
fetch("/api/broken", {method: "POST"}).catch(() => {});
import("/src/missing.js");
console.log("hello from the app");
</script></head><body><div id="root"></div></body></html>"""
# Values that break naive reporters: a circular object, a getter that throws, a non-Error
# rejection; the app goes on (its title) and its console calls return what they return.
AWKWARD = """<!doctype html><html><head><title>awkward</title></head><body><script>
const circular = {name: "loop"}; circular.self = circular;
console.error("circular", circular);
const trap = {}; Object.defineProperty(trap, "stack", {get() { throw new Error("no"); }});
console.warn(trap);
Promise.reject(42);
const returned = console.log("still here");
document.title = "alive " + String(returned);
</script></body></html>"""
HOSTILE = """<!doctype html><html><head><title>hostile</title></head><body><script>
const huge = "<img src=x onerror=alert(1)>" + "m".repeat(1024 * 1024);
const started = Date.now();
let n = 0;
function burst() {
  // ~10,000 errors a second (distinct), a few of them a megabyte long, HTML in them.
  const tick = Date.now();
  while (Date.now() - tick < 80) {
    // Mostly error events (what a throwing render loop makes), every tenth a console.error.
    if (n % 10) window.dispatchEvent(new ErrorEvent("error", {message: "<u>event</u> " + (n++)}));
    else console.error("<b>flood</b> " + (n++));
  }
  for (let i = 0; i < 3; i++) console.error(huge + (n++));
  for (let i = 0; i < 100; i++) setTimeout(() => { throw new Error("<i>thrown</i> " + (n++)); });
  for (let i = 0; i < 5; i++) {
    fetch("/__kiln/preview-errors", {method: "POST", headers: {"content-type": "application/json"},
      body: JSON.stringify({sandbox: "OTHER", reports: [{kind: "uncaught", message: "forged",
        sandbox: "OTHER",
        source: {file: "http://OTHER.preview.localhost/src/App.jsx", line: 1}}]})});
  }
  if (Date.now() - started < 1500) setTimeout(burst, 100);
  else document.title = "done " + n;
}
burst();
</script></body></html>"""


async def page(request: Request) -> Response:
    return HTMLResponse(PAGE)


async def awkward(request: Request) -> Response:
    return HTMLResponse(AWKWARD)


async def hostile(request: Request) -> Response:
    other = request.headers.get("x-other", "OTHER")
    return HTMLResponse(HOSTILE.replace("OTHER", other))


async def app_module(request: Request) -> Response:
    return PlainTextResponse(APP_MODULE, media_type="text/javascript")


async def broken(request: Request) -> Response:
    return JSONResponse({"error": "down"}, 500)


async def healthz(request: Request) -> Response:
    return JSONResponse({"ok": True})


# A page whose one dependency bundle the dev server answers 504 (as Vite does for a bundle it
# replaced while the page loaded) the first ``outdated`` times it is asked for.
OUTDATED_PAGE = """<!doctype html><html><head><title>bundles</title>
<script type="module" src="/src/bundles/{name}.js"></script></head><body></body></html>"""
OUTDATED_ENTRY = """import {{ shown }} from "/node_modules/.vite/deps/{name}.js?v=1";
document.body.textContent = shown;"""
BUNDLE_ASKED: dict[str, int] = {}  # bundle name -> requests so far


async def outdated_page(request: Request) -> Response:
    return HTMLResponse(OUTDATED_PAGE.format(name=request.path_params["name"]))


async def outdated_entry(request: Request) -> Response:
    entry = OUTDATED_ENTRY.format(name=request.path_params["name"])
    return PlainTextResponse(entry, media_type="text/javascript")


async def outdated_bundle(request: Request) -> Response:
    name = request.path_params["name"]
    BUNDLE_ASKED[name] = BUNDLE_ASKED.get(name, 0) + 1
    outdated = int(name.rsplit("-", 1)[-1])  # "<test>-<times answered 504>"
    if BUNDLE_ASKED[name] <= outdated:
        return Response(status_code=504)
    return PlainTextResponse('export const shown = "fresh bundles";', media_type="text/javascript")


DEV_SERVER = Starlette(
    routes=[
        Route("/", page),
        Route("/hostile", hostile),
        Route("/awkward", awkward),
        Route("/src/app.js", app_module),
        Route("/api/broken", broken, methods=["POST"]),
        Route("/bundles/{name}", outdated_page),
        Route("/src/bundles/{name}.js", outdated_entry),
        Route("/node_modules/.vite/deps/{name}.js", outdated_bundle),
    ]
)

ServeProxy = Callable[[dict[str, str]], UvicornThread]


@pytest.fixture
def serve_proxy(redis_url: str) -> Iterator[ServeProxy]:
    """Proxies with the reporter on (each in its own thread and loop, with its own client)."""
    started: list[UvicornThread] = []

    def start(routes: dict[str, str]) -> UvicornThread:
        async def resolve(sandbox_id: str) -> str | None:
            return routes.get(sandbox_id)

        client = redis.asyncio.Redis.from_url(redis_url)
        stream = PreviewErrorStream(client)

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            yield
            await client.aclose()  # in the proxy's own loop, where its connections live

        inner = Starlette(routes=[Route("/healthz", healthz)], lifespan=lifespan)
        proxy = PreviewProxy(
            resolve, public_host="localhost", app=inner, reports=PreviewErrorIngest(stream)
        )
        server = UvicornThread(proxy).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__(None, None, None)


@pytest.fixture
def dev_server() -> Iterator[UvicornThread]:
    with UvicornThread(DEV_SERVER) as server:
        yield server


@pytest.fixture
def stored(redis_url: str) -> Iterator[Callable[[str], list[dict[str, Any]]]]:
    client = redis.Redis.from_url(redis_url)

    def read(sandbox_id: str) -> list[dict[str, Any]]:
        rows: list[tuple[bytes, dict[bytes, bytes]]] = client.xrange(errors_key(sandbox_id))  # type: ignore[assignment]
        return [json.loads(fields[b"e"]) for _, fields in rows]

    yield read
    client.close()


def new_id() -> str:
    return f"r{uuid.uuid4().hex[:10]}"


def find(errors: list[dict[str, Any]], kind: str, text: str) -> dict[str, Any] | None:
    return next((e for e in errors if e["kind"] == kind and text in e["message"]), None)


def test_a_page_reports_its_failures_with_urls_and_mapped_sources(
    context: BrowserContext,
    dev_server: UvicornThread,
    serve_proxy: ServeProxy,
    stored: Callable[[str], list[dict[str, Any]]],
) -> None:
    sandbox_id = new_id()
    proxy = serve_proxy({sandbox_id: dev_server.url})
    origin = f"http://{sandbox_id}.preview.localhost:{proxy.port}"
    tab = context.new_page()
    logged: list[str] = []
    tab.on("console", lambda message: logged.append(message.text))
    tab.goto(f"{origin}/")

    def everything_arrived() -> bool:
        errors = stored(sandbox_id)
        wanted = [
            ("network", "/api/broken"),
            ("module_load", "/src/missing.js"),
            ("module_load", "/src/gone.js"),
            ("uncaught", "render failed"),
            ("console_log", "hello from the app"),
        ]
        return all(find(errors, kind, text) for kind, text in wanted)

    wait_until(everything_arrived, "the page's reports", LIMIT_SECONDS, interval=0.1)
    errors = stored(sandbox_id)
    fetch = find(errors, "network", "/api/broken")
    assert fetch is not None
    assert "POST" in fetch["message"]
    assert "500" in fetch["message"]
    assert fetch["url"] == f"{origin}/"
    uncaught = find(errors, "uncaught", "render failed")
    assert uncaught is not None
    assert uncaught["source"] == {"file": "src/App.jsx", "line": 12, "column": 5}
    assert "/src/app.js" in uncaught["stack"]
    assert "hello from the app" in logged  # the app's console still works as it did
    assert tab.evaluate("typeof window.fetch('/api/broken', {method: 'POST'}).then") == "function"
    tab.close()


def test_a_page_whose_bundle_was_answered_504_reloads_itself_at_most_three_times(
    context: BrowserContext, dev_server: UvicornThread, serve_proxy: ServeProxy
) -> None:
    sandbox_id = new_id()
    proxy = serve_proxy({sandbox_id: dev_server.url})
    origin = f"http://{sandbox_id}.preview.localhost:{proxy.port}"
    once, always = f"{sandbox_id}-1", f"{sandbox_id}-99"
    tab = context.new_page()
    tab.goto(f"{origin}/bundles/{once}")  # 504 once: Vite's reload missed, then fresh bundles

    expect(tab.locator("body")).to_have_text("fresh bundles")
    assert BUNDLE_ASKED[once] == 2
    tab.close()
    tab = context.new_page()  # (the reloads are counted per tab)
    tab.goto(f"{origin}/bundles/{always}")  # a dev server answering 504 for good

    wait_until(lambda: BUNDLE_ASKED.get(always, 0) >= 4, "three reloads", LIMIT_SECONDS)
    tab.wait_for_function(
        "() => performance.getEntriesByType('resource').some((e) => e.responseStatus === 504)"
    )
    tab.goto(f"{origin}/bundles/{once}")  # the fourth page saw its 504 too, and stayed
    assert BUNDLE_ASKED[always] == 4
    tab.close()


def test_a_page_whose_module_request_was_cut_reloads_itself(
    context: BrowserContext, dev_server: UvicornThread, serve_proxy: ServeProxy
) -> None:
    # CI: a request in flight aborted by Chromium (ERR_NETWORK_CHANGED, other tests' networks
    # coming and going) left the preview empty; the dev server never answered it with an error.
    sandbox_id = new_id()
    proxy = serve_proxy({sandbox_id: dev_server.url})
    origin = f"http://{sandbox_id}.preview.localhost:{proxy.port}"
    name = f"{sandbox_id}-0"  # never answered 504
    cut: list[str] = []

    def cut_once(route: BrowserRoute) -> None:
        if cut:
            route.continue_()
        else:
            cut.append(route.request.url)
            route.abort("internetdisconnected")

    tab = context.new_page()
    tab.route(f"{origin}/node_modules/.vite/deps/{name}.js?v=1", cut_once)
    tab.goto(f"{origin}/bundles/{name}")

    expect(tab.locator("body")).to_have_text("fresh bundles")
    assert len(cut) == 1
    tab.close()


def test_a_hostile_page_is_capped_and_stays_in_its_own_sandbox(
    context: BrowserContext,
    dev_server: UvicornThread,
    serve_proxy: ServeProxy,
    stored: Callable[[str], list[dict[str, Any]]],
) -> None:
    sandbox_id, other = new_id(), new_id()
    proxy = serve_proxy({sandbox_id: dev_server.url, other: dev_server.url})
    origin = f"http://{sandbox_id}.preview.localhost:{proxy.port}"
    tab = context.new_page()
    tab.set_extra_http_headers({"x-other": other})
    tab.goto(f"{origin}/hostile", wait_until="commit")
    health: list[int] = []
    with httpx.Client(base_url=proxy.url, trust_env=False, timeout=LIMIT_SECONDS) as service:

        def flood_over() -> bool:
            health.append(service.get("/healthz").status_code)
            return tab.title().startswith("done")

        wait_until(flood_over, "the flood to end", LIMIT_SECONDS, interval=0.05)
    flooded = int(tab.title().split()[1])  # in ~1.5 s
    assert flooded >= 1000
    wait_until(lambda: len(stored(sandbox_id)) > 0, "the flood's reports", LIMIT_SECONDS)
    tab.close()
    assert set(health) == {200}
    errors = stored(sandbox_id)
    assert len(errors) < flooded / 10  # capped: the page's queue and rate, then the proxy's
    assert all(len(e["message"]) <= MAX_MESSAGE for e in errors)
    console = [e for e in errors if e["kind"] == "console_error"]
    assert console
    assert any(e["message"].startswith("<b>flood</b>") for e in console)  # text, as sent
    huge = [e for e in console if e["message"].startswith("<img src=x onerror=alert(1)>")]
    assert all(len(e["message"]) == MAX_MESSAGE for e in huge)
    assert stored(other) == []
    forged = find(errors, "uncaught", "forged")
    if forged is not None:  # stored as its own page's, pointing nowhere else
        assert forged["source"] is None


SYNTAX_ERROR = """export default function App() {
  return <ul><li>unclosed</ul>
}
"""


def test_the_render_checks_binding_gets_the_reports_and_awkward_values_break_nothing(
    context: BrowserContext,
    dev_server: UvicornThread,
    serve_proxy: ServeProxy,
    stored: Callable[[str], list[dict[str, Any]]],
) -> None:
    sandbox_id = new_id()
    proxy = serve_proxy({sandbox_id: dev_server.url})
    tab = context.new_page()
    received: list[dict[str, Any]] = []
    tab.expose_function("__kilnReport", lambda text: received.append(json.loads(text)))
    tab.goto(f"http://{sandbox_id}.preview.localhost:{proxy.port}/awkward")
    wait_until(lambda: tab.title() == "alive undefined", "the app to go on", LIMIT_SECONDS)
    kinds = {"console_error", "console_warn", "unhandled_rejection", "console_log"}

    def all_received() -> bool:
        tab.evaluate("0")  # Playwright's sync API runs the binding's calls only inside a call
        return {r["kind"] for r in received} >= kinds

    wait_until(all_received, "the binding's reports", LIMIT_SECONDS, interval=0.1)
    assert find(received, "unhandled_rejection", "42") is not None
    assert find(received, "console_error", "circular") is not None
    tab.close()
    assert stored(sandbox_id) == []  # the binding, not the POST


BROKEN_RENDER = """export default function App() {
  const items = null
  return <ul>{items.map((item) => <li>{item}</li>)}</ul>
}
"""


@pytest.mark.docker
@pytest.mark.slow
def test_a_real_vite_render_error_is_mapped_to_its_jsx_line(
    context: BrowserContext,
    vite_sandbox: ViteSandbox,
    serve_proxy: ServeProxy,
    stored: Callable[[str], list[dict[str, Any]]],
    tmp_path: Path,
) -> None:
    sandbox_id = new_id()
    write_into(vite_sandbox.container, "src/App.jsx", BROKEN_RENDER)
    proxy = serve_proxy({sandbox_id: vite_sandbox.base_url})
    origin = f"http://{sandbox_id}.preview.localhost:{proxy.port}"
    tab = context.new_page()
    with httpx.Client(trust_env=False, timeout=LIMIT_SECONDS) as client:
        wait_until(lambda: dev_server_up(client, vite_sandbox.base_url), "the dev server", 180)
    tab.goto(f"{origin}/")

    error = first_report(lambda: stored(sandbox_id), "uncaught")
    assert "map" in error["message"]
    assert error["source"] is not None
    assert error["source"]["file"] == "src/App.jsx"
    assert error["source"]["line"] == 3
    tab.close()
    # The script went into the page on its way through the proxy, never into the project: not
    # in its files (which versions and zips are made of), nor in what `npm run build` makes.
    container = vite_sandbox.container
    build = container.exec_run(["npm", "run", "build"], workdir=WORKSPACE, user=str(SANDBOX_UID))
    assert build.exit_code == 0, build.output.decode(errors="replace")[-2000:]
    found = container.exec_run(
        ["grep", "-rl", "--exclude-dir=node_modules", "__kiln", WORKSPACE], user=str(SANDBOX_UID)
    )
    assert found.exit_code == 1, found.output.decode(errors="replace")  # 1: no match, no error
    listing = container.exec_run(["ls", f"{WORKSPACE}/dist"], user=str(SANDBOX_UID))
    assert b"index.html" in listing.output
    # A version of the workspace as a run records one, and its zip as the API serves it.
    files, archive = record_version(container, tmp_path)
    assert "index.html" in files
    assert not [path for path, data in files.items() if b"__kiln" in data]
    with zipfile.ZipFile(io.BytesIO(archive)) as zipped:
        assert not [n for n in zipped.namelist() if b"__kiln" in zipped.read(n)]
    # A compile error: Vite's overlay, reported as a vite_error at the file Vite names.
    write_into(container, "src/App.jsx", SYNTAX_ERROR)
    tab = context.new_page()
    tab.goto(f"{origin}/")

    overlay = first_report(lambda: stored(sandbox_id), "vite_error")
    assert overlay["source"] is not None
    assert overlay["source"]["file"] == "src/App.jsx"
    assert overlay["source"]["line"] == 2
    tab.close()


def first_report(read: Callable[[], list[dict[str, Any]]], kind: str) -> dict[str, Any]:
    """The first stored report of ``kind``, once there is one (Vite's first transform on a
    loaded machine takes a while: a generous deadline guard)."""
    found: list[dict[str, Any]] = []

    def arrived() -> bool:
        found[:] = [e for e in read() if e["kind"] == kind]
        return bool(found)

    wait_until(arrived, f"a {kind} report", 120, interval=0.2)
    return found[0]


def record_version(container: Any, folder: Path) -> tuple[dict[str, bytes], bytes]:
    """Record ``container``'s workspace as version 1 of a chat: its files and its zip."""

    class Containers:
        async def container_for(self, sandbox_id: str) -> Any:
            return container

    projects = GitProjectStore(folder / "projects")

    async def record() -> None:
        sync = ProjectSync(projects, Containers(), "chat")
        assert await sync.record("sandbox", VersionInfo("run", 1)) is not None

    # Playwright's sync API holds this thread's event loop: record in a thread of its own.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(anyio.run, record).result()
    return projects.files("chat", 1), projects.archive("chat", 1)


# An app that imports a package Vite has not bundled yet (``scheduler`` comes with react-dom):
# Vite bundles the dependencies again while the page loads.
FRESH_APP = """import { unstable_now } from "scheduler";

export default function App() {
  return <h1>{typeof unstable_now === "function" ? "Fresh bundles" : "no scheduler"}</h1>;
}
"""


@pytest.mark.docker
@pytest.mark.slow
def test_a_page_that_missed_vites_reload_after_new_bundles_reloads_itself(
    context: BrowserContext, vite_sandbox: ViteSandbox, serve_proxy: ServeProxy
) -> None:
    sandbox_id = new_id()
    proxy = serve_proxy({sandbox_id: vite_sandbox.base_url})
    origin = f"http://{sandbox_id}.preview.localhost:{proxy.port}"
    container = vite_sandbox.container
    with httpx.Client(trust_env=False, timeout=LIMIT_SECONDS) as client:
        wait_until(lambda: dev_server_up(client, vite_sandbox.base_url), "the dev server", 180)
        # The dev server's first bundles, as a run's warm-up makes them (its cold start's too),
        # and the app's entry module as a page loading then got it (its imports name them).
        with ThreadPoolExecutor(1) as pool:
            assert pool.submit(anyio.run, warm_dev_server, vite_sandbox.base_url).result() > 0
        entry = client.get(f"{vite_sandbox.base_url}/src/main.jsx").text
    rebundled = threading.Event()  # Vite told the pages it knows to reload
    with connect_hmr(vite_sandbox.base_url, rebundled):
        # What an install does to a running dev server: a new lock file (the next bundling
        # replaces every bundle: older ones are answered 504), then an app importing a package
        # not bundled yet, which a page's load makes Vite bundle.
        lock = container.exec_run(["cat", f"{WORKSPACE}/package-lock.json"]).output.decode()
        write_into(container, "./package-lock.json", lock + "\n")
        write_into(container, "src/App.jsx", FRESH_APP)
        tab = context.new_page()
        entries = [entry]  # the page got its entry before the new bundles, then its socket
        # opened once Vite had told the pages it knew to reload: it never heard it.

        def early_entry(route: BrowserRoute) -> None:
            if not entries:
                route.continue_()
                return
            assert rebundled.wait(120), "Vite never bundled the dependencies again"
            route.fulfill(body=entries.pop(), content_type="text/javascript")

        def late_socket(socket: WebSocketRoute) -> None:
            assert rebundled.wait(120), "Vite never bundled the dependencies again"
            socket.connect_to_server()

        tab.route(re.compile(r".*/src/main\.jsx.*"), early_entry)
        tab.route_web_socket(re.compile(".*"), late_socket)
        navigations: list[str] = []
        tab.on("framenavigated", lambda frame: navigations.append(frame.url))
        tab.goto(f"{origin}/")

        expect(tab.get_by_role("heading", name="Fresh bundles")).to_be_visible(timeout=60_000)
    assert len(navigations) >= 2, navigations  # it reloaded itself
    tab.close()


def dev_server_up(client: httpx.Client, base_url: str) -> bool:
    """Whether the dev server at ``base_url`` answers ``/``."""
    try:
        return client.get(f"{base_url}/").status_code == 200
    except httpx.TransportError:
        return False


@contextlib.contextmanager
def connect_hmr(base_url: str, full_reload: threading.Event) -> Iterator[None]:
    """A page's HMR socket on the dev server at ``base_url`` (registered when this enters):
    ``full_reload`` is set when Vite tells its pages to reload."""
    with ws_connect(f"ws{base_url[4:]}/", subprotocols=[Subprotocol("vite-hmr")]) as socket:
        assert json.loads(socket.recv(LIMIT_SECONDS))["type"] == "connected"

        def follow() -> None:
            updated = False  # a reload before the app's update is not the new bundles'
            with contextlib.suppress(websockets.ConnectionClosed):
                for message in socket:
                    kind = json.loads(message)["type"]
                    updated = updated or kind == "update"
                    if updated and kind == "full-reload":
                        full_reload.set()

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        yield
    reader.join(LIMIT_SECONDS)
