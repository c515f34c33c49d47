"""Every stable error code a user can meet, declared once with its words.

A code comes from an exception's class attribute ``code`` (app/errors.py draws the trees) or from
an ``error``/``warning`` event's record (the parser's, the session's, the loop's). Each code has a
``title``: the words the web UI shows above the message (app/web/vocabulary.js is generated from
here). A few codes also have a fixed ``sentence``: a run that fails with one shows it instead of
the exception's own message, which names docker calls and addresses (for the log, not the chat;
see app/runs/failures.py). tests/app/test_error_codes.py fails when a code raised or emitted in
the code is not declared here, and when a declared code has no words.
"""

from __future__ import annotations

from dataclasses import dataclass

INTERNAL = "internal_error"
_REDIS_DOWN = (
    "kiln lost its connection to Redis, which it needs to run your app. Please try again shortly."
)


@dataclass(frozen=True, slots=True)
class ErrorCode:
    """One stable ``code``, its ``title`` for the UI, and (for outages) a fixed ``sentence``."""

    code: str
    title: str
    sentence: str = ""

    def __post_init__(self) -> None:
        # A code without words fails at import: the UI would show a bare code otherwise.
        if not self.title.strip():
            raise ValueError(f"error code {self.code!r} has no words for the user")


ERROR_CODES: tuple[ErrorCode, ...] = (
    ErrorCode("provider_auth", "The AI provider refused the API key"),
    ErrorCode("provider_rate_limited", "The AI provider is rate-limiting requests"),
    ErrorCode("provider_overloaded", "The AI provider is overloaded right now"),
    ErrorCode("provider_unavailable", "The AI provider could not be reached"),
    ErrorCode("provider_error", "The AI provider reported an error"),
    ErrorCode("model_refused", "That model cannot be used"),
    ErrorCode("context_limit_exceeded", "The conversation is too long for the model"),
    ErrorCode("prompt_budget_exceeded", "The conversation is too long for the model"),
    ErrorCode("budget_exceeded", "The run used up its budget"),
    ErrorCode("admission_refused", "Too many builds are running"),
    ErrorCode("config_error", "kiln is not configured for this"),
    ErrorCode("image_refused", "That image cannot be sent"),
    ErrorCode("image_invalid", "That image could not be read"),
    ErrorCode("image_too_large", "That image is too large (at most 5 MB)"),
    ErrorCode("image_type_unsupported", "Only PNG, JPEG, WebP and GIF images can be sent"),
    ErrorCode("image_type_mismatch", "That image is not the type it claims to be"),
    ErrorCode("too_many_images", "At most 4 images can go with one message"),
    ErrorCode("images_unsupported", "This model cannot read images"),
    ErrorCode("images_ignored", "The recorded demo does not look at images"),
    ErrorCode("command_refused", "A command was refused for safety"),
    ErrorCode("command_failed", "A command failed"),
    ErrorCode("install_failed", "Installing packages failed"),
    ErrorCode("install_refused", "A package was refused"),
    ErrorCode("write_failed", "A file could not be written"),
    ErrorCode("sandbox_unavailable", "The app's sandbox is not available",
              "The app's sandbox could not be started or reached. Please try again shortly."),
    ErrorCode("sandbox_error", "The app's sandbox had a problem",
              "The app's sandbox failed. Please try again; the server log has details."),
    ErrorCode("exec_stream_broken", "The app's sandbox had a problem"),
    ErrorCode("exec_read_timeout", "A command stopped answering"),
    ErrorCode("dev_server_not_ready", "The preview server did not start"),
    ErrorCode("config_refused", "A protected config file was not changed"),
    ErrorCode("config_merged", "A config file was merged"),
    ErrorCode("parse_error", "The model's answer could not be read"),
    ErrorCode("invalid_file_path", "The model named an unsafe file path"),
    ErrorCode("invalid_package", "The model named an invalid package"),
    ErrorCode("invalid_command", "The model asked for an invalid command"),
    ErrorCode("invalid_command_args", "The model asked for an invalid command"),
    ErrorCode("unsupported_shell", "The model asked for a shell command"),
    ErrorCode("unclosed_tag", "The model's answer ended abruptly"),
    ErrorCode("unexpected_tag", "The model's answer was malformed"),
    ErrorCode("missing_attribute", "The model's answer was malformed"),
    ErrorCode("invalid_attribute", "The model's answer was malformed"),
    ErrorCode("malformed_tag", "The model's answer was malformed"),
    ErrorCode("malformed_edit_block", "The model's edit was malformed"),
    ErrorCode("edit_no_match", "An edit did not match the file"),
    ErrorCode("edit_ambiguous", "An edit matched more than one place"),
    ErrorCode("rewrite_refused", "A rewrite that would drop code was refused"),
    ErrorCode("out_of_memory", "A command ran out of memory"),
    ErrorCode("disk_quota_exceeded", "The app's disk space is used up"),
    ErrorCode("sandbox_capacity", "The server has no room for another app right now",
              "This server is running as many app sandboxes as it can right now. "
              "Please send your message again in a few minutes."),
    ErrorCode("sandbox_not_found", "The app's sandbox is gone"),
    ErrorCode("sandbox_lost", "The machine running the app's sandbox was lost",
              "The machine running this app's sandbox stopped answering, and the sandbox went "
              "with it. Your saved versions are safe: send your message again and the app "
              "starts over on another machine from its last version."),
    ErrorCode("docker_unavailable", "The sandbox engine (Docker) is not reachable",
              "The service that runs app sandboxes (Docker) is not answering. "
              "Please try again shortly; if it keeps happening, tell the operator."),
    ErrorCode("redis_unavailable", "kiln's queue (Redis) is not reachable", _REDIS_DOWN),
    ErrorCode("queue_unavailable", "kiln's queue (Redis) is not reachable", _REDIS_DOWN),
    ErrorCode("redis_auth_failed", "kiln's queue (Redis) refused kiln's password",
              "kiln could not sign in to its queue (Redis). The operator needs to check the "
              "Redis password (REDIS_URL or KILN_REDIS_PASSWORD_FILE)."),
    ErrorCode("image_missing", "The app template is not installed on the server",
              "The sandbox image for this kind of app is not installed on this server. "
              "The operator needs to run `kiln images build`."),
    ErrorCode("image_build_failed", "The app template could not be built"),
    ErrorCode("instance_claimed", "This kiln instance belongs to another data directory"),
    ErrorCode("deployment_mismatch", "This host's settings differ from its deployment's"),
    ErrorCode("disk_full", "The server's disk is full",
              "The server ran out of disk space while working on your app. "
              "Please try again later; the operator has to free some space."),
    ErrorCode("file_too_large", "A file is too large to show"),
    ErrorCode("project_too_large", "The project is too large to save a version"),
    ErrorCode("project_error", "The project's versions could not be saved"),
    ErrorCode("version_not_found", "That version of the project does not exist"),
    ErrorCode("remote_failed", "The git remote could not be used"),
    ErrorCode("remote_url_refused", "kiln does not reach that git URL"),
    ErrorCode("remote_auth_failed", "The git remote refused the token"),
    ErrorCode("remote_not_found", "The git remote has no such repository or branch"),
    ErrorCode("remote_not_fast_forward",
              "The git remote has commits this project does not have (kiln never force-pushes)"),
    ErrorCode("remote_unreachable", "The git remote could not be reached"),
    ErrorCode("import_refused", "That repository cannot be imported"),
    ErrorCode("selection_not_in_project",
              "The selected element is not in the project's files"),
    ErrorCode("text_edit_refused", "That text cannot be edited in place"),
    ErrorCode("text_edit_expression",
              "That text is built by the app's code, so it cannot be edited in place"),
    ErrorCode("text_edit_ambiguous", "That text appears more than once in the element"),
    ErrorCode("text_edit_stale", "The app's file changed since the preview showed it"),
    ErrorCode("text_edit_unsupported", "Only text written in JSX can be edited in place"),
    ErrorCode("text_edit_no_sandbox", "The app is not running now"),
    ErrorCode("publish_failed", "The app could not be published"),
    ErrorCode("publish_unsupported", "This kind of app cannot be published"),
    ErrorCode("publish_build_failed", "The app's production build failed"),
    ErrorCode("publish_too_large", "The app is too large to publish"),
    ErrorCode("publish_timeout", "The app's production build took too long"),
    ErrorCode("publish_in_progress", "This app is being published already"),
    ErrorCode("publish_rate_limited", "Too many publishes in the last hour"),
    ErrorCode("publish_interrupted", "The publish was interrupted"),
    ErrorCode("not_published", "The app is not published"),
    ErrorCode("publish_unavailable", "This server does not publish apps"),
    ErrorCode("app_env_refused", "kiln cannot keep that variable of the app"),
    ErrorCode("file_not_kept", "A file cannot be kept in the project's versions"),
    ErrorCode("protected_path", "A file kiln or npm manages was not changed"),
    ErrorCode("store_error", "kiln could not save its data",
              "kiln could not save your run. Please try again; the server log has details."),
    ErrorCode("conflict", "That contradicts what is saved"),
    ErrorCode("not_found", "That was not found"),
    ErrorCode("run_finished", "That run is already finished"),
    ErrorCode("invalid_request", "kiln could not understand the request"),
    ErrorCode("queued_timeout", "The run waited too long for a worker"),
    ErrorCode("deadline_exceeded", "The run took longer than it may"),
    ErrorCode("stream_format", "A recording kiln cannot read"),
    ErrorCode("materialize_failed", "A recording's files could not be written out"),
    ErrorCode("render_check_disabled", "The render check is turned off"),
    ErrorCode("render_check_image_missing", "The render check's browser image is not installed"),
    ErrorCode("render_check_timeout",
              "The app did not finish loading in time for the render check"),
    ErrorCode("render_check_failed", "The render check could not open the app"),
    ErrorCode("preview_errors_unavailable",
              "The preview's error reports are not kept on this server"),
    ErrorCode(INTERNAL, "Something went wrong inside kiln",
              "The run stopped because of an internal error. The server log has the details."),
)  # fmt: skip

BY_CODE: dict[str, ErrorCode] = {error.code: error for error in ERROR_CODES}


def fixed_sentence(code: str) -> str | None:
    """The sentence a run failing with ``code`` shows instead of its exception's message."""
    declared = BY_CODE.get(code)
    return declared.sentence if declared and declared.sentence else None
