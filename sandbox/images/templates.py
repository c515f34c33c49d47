"""The sandbox templates: one image per framework, each ready to run its dev server."""

from __future__ import annotations

import json
from dataclasses import dataclass

WORKSPACE = "/workspace"
SANDBOX_UID = 1000
# The app's environment: a tmpfs outside the workspace (sandbox.execution.app_env).
APP_ENV_DIR = "/run/kiln"


# How every template builds (its package.json's "build" script): post-generation runs it, and a
# run's session starts it ahead as soon as an answer's files are complete (sandbox.session).
BUILD_COMMAND = ("npm", "run", "build")


@dataclass(frozen=True, slots=True)
class Template:
    """A framework's image and what the rest of kiln needs to know about it."""

    name: str
    dev_port: int
    entrypoints: tuple[str, ...]
    # Files the template owns; writes to them are merged (package.json) or refused with a warning.
    config_files: tuple[str, ...]
    dev_command: tuple[str, ...]
    # Its package.json's "build" script, and the same program run without npm in front (the
    # build ahead runs that: npm's own start-up is ~0.2 s of a 1.5 s build, issue 13).
    build_script: str = ""
    direct_build: tuple[str, ...] = ()
    # The image's client of its resident builder (a long-lived process that builds like
    # `direct_build`, warm after its first build: images/vite-react/kiln-build-service.mjs);
    # empty when the image has none. kiln's own program, outside the workspace.
    builder: tuple[str, ...] = ()
    # The bundler's prefix for variables it inlines into browser code, and how browser code reads
    # one (``{name}`` filled in); empty when nothing reaches the browser (vanilla: no bundler).
    # Every such prefix is one of app.store.app_env.PUBLIC_PREFIXES (a public name's rule).
    public_env_prefix: str = ""
    browser_env_read: str = ""
    # Memory (MiB, host-wide: container and its containerd-shim) of one sandbox of the template
    # idle (dev server up) and busy (installing and building, the resident builder included):
    # what admission reserves for a new chat (sandbox.backends.host_memory).
    idle_mib: int = 100
    busy_mib: int = 250

    def builder_argv(self, *, warm: bool) -> list[str]:
        """The argv asking the resident builder to build, or to warm up (returns at once)."""
        if not self.builder:
            raise ValueError(f"template {self.name!r} has no resident builder")
        return [*self.builder, "--warm"] if warm else list(self.builder)

    @property
    def image(self) -> str:
        """The local image tag of this template."""
        return f"kiln/sandbox-{self.name}:latest"


TEMPLATES: dict[str, Template] = {
    "vite-react": Template(
        name="vite-react",
        dev_port=5173,
        entrypoints=("index.html", "src/main.jsx", "src/App.jsx"),
        config_files=("package.json", "vite.config.js", "package-lock.json"),
        # `npm run dev` under kiln's supervisor (images/vite-react/kiln-dev.mjs): it starts the
        # dev server over after an install and after it exits.
        dev_command=("node", "/usr/local/lib/kiln/kiln-dev.mjs"),
        build_script="vite build",
        direct_build=("node", "node_modules/vite/bin/vite.js", "build"),
        builder=("node", "/usr/local/lib/kiln/kiln-build.mjs"),
        public_env_prefix="VITE_",
        browser_env_read="import.meta.env.{name}",
        # Measured (issue 24): 96-104 MiB idle, +115-140 MiB with the resident builder in use.
        idle_mib=104,
        busy_mib=244,
    ),
    "vanilla": Template(
        name="vanilla",
        dev_port=8080,
        entrypoints=("index.html",),
        config_files=("package.json", "package-lock.json", "server.js"),
        # `npm run dev` under kiln's small supervisor (images/shared/kiln-serve.mjs): it starts
        # the dev server over when the app's environment changes and after it exits.
        dev_command=("node", "/usr/local/lib/kiln/kiln-serve.mjs"),
        build_script="node server.js --check",
        direct_build=("node", "server.js", "--check"),
        # Idle measured by bench/capacity.py (200 sandboxes, ~23 MiB) before the supervisor,
        # which adds ~7 MiB (docker stats of one idle container, 2 runs: 17-20.5 -> 24-27.8
        # MiB); busy an estimate (npm and a `node server.js --check`, no bundler).
        idle_mib=30,
        busy_mib=120,
    ),
    "nextjs": Template(
        name="nextjs",
        dev_port=3000,
        entrypoints=("app/layout.jsx", "app/page.jsx"),
        config_files=("package.json", "next.config.mjs", "package-lock.json"),
        # `npm run dev` under kiln's small supervisor (images/shared/kiln-serve.mjs): it starts
        # the dev server over when the app's environment changes and after it exits.
        dev_command=("node", "/usr/local/lib/kiln/kiln-serve.mjs"),
        build_script="next build",
        direct_build=("node", "node_modules/next/dist/bin/next", "build"),
        # Next inlines `process.env.NEXT_PUBLIC_X` (that exact expression) into client code.
        public_env_prefix="NEXT_PUBLIC_",
        browser_env_read="process.env.{name}",
        # Estimates, not measured yet: `next dev` compiles on demand, `next build` is heavy.
        idle_mib=300,
        busy_mib=800,
    ),
}
DEFAULT_TEMPLATE = "vite-react"


def get_template(name: str) -> Template:
    """The template called ``name``; raises ``KeyError`` naming the known ones."""
    try:
        return TEMPLATES[name]
    except KeyError:
        raise KeyError(f"unknown template {name!r}; known: {', '.join(TEMPLATES)}") from None


def direct_build(
    template: Template, package_json: str | None
) -> tuple[list[str], list[str]] | None:
    """``(argv, npm's header lines)`` that build like :data:`BUILD_COMMAND` without npm, when
    ``package_json``'s build script is still the template's and nothing runs before or after
    it (``prebuild``, ``postbuild``); ``None`` when only npm itself runs it the same way."""
    try:
        manifest = json.loads(package_json or "")
    except ValueError:
        return None
    scripts = manifest.get("scripts") if isinstance(manifest, dict) else None
    if not template.direct_build or not isinstance(scripts, dict):
        return None
    if scripts.get("build") != template.build_script or {"prebuild", "postbuild"} & set(scripts):
        return None
    name, version = manifest.get("name", ""), manifest.get("version", "")
    header = [f"> {name}@{version} build" if version else f"> {name} build"]
    return list(template.direct_build), ["", *header, f"> {template.build_script}", ""]
