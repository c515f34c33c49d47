"""The command policy: what a sandbox runs, what it refuses, and why (pure, no Docker)."""

from __future__ import annotations

import posixpath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.errors import CommandRefused
from sandbox.execution.command_policy import (
    DENIED,
    MAX_ARG_LENGTH,
    MAX_ARGS,
    POLICY,
    CommandKind,
    check,
    resolve_in_workspace,
)

ALLOWED = [
    pytest.param(["npm", "run", "build"], CommandKind.RUN, (), id="npm-run-build"),
    pytest.param(["npm", "run", "--silent", "lint"], CommandKind.RUN, (), id="npm-run-flag-first"),
    pytest.param(["npm", "run", "dev", "--", "--port", "3000"], CommandKind.RUN, (), id="run-args"),
    pytest.param(["npm", "run", "build", "--", "--outDir=dist"], CommandKind.RUN, (), id="run-opt"),
    pytest.param(["npm", "run", "test:unit"], CommandKind.RUN, (), id="npm-run-colon-script"),
    pytest.param(["npm", "test"], CommandKind.RUN, (), id="npm-test"),
    pytest.param(["npm", "test", "--", "--watch=false"], CommandKind.RUN, (), id="npm-test-args"),
    pytest.param(["npm", "install"], CommandKind.INSTALL, (), id="npm-install-bare"),
    pytest.param(
        ["npm", "install", "zod@^3", "-D"], CommandKind.INSTALL, ("zod@^3",), id="install-dev"
    ),
    pytest.param(
        ["npm", "i", "@scope/pkg@1.2.3"], CommandKind.INSTALL, ("@scope/pkg@1.2.3",), id="npm-i"
    ),
    pytest.param(
        ["npm", "install", "--save-dev", "--", "vite"],
        CommandKind.INSTALL,
        ("vite",),
        id="install-double-dash",
    ),
    pytest.param(
        ["npm", "install", "-SE", "react-router-dom@latest"],
        CommandKind.INSTALL,
        ("react-router-dom@latest",),
        id="install-short-cluster",
    ),
    pytest.param(["npm", "ci", "--no-audit"], CommandKind.INSTALL, (), id="npm-ci"),
    pytest.param(["node", "server.js", "--check"], CommandKind.RUN, (), id="node-script-flag"),
    pytest.param(["node", "scripts/gen.mjs", "./out"], CommandKind.RUN, (), id="node-path-arg"),
    pytest.param(["ls"], CommandKind.RUN, (), id="ls"),
    pytest.param(["ls", "-la", "src"], CommandKind.RUN, (), id="ls-la"),
    pytest.param(["ls", "/workspace"], CommandKind.RUN, (), id="ls-workspace-absolute"),
    pytest.param(["ls", "."], CommandKind.RUN, (), id="ls-dot"),
    pytest.param(["cat", "package.json"], CommandKind.RUN, (), id="cat"),
    pytest.param(["cat", "/workspace/src/App.jsx"], CommandKind.RUN, (), id="cat-absolute-inside"),
    pytest.param(["mkdir", "-p", "src/components"], CommandKind.RUN, (), id="mkdir-p"),
    pytest.param(["rm", "-rf", "dist"], CommandKind.RUN, (), id="rm-rf-dist"),
    pytest.param(["rm", "--", "-weird-name"], CommandKind.RUN, (), id="rm-dash-file"),
    pytest.param(["rm", "src/../old.js"], CommandKind.RUN, (), id="rm-normalized-inside"),
    pytest.param(["mv", "a.js", "src/a.js"], CommandKind.RUN, (), id="mv"),
    pytest.param(["cp", "-r", "src", "backup"], CommandKind.RUN, (), id="cp-r"),
]


@pytest.mark.parametrize(("argv", "kind", "packages"), ALLOWED)
def test_allowed_commands_pass_unchanged(
    argv: list[str], kind: CommandKind, packages: tuple[str, ...]
) -> None:
    checked = check(argv)
    assert checked.argv == tuple(argv)
    assert checked.kind is kind
    assert checked.packages == packages


REFUSED = [
    pytest.param([], "empty command", id="empty"),
    pytest.param(["sh", "-c", "npm run build"], "shell", id="sh-c"),
    pytest.param(["bash", "-lc", "ls"], "shell", id="bash"),
    pytest.param(["/bin/sh", "-c", "ls"], "shell", id="sh-by-path"),
    pytest.param(["dash"], "shell", id="dash"),
    pytest.param(["zsh", "-c", "x"], "shell", id="zsh"),
    pytest.param(["busybox", "sh"], "shell", id="busybox"),
    pytest.param(["npx", "vite"], "npx", id="npx"),
    pytest.param(["npm", "exec", "--", "evil-package"], "npm exec", id="npm-exec"),
    pytest.param(["npm", "x", "evil-package"], "npm exec", id="npm-x"),
    pytest.param(["npm", "explore", "react"], "shell", id="npm-explore"),
    pytest.param(["npm"], "needs a subcommand", id="npm-bare"),
    pytest.param(["npm", "publish"], "'npm publish' is not allowed", id="npm-publish"),
    pytest.param(["npm", "--prefix", "/", "install"], "'npm --prefix'", id="npm-global-option"),
    pytest.param(["npm", "install", "-g", "x"], "'-g'", id="install-global"),
    pytest.param(["npm", "install", "--registry=https://evil"], "--registry", id="install-reg"),
    pytest.param(
        ["npm", "install", "https://evil.example/x.tgz"], "not an npm package spec", id="tgz-url"
    ),
    pytest.param(["npm", "install", "git+ssh://git@x/y.git"], "package spec", id="git-spec"),
    pytest.param(["npm", "install", "../evil"], "package spec", id="install-path"),
    pytest.param(["npm", "install", "zod; rm -rf /"], "package spec", id="install-shell-syntax"),
    pytest.param(["npm", "ci", "zod"], "takes no arguments", id="ci-args"),
    pytest.param(["npm", "run"], "at least 1", id="run-no-script"),
    pytest.param(["npm", "run", "build;rm"], "script name", id="run-bad-script"),
    pytest.param(["npm", "run", "build", "--", "--outDir", "/etc"], "outside", id="run-arg-out"),
    pytest.param(["npm", "run", "build", "--", "--outDir=/etc"], "outside", id="run-opt-out"),
    pytest.param(["npm", "test", "--", "../../x"], "outside", id="test-arg-escape"),
    pytest.param(["node", "-e", "require('child_process')"], "'-e'", id="node-eval"),
    pytest.param(["node", "--require", "x", "a.js"], "'--require'", id="node-require"),
    pytest.param(["node", "/etc/passwd"], "outside", id="node-outside"),
    pytest.param(["node"], "at least 1", id="node-bare"),
    pytest.param(["node", "."], "workspace itself", id="node-root"),
    pytest.param(["node", "a.js", "/etc/shadow"], "outside", id="node-arg-outside"),
    pytest.param(["ls", "/"], "outside", id="ls-root-fs"),
    pytest.param(["ls", "../"], "outside", id="ls-parent"),
    pytest.param(["ls", "--color=always"], "--color", id="ls-unknown-option"),
    pytest.param(["cat", "/etc/passwd"], "'/etc/passwd' is outside", id="cat-passwd"),
    pytest.param(["cat", "~/.ssh/id_rsa"], "home-relative", id="cat-home"),
    pytest.param(["cat", ""], "empty path", id="cat-empty"),
    pytest.param(["rm", "-rf", "/workspace"], "workspace itself", id="rm-workspace"),
    pytest.param(["rm", "-rf", "."], "workspace itself", id="rm-dot"),
    pytest.param(["rm", "-rf", "./"], "workspace itself", id="rm-dot-slash"),
    pytest.param(["rm", "-rf", "/workspace/"], "workspace itself", id="rm-workspace-slash"),
    pytest.param(["rm", "-rf", "src/.."], "workspace itself", id="rm-dotdot-to-root"),
    pytest.param(["rm", "-rf", "/"], "outside", id="rm-root-fs"),
    pytest.param(["rm", "-rf", "/workspace/../etc"], "outside", id="rm-absolute-escape"),
    pytest.param(["rm", "-rf", "//etc"], "outside", id="rm-double-slash"),
    pytest.param(["rm", "--no-preserve-root", "-rf", "x"], "--no-preserve-root", id="rm-option"),
    pytest.param(["rm"], "at least 1", id="rm-bare"),
    pytest.param(["mv", ".", "x"], "workspace itself", id="mv-root"),
    pytest.param(["mv", "a"], "at least 2", id="mv-one-arg"),
    pytest.param(["cp", "src", "/tmp/x"], "outside", id="cp-out"),
    pytest.param(["cp", "x.txt", ".npmrc"], "package manager", id="cp-to-npmrc"),
    pytest.param(["mv", "a", "sub/.yarnrc.yml"], "package manager", id="mv-to-yarnrc"),
    pytest.param(["mkdir", "--mode=777", "x"], "--mode", id="mkdir-mode"),
    pytest.param(["curl", "http://example.com"], "not allowed", id="curl"),
    pytest.param(["python3", "-c", "print(1)"], "not allowed", id="python"),
    pytest.param(["./node_modules/.bin/vite"], "bare name", id="program-by-path"),
    pytest.param(["/usr/bin/node", "a.js"], "bare name", id="node-by-path"),
    pytest.param(["env", "sh"], "env runs any program", id="env"),
    pytest.param(["xargs", "rm"], "xargs", id="xargs"),
    pytest.param(["sudo", "ls"], "privileges", id="sudo"),
    pytest.param(["ls", "a\x00b"], "control characters", id="nul"),
    pytest.param(["ls", "a\nb"], "control characters", id="newline"),
    pytest.param(["ls", *["x"] * MAX_ARGS], "arguments; at most", id="too-many-args"),
    pytest.param(["cat", "x" * (MAX_ARG_LENGTH + 1)], "longer than", id="arg-too-long"),
]


@pytest.mark.parametrize(("argv", "reason"), REFUSED)
def test_refused_commands_say_why(argv: list[str], reason: str) -> None:
    with pytest.raises(CommandRefused) as info:
        check(argv)
    assert reason in str(info.value)


def test_every_denied_program_is_refused_by_name_and_by_path() -> None:
    for program in DENIED:
        for spelled in (program, f"/usr/bin/{program}"):
            with pytest.raises(CommandRefused, match="is refused"):
                check([spelled, "x"])


def test_denied_programs_are_not_in_the_allow_list() -> None:
    assert not set(DENIED) & set(POLICY)


@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        pytest.param("src/App.jsx", "/workspace/src/App.jsx", id="relative"),
        pytest.param("./a/../b", "/workspace/b", id="dots"),
        pytest.param("/workspace/x", "/workspace/x", id="absolute-inside"),
        pytest.param(".", "/workspace", id="root"),
    ],
)
def test_resolve_in_workspace(arg: str, expected: str) -> None:
    assert resolve_in_workspace(arg) == expected


def test_resolve_refuses_a_sibling_with_the_workspace_as_prefix() -> None:
    with pytest.raises(CommandRefused, match="outside"):
        resolve_in_workspace("/workspace-other/x")


@given(st.text(alphabet="./ab~-", max_size=20))
def test_a_resolved_path_never_leaves_the_workspace(arg: str) -> None:
    try:
        resolved = resolve_in_workspace(arg)
    except CommandRefused:
        return
    assert resolved == "/workspace" or resolved.startswith("/workspace/")
    assert posixpath.normpath(resolved) == resolved


@given(st.lists(st.text(alphabet="./a-~/rf", min_size=1, max_size=8), min_size=1, max_size=4))
def test_an_allowed_rm_never_targets_the_workspace_or_outside(args: list[str]) -> None:
    try:
        check(["rm", *args])
    except CommandRefused:
        return
    for operand in _operands(args):
        resolved = posixpath.normpath(posixpath.join("/workspace", operand))
        assert resolved.startswith("/workspace/")


def _operands(args: list[str]) -> list[str]:
    """The arguments rm itself reads as file names (GNU option parsing, ``--`` ends options)."""
    operands: list[str] = []
    options_done = False
    for arg in args:
        if arg == "--" and not options_done:
            options_done = True
        elif arg.startswith("-") and arg != "-" and not options_done:
            continue
        else:
            operands.append(arg)
    return operands
