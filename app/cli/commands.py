"""The ``kiln`` subcommands as data: each one's module and one-line help.

``kiln --help`` lists these without importing any command module, and a command imports only its
own module, so a command that does not use Docker, Starlette or an LLM SDK never pays for loading
them. Each module registers its parser with the help text from here (one place for it).
"""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    """Where a subcommand lives and what ``kiln --help`` says of it."""

    module: str
    help: str


COMMANDS: dict[str, Command] = {
    "parse": Command("app.cli.parse_command", "run the stream parser on a recorded LLM answer"),
    "images": Command("app.cli.images_command", "build or list the sandbox images"),
    "sandbox": Command(
        "app.cli.sandbox_command", "list, remove and reap sandboxes; run commands in them"
    ),
    "run": Command("app.cli.run_command", "generate an app from a prompt"),
    "serve": Command("app.cli.serve_command", "run the API, the web UI and workers"),
    "worker": Command("app.cli.worker_command", "run workers for a kiln serve's queue"),
    "user": Command("app.cli.user_command", "manage users"),
    "login-url": Command(
        "app.cli.login_url_command", "print a fresh sign-in link for kiln serve's web UI"
    ),
    "project": Command("app.cli.project_command", "a chat's project versions and public link"),
    "doctor": Command("app.cli.doctor_command", "check Docker, Redis, images and tokenizer files"),
}
