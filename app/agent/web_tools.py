"""The model's web tools: ``web_search`` and ``url_scrape``, through a Tavily-compatible API.

Any service that answers Tavily's ``POST /search`` (``{query, max_results}`` ->
``{results: [{title, url, content}], answer?}``) and ``POST /extract`` (``{urls}`` ->
``{results: [{url, raw_content}]}``) works; set ``KILN_SEARCH_URL`` and ``KILN_SEARCH_API_KEY``
(``TAVILY_API_KEY`` is read too). Without configuration the tools answer, plainly, that search is
unavailable: the model gets a result it can act on, never a hang or an exception.

A tool never raises into the agent loop: failures become a :class:`ToolResult` with
``ok=False`` and a message the model (and the user) can read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from app.errors import ConfigError
from sandbox import EnvReader

DEFAULT_SEARCH_URL = "https://api.tavily.com"
MAX_RESULT_CHARS = 4000  # of one page or one result's content, so a result fits a prompt
REQUEST_TIMEOUT_SECONDS = 20.0


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call produced, as text for the next prompt."""

    tool: str
    request: str
    ok: bool
    text: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (events, checkpoints)."""
        return {"tool": self.tool, "request": self.request, "ok": self.ok, "text": self.text}


class WebTools(Protocol):
    """The interface the agent loop calls."""

    async def search(self, query: str, max_results: int) -> ToolResult:
        """Search the web."""
        ...

    async def scrape(self, url: str) -> ToolResult:
        """Read one page."""
        ...


class UnavailableWebTools:
    """Used when no search service is configured: every call says so."""

    async def search(self, query: str, max_results: int) -> ToolResult:
        """Answer that search is unavailable."""
        return ToolResult("web_search", query, False, _UNAVAILABLE)

    async def scrape(self, url: str) -> ToolResult:
        """Answer that reading pages is unavailable."""
        return ToolResult("url_scrape", url, False, _UNAVAILABLE)


_UNAVAILABLE = (
    "Web search is unavailable in this environment (no search service is configured). "
    "Continue with what you already know."
)


class TavilyWebTools:
    """Search and extract through a Tavily-compatible HTTP API."""

    def __init__(self, api_key: str, base_url: str = DEFAULT_SEARCH_URL) -> None:
        self._api_key = api_key
        self._base_url = base_url.rstrip("/")

    async def search(self, query: str, max_results: int) -> ToolResult:
        """Search; results are numbered ``title — url`` lines with their content."""
        body = {"query": query, "max_results": max_results, "include_answer": True}
        data = await self._post("/search", body)
        if isinstance(data, str):
            return ToolResult("web_search", query, False, data)
        lines = [f"Answer: {data['answer']}"] if data.get("answer") else []
        for number, item in enumerate(data.get("results") or [], start=1):
            content = str(item.get("content", ""))[:MAX_RESULT_CHARS]
            lines.append(f"{number}. {item.get('title', '')} — {item.get('url', '')}\n{content}")
        text = "\n\n".join(lines) if lines else f"No results for {query!r}."
        return ToolResult("web_search", query, True, text)

    async def scrape(self, url: str) -> ToolResult:
        """Read one page's text."""
        data = await self._post("/extract", {"urls": [url]})
        if isinstance(data, str):
            return ToolResult("url_scrape", url, False, data)
        results = data.get("results") or []
        if not results:
            return ToolResult("url_scrape", url, False, f"Could not read {url!r}.")
        return ToolResult(
            "url_scrape", url, True, str(results[0].get("raw_content", ""))[:MAX_RESULT_CHARS]
        )

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any] | str:
        """POST and return the JSON body, or a readable failure message."""
        headers = {"Authorization": f"Bearer {self._api_key}"}
        try:
            async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT_SECONDS) as client:
                response = await client.post(self._base_url + path, json=body, headers=headers)
        except httpx.HTTPError as exc:
            return f"The search service could not be reached: {exc.__class__.__name__}."
        if response.status_code in (401, 403):
            return "The search service refused the API key."
        if response.status_code == 429:
            return "The search service is rate limiting; try again later."
        if response.status_code >= 400:
            return f"The search service failed with HTTP {response.status_code}."
        try:
            data = response.json()
        except ValueError:
            return "The search service answered with something that is not JSON."
        return data if isinstance(data, dict) else "The search service answered unexpectedly."


def web_tools_from_env(env: dict[str, str] | None = None) -> WebTools:
    """Tavily-compatible tools when a key is configured, else :class:`UnavailableWebTools`."""
    read = EnvReader(env, ConfigError)
    key = read.raw("KILN_SEARCH_API_KEY") or read.raw("TAVILY_API_KEY")
    if not key:
        return UnavailableWebTools()
    return TavilyWebTools(key, read.text("KILN_SEARCH_URL", DEFAULT_SEARCH_URL))
