"""The dependency rules of docs/architecture.md, checked on every module's imports.

- ``parser`` imports nothing of kiln;
- ``sandbox`` never imports ``app`` or ``prompts`` (it may use ``parser``'s rules);
- ``prompts`` imports neither ``app`` nor ``sandbox``'s internals;
- ``app`` and ``prompts`` use ``sandbox`` through its public API only (``from sandbox import``);
- inside ``app`` and ``sandbox`` the folders (and the modules at the package's top) are layers
  (:data:`LAYERS`, bottom first): a unit imports units of lower layers only, never one above
  it nor a peer of its own layer, so the units' imports have no cycle either;
- in ``app`` only the wiring (``app/service/``, and the CLI's one-shot commands) opens the
  service's parts: stores, Redis clients, the sandbox manager;
- no code writes ``os.environ`` to pass a setting on (settings travel as values), and every
  ``KILN_*`` setting is read through ``sandbox.env_settings.EnvReader`` (typed, checked).

Imports inside functions and ``TYPE_CHECKING`` blocks count too: a lazy import is still a
dependency.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("parser", "sandbox", "app", "prompts")
# Which kiln packages each package may import at all.
ALLOWED: dict[str, frozenset[str]] = {
    "parser": frozenset({"parser"}),
    "sandbox": frozenset({"sandbox", "parser"}),
    "prompts": frozenset({"prompts", "parser", "sandbox"}),
    "app": frozenset({"app", "parser", "sandbox", "prompts"}),
}
# Packages whose modules may only be reached through the package itself by outsiders.
PUBLIC_API_ONLY = frozenset({"sandbox"})
# The layers inside a package, bottom first. A unit is a folder of the package or a module at
# its top; the package's own __init__ (its public face) is above them all. A unit may import
# units of lower layers only; the units of one layer are peers and import none of each other.
# A new folder or top-level module goes into the layer docs/architecture.md gives it.
LAYERS: dict[str, tuple[frozenset[str], ...]] = {
    "sandbox": (
        frozenset({"errors"}),
        # boundaries and values every part uses
        frozenset(
            {
                "env_settings",
                "nested_exits",
                "redis_boundary",
                "docker_boundary",
                "disk_mounts",
                "handle",
            }
        ),
        frozenset({"redis_url"}),
        frozenset({"settings"}),
        frozenset({"images"}),
        frozenset({"containers", "writes"}),
        frozenset({"execution", "preview", "cluster"}),
        frozenset({"session_log"}),
        frozenset({"session_edits", "session_commands"}),  # the session's edit path, command line
        frozenset({"backends"}),  # where sandboxes live: the contract and the Docker backend
        frozenset({"lifecycle"}),
        frozenset({"session"}),
        frozenset({"managed_session"}),
    ),
    "app": (
        frozenset({"errors", "error_codes", "event_types"}),
        frozenset(
            {
                "tokens",
                "data_dir",
                "database_url",
                "logs",
                "parser_choice",
                "vocabulary_tables",
                "chat_images",
            }
        ),
        frozenset({"recordings", "deploy"}),
        frozenset({"providers"}),
        frozenset({"config", "store"}),
        frozenset({"postgen", "projects"}),
        frozenset({"agent", "publish"}),
        frozenset({"runs"}),
        frozenset({"api"}),
        frozenset({"service"}),  # the wiring: the one place that puts the parts together
        frozenset({"cli"}),
        frozenset({"__main__"}),
    ),
}
# Imports allowed against the layers, ``(importer, imported)``: why. None is needed today; an
# entry must say why the import cannot be turned around (and is refused once it is gone).
LAYER_EXCEPTIONS: dict[str, dict[tuple[str, str], str]] = {"sandbox": {}, "app": {}}


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """Every module ``path`` imports, with the line: ``import a.b`` and ``from a.b import c``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def modules_of(package: str) -> list[Path]:
    """The Python files of one of kiln's packages."""
    return sorted((ROOT / package).rglob("*.py"))


def violations(package: str) -> list[str]:
    """Every import in ``package`` that breaks a rule, as ``file:line: module``."""
    found = []
    for path in modules_of(package):
        for line, module in imported_modules(path):
            top = module.split(".")[0]
            if top not in PACKAGES or top == package:
                continue
            where = f"{path.relative_to(ROOT)}:{line}: {module}"
            if top not in ALLOWED[package]:
                found.append(f"{where} ({package} may not import {top})")
            elif top in PUBLIC_API_ONLY and module != top:
                found.append(f"{where} (use `from {top} import ...`)")
    return found


# Modules allowed to write os.environ: why.
ENVIRONMENT_WRITERS = {
    "app/tokens.py": "tiktoken reads its cache folder from the environment only; the value is "
    "set under a lock while it loads and put back",
}
# The one module that reads KILN_* variables by name from a mapping.
SETTINGS_READER = "sandbox/env_settings.py"
_ENVIRON_CHANGES = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__"})


def _is_os_environ(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def environment_writes(tree: ast.AST) -> list[int]:
    """The lines of ``tree`` that change ``os.environ`` (item set or deleted, a changing method,
    ``os.putenv``/``os.unsetenv``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
            written = _is_os_environ(node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            function = node.func
            written = (function.attr in _ENVIRON_CHANGES and _is_os_environ(function.value)) or (
                function.attr in {"putenv", "unsetenv"}
                and isinstance(function.value, ast.Name)
                and function.value.id == "os"
            )
        else:
            written = False
        if written:
            found.append(node.lineno)
    return sorted(found)


def _kiln_name(node: ast.expr | None) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("KILN_")
    )


def kiln_setting_reads(tree: ast.AST) -> list[int]:
    """The lines of ``tree`` that read a ``KILN_*`` variable by hand: ``env.get("KILN_X")``,
    ``os.getenv("KILN_X")``, ``env["KILN_X"]`` (writing one into a mapping is fine)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and _kiln_name(node.args[0]):
            function = node.func
            name = function.attr if isinstance(function, ast.Attribute) else None
            if isinstance(function, ast.Name):
                name = function.id
            if name in {"get", "getenv", "pop"}:
                found.append(node.lineno)
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and _kiln_name(node.slice)
        ):
            found.append(node.lineno)
    return sorted(found)


def settings_violations() -> list[str]:
    """Every write of ``os.environ`` and every ``KILN_*`` read by hand in kiln's packages."""
    found = []
    for package in PACKAGES:
        for path in modules_of(package):
            where = str(path.relative_to(ROOT))
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=where)
            if where not in ENVIRONMENT_WRITERS:
                found += [f"{where}:{line}: writes os.environ" for line in environment_writes(tree)]
            if where != SETTINGS_READER:
                reads = kiln_setting_reads(tree)
                found += [f"{where}:{line}: read it through EnvReader" for line in reads]
    return found


# Where app's parts may be opened (the rest is handed them).
WIRING = ("app/service/", "app/cli/")
# Calls that open one of the service's parts: a constructor or a class's opener.
_OPENERS = frozenset({"Store", "GitProjectStore", "open_stack"})
_CLASS_OPENERS = frozenset(
    {("SandboxManager", "open"), ("Redis", "from_url"), ("Redis", "from_pool")}
)


def parts_opened(tree: ast.AST) -> list[int]:
    """The lines of ``tree`` that open a store, a Redis client or the sandbox manager."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Name) and function.id in _OPENERS:
            found.append(node.lineno)
        elif isinstance(function, ast.Attribute):
            owner = function.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
            if (name, function.attr) in _CLASS_OPENERS:
                found.append(node.lineno)
    return sorted(found)


def wiring_violations() -> list[str]:
    """Every place outside :data:`WIRING` in ``app`` that opens one of the service's parts."""
    found = []
    for path in modules_of("app"):
        where = str(path.relative_to(ROOT))
        if not where.startswith(WIRING):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=where)
            found += [
                f"{where}:{line}: wiring belongs in app/service/" for line in parts_opened(tree)
            ]
    return found


def unit_of(package: str, module: str) -> str | None:
    """The unit of ``package`` that ``module`` lies in (``app.agent.loop`` -> ``agent``);
    ``None`` for the package itself or another package."""
    parts = module.split(".")
    return parts[1] if parts[0] == package and len(parts) > 1 else None


def unit_imports(package: str) -> dict[str, dict[str, list[str]]]:
    """Which units each unit of ``package`` imports, with where: ``{importer: {imported:
    ["file:line", ...]}}`` (imports inside a unit left out)."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in modules_of(package):
        relative = path.relative_to(ROOT / package)
        if relative.parts == ("__init__.py",):
            continue
        importer = relative.parts[0].removesuffix(".py")
        edges = graph.setdefault(importer, {})
        for line, module in imported_modules(path):
            imported = unit_of(package, module)
            if imported is not None and imported != importer:
                where = f"{path.relative_to(ROOT)}:{line}"
                edges.setdefault(imported, []).append(where)
    return graph


def layer_violations(
    graph: Mapping[str, Mapping[str, list[str]]],
    layers: tuple[frozenset[str], ...],
    exceptions: Mapping[tuple[str, str], str],
) -> list[str]:
    """Every import of ``graph`` that goes up or sideways in ``layers`` and is not one of the
    ``exceptions``, as ``file:line: importer -> imported (why)``."""
    level = {unit: number for number, layer in enumerate(layers) for unit in layer}
    found = []
    for importer, edges in sorted(graph.items()):
        for imported, wheres in sorted(edges.items()):
            if (importer, imported) in exceptions:
                continue
            if importer not in level or imported not in level:
                unknown = importer if importer not in level else imported
                found.append(f"{wheres[0]}: {unknown!r} is in no layer")
            elif level[imported] == level[importer]:
                found.append(f"{wheres[0]}: {importer} -> {imported} (peers of one layer)")
            elif level[imported] > level[importer]:
                found.append(f"{wheres[0]}: {importer} -> {imported} (upward import)")
    return found


def import_cycles(graph: Mapping[str, Mapping[str, list[str]]]) -> list[list[str]]:
    """The cycles of ``graph``: each strongly connected group of two or more units (or a unit
    importing itself), sorted (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        for imported in graph.get(unit, {}):
            if imported not in index:
                visit(imported)
                low[unit] = min(low[unit], low[imported])
            elif imported in stack:
                low[unit] = min(low[unit], index[imported])
        if low[unit] == index[unit]:
            group = []
            while not group or group[-1] != unit:
                group.append(stack.pop())
            if len(group) > 1 or unit in graph.get(unit, {}):
                cycles.append(sorted(group))

    for unit in sorted(graph):
        if unit not in index:
            visit(unit)
    return sorted(cycles)


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_follow_the_dependency_rules(package: str) -> None:
    assert violations(package) == []


def test_the_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text("from app.errors import KilnError\nimport sandbox.session\n")
    assert [name for _, name in imported_modules(module)] == ["app.errors", "sandbox.session"]


def test_every_package_has_modules() -> None:
    for package in PACKAGES:
        assert modules_of(package), package


def relative_imports(package: str) -> list[str]:
    """Every ``from . import x`` in ``package``: the checks here read absolute imports only."""
    found = []
    for path in modules_of(package):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_are_absolute(package: str) -> None:
    assert relative_imports(package) == []


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_units_import_only_lower_layers(package: str) -> None:
    graph = unit_imports(package)
    assert import_cycles(graph) == []
    assert layer_violations(graph, LAYERS[package], LAYER_EXCEPTIONS[package]) == []


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_every_unit_has_one_layer(package: str) -> None:
    placed = [unit for layer in LAYERS[package] for unit in layer]
    assert len(placed) == len(set(placed))
    assert set(unit_imports(package)) <= set(placed)


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_every_layer_exception_is_still_needed(package: str) -> None:
    graph = unit_imports(package)
    for importer, imported in LAYER_EXCEPTIONS[package]:
        assert imported in graph.get(importer, {}), (importer, imported)


LAYERED = (frozenset({"low"}), frozenset({"mid", "peer"}), frozenset({"top"}))


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        pytest.param({"top": {"mid": ["t.py:1"]}, "mid": {"low": ["m.py:2"]}}, [], id="downward"),
        pytest.param(
            {"low": {"top": ["l.py:3"]}}, ["l.py:3: low -> top (upward import)"], id="upward"
        ),
        pytest.param(
            {"mid": {"peer": ["m.py:4"]}}, ["m.py:4: mid -> peer (peers of one layer)"], id="peer"
        ),
        pytest.param({"new": {"low": ["n.py:5"]}}, ["n.py:5: 'new' is in no layer"], id="unplaced"),
    ],
)
def test_the_layer_check_sees_an_upward_import(
    graph: dict[str, dict[str, list[str]]], expected: list[str]
) -> None:
    assert layer_violations(graph, LAYERED, {}) == expected


def test_a_listed_exception_lets_one_upward_import_pass() -> None:
    graph = {"low": {"top": ["l.py:3"]}, "mid": {"top": ["m.py:4"]}}
    exceptions = {("low", "top"): "why"}
    assert layer_violations(graph, LAYERED, exceptions) == ["m.py:4: mid -> top (upward import)"]


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        pytest.param({"a": {"b": []}, "b": {"c": []}}, [], id="chain"),
        pytest.param({"a": {"b": []}, "b": {"a": []}}, [["a", "b"]], id="two"),
        pytest.param(
            {"a": {"b": []}, "b": {"c": []}, "c": {"a": []}, "d": {"a": []}},
            [["a", "b", "c"]],
            id="three-and-a-tail",
        ),
        pytest.param({"a": {"a": []}}, [["a"]], id="self"),
        pytest.param(
            {"a": {"b": []}, "b": {"a": []}, "c": {"d": []}, "d": {"c": []}},
            [["a", "b"], ["c", "d"]],
            id="two-cycles",
        ),
    ],
)
def test_the_cycle_check_sees_a_folder_cycle(
    graph: dict[str, dict[str, list[str]]], expected: list[list[str]]
) -> None:
    assert import_cycles(graph) == expected


def test_units_are_folders_and_top_level_modules() -> None:
    assert unit_of("app", "app.agent.loop") == "agent"
    assert unit_of("app", "app.errors") == "errors"
    assert unit_of("app", "app") is None
    assert unit_of("app", "sandbox.session") is None


def test_settings_travel_as_values_and_are_read_through_the_reader() -> None:
    assert settings_violations() == []


def test_every_environment_writer_still_writes() -> None:
    for where in ENVIRONMENT_WRITERS:
        assert environment_writes(ast.parse((ROOT / where).read_text(encoding="utf-8"))), where


@pytest.mark.parametrize(
    ("source", "writes"),
    [
        pytest.param('os.environ["KILN_DATA_DIR"] = "d"', [1], id="item-set"),
        pytest.param('del os.environ["X"]', [1], id="item-deleted"),
        pytest.param('os.environ.update(X="1")', [1], id="update"),
        pytest.param('os.environ.setdefault("X", "1")', [1], id="setdefault"),
        pytest.param('os.putenv("X", "1")', [1], id="putenv"),
        pytest.param('env = dict(os.environ)\nenv["KILN_DATA_DIR"] = "d"', [], id="a-copy"),
        pytest.param('os.environ.get("X")', [], id="a-read"),
    ],
)
def test_the_check_sees_an_environment_write(source: str, writes: list[int]) -> None:
    assert environment_writes(ast.parse(source)) == writes


@pytest.mark.parametrize(
    ("source", "reads"),
    [
        pytest.param('os.environ.get("KILN_PORT")', [1], id="get"),
        pytest.param('env.get("KILN_PORT") or "8000"', [1], id="get-or"),
        pytest.param('os.getenv("KILN_PORT")', [1], id="getenv"),
        pytest.param('env["KILN_PORT"]', [1], id="item"),
        pytest.param('read.integer("KILN_PORT", 8000)', [], id="the-reader"),
        pytest.param('env["KILN_PORT"] = "1"', [], id="setting-one"),
        pytest.param('env.get("REDIS_URL")', [], id="not-kiln"),
    ],
)
def test_the_check_sees_a_kiln_setting_read_by_hand(source: str, reads: list[int]) -> None:
    assert kiln_setting_reads(ast.parse(source)) == reads


def test_only_the_wiring_opens_the_services_parts() -> None:
    assert wiring_violations() == []


@pytest.mark.parametrize(
    ("source", "opened"),
    [
        pytest.param("store = Store(path, secret)", [1], id="store"),
        pytest.param("manager = await SandboxManager.open(settings)", [1], id="manager"),
        pytest.param("client = redis.asyncio.Redis.from_url(url)", [1], id="redis"),
        pytest.param("client = Redis.from_pool(pool)", [1], id="redis-pool"),
        pytest.param("async with open_stack(settings) as stack: pass", [1], id="stack"),
        pytest.param("store.chat(chat_id)", [], id="using-one"),
    ],
)
def test_the_check_sees_a_part_opened(source: str, opened: list[int]) -> None:
    assert parts_opened(ast.parse(source)) == opened
