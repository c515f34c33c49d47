"""Docker sandboxes for generated apps. Knows nothing about LLMs; never imports ``app``.

This module is the package's public API: ``app`` imports sandbox names from here only (a test
holds it to that). Subpackages by concern:

- ``containers``: Docker objects of one sandbox (the boundary, hardening, labels, networks);
- ``images``: templates, image settings, the offline base image and the builder;
- ``lifecycle``: the manager, the Redis registry, the warm pool, the reaper;
- ``writes``: the Redis write buffer, locked flushes, file events, fences, template files;
- ``execution``: the command policy, commands, exec streams, the install queue;
- ``preview``: the preview reverse proxy.

Names are loaded on first use (PEP 562), so importing :mod:`sandbox.errors` or one name does
not pull in the Docker SDK: the CLI's start-up stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.backends.contract import HostCapacity
    from sandbox.backends.host_memory import HostMemory, busy_bytes, room_for
    from sandbox.backends.swarm_nodes import NodeReport, swarm_node_reports
    from sandbox.cluster.swarm_settings import SwarmSettings
    from sandbox.containers.disk_quota import sandbox_disk
    from sandbox.containers.labels import instance_filter
    from sandbox.containers.networks import BRIDGE_FILTER_FIX
    from sandbox.containers.npm_cache_report import ProxyCache, proxy_caches
    from sandbox.containers.npm_probe import (
        NpmProbe,
        probe_npm,
    )
    from sandbox.containers.npm_proxy import proxy_container_name
    from sandbox.disk_mounts import DEFAULT_DISK_ROOT, usable_root
    from sandbox.docker_boundary import (
        bind_docker_tenant,
        call,
        connect,
        docker_tenant,
    )
    from sandbox.env_settings import (
        EnvReader,
        size_bytes,
    )
    from sandbox.errors import (
        CommandRefused,
        FileTooLarge,
        ImageBuildFailed,
        ImageMissing,
        InstallRefused,
        InstanceClaimed,
        RedisAuthFailed,
        RedisUnavailable,
        SandboxConfigError,
        SandboxError,
        SandboxLost,
        SandboxNotFound,
        SandboxUnavailable,
        WriteFailed,
    )
    from sandbox.execution.app_env import AppEnvironment
    from sandbox.execution.exec_frames import (
        read_stdout,
    )
    from sandbox.execution.workspace_files import (
        WorkspaceFile,
    )
    from sandbox.handle import (
        Sandbox,
    )
    from sandbox.images.base_image import (
        ImageRecipe,
        StandIn,
        build_if_stale,
        ensure_stand_in,
    )
    from sandbox.images.builder import (
        BUILD_LOCK,
        PROXY_NAME,
        RENDER_IMAGE,
        RENDER_NAME,
        SERVICE_IMAGES,
        ImageBuilder,
        ImageStatus,
        build_lock,
    )
    from sandbox.images.docker_build import (
        EXCLUDED_NAMES,
        BuildResult,
        ContextFile,
        Progress,
        context_files,
    )
    from sandbox.images.settings import (
        ImageBuildSettings,
        default_images_dir,
    )
    from sandbox.images.templates import (
        BUILD_COMMAND,
        DEFAULT_TEMPLATE,
        TEMPLATES,
        WORKSPACE,
        Template,
        get_template,
    )
    from sandbox.lifecycle.instance_claim import (
        claim_instance,
    )
    from sandbox.lifecycle.manager import (
        SandboxManager,
    )
    from sandbox.lifecycle.pool_report import describe_pool, pool_key
    from sandbox.lifecycle.reaper import (
        sweep_instance,
    )
    from sandbox.lifecycle.registry import (
        registry_prefix,
    )
    from sandbox.managed_session import manager_session
    from sandbox.nested_exits import (
        NestedExits,
    )
    from sandbox.preview.error_ingest import (
        PreviewErrorIngest,
    )
    from sandbox.preview.error_stream import (
        ErrorStreamSettings,
        PreviewErrorStream,
        valid_stream_id,
    )
    from sandbox.preview.hmr_hold import (
        HmrHold,
        hold_preview,
        redis_hold,
        release_preview,
    )
    from sandbox.preview.module_warmup import warm_dev_server
    from sandbox.preview.proxy import (
        SANDBOX_ID,
        WS_NOT_FOUND,
        WS_POLICY_VIOLATION,
        PreviewProxy,
        Refusal,
        Resolve,
        host_name,
        preview_label,
        preview_url,
        refuse,
    )
    from sandbox.preview.readiness import (
        Readiness,
        probe_preview,
    )
    from sandbox.preview.render_check import (
        RENDER_SKIP_DISABLED,
        RENDER_SKIP_FAILED,
        RENDER_SKIP_IMAGE,
        RenderBrowser,
        RenderCheckSettings,
        RenderReport,
        probe_render_browser,
        render_image_present,
        run_render_check,
    )
    from sandbox.redis_boundary import ping_redis, wrap_redis_errors
    from sandbox.redis_url import redacted_url, redis_url_from_env
    from sandbox.session import (
        SandboxSession,
        manager_ports,
    )
    from sandbox.session_log import (
        AppliedEdit,
        FailedEdit,
        Record,
        RecordSink,
        SessionLog,
    )
    from sandbox.settings import (
        DEFAULT_DATA_DIR,
        SandboxSettings,
        data_dir_from_env,
        host_memory_bytes,
    )
    from sandbox.writes.edit_blocks import apply_edit_blocks
    from sandbox.writes.fences import (
        strip_wrapping_fence,
    )
    from sandbox.writes.flush import (
        build_workspace_tar,
    )
    from sandbox.writes.write_buffer import (
        WriteBuffer,
    )

# Where each public name lives. The imports above exist for type checkers only, and __all__ for
# linters; tests/sandbox/test_public_api.py checks that the three lists agree.
_EXPORTS: dict[str, str] = {
    "AppEnvironment": "sandbox.execution.app_env",
    "CommandRefused": "sandbox.errors",
    "FileTooLarge": "sandbox.errors",
    "InstanceClaimed": "sandbox.errors",
    "claim_instance": "sandbox.lifecycle.instance_claim",
    "ImageBuildFailed": "sandbox.errors",
    "ImageMissing": "sandbox.errors",
    "InstallRefused": "sandbox.errors",
    "SandboxError": "sandbox.errors",
    "SandboxLost": "sandbox.errors",
    "SandboxNotFound": "sandbox.errors",
    "SandboxUnavailable": "sandbox.errors",
    "SandboxConfigError": "sandbox.errors",
    "WriteFailed": "sandbox.errors",
    "SandboxSettings": "sandbox.settings",
    "EnvReader": "sandbox.env_settings",
    "size_bytes": "sandbox.env_settings",
    "host_memory_bytes": "sandbox.settings",
    "DEFAULT_DATA_DIR": "sandbox.settings",
    "NpmProbe": "sandbox.containers.npm_probe",
    "ProxyCache": "sandbox.containers.npm_cache_report",
    "proxy_caches": "sandbox.containers.npm_cache_report",
    "proxy_container_name": "sandbox.containers.npm_proxy",
    "probe_npm": "sandbox.containers.npm_probe",
    "data_dir_from_env": "sandbox.settings",
    "Sandbox": "sandbox.handle",
    "NestedExits": "sandbox.nested_exits",
    "WorkspaceFile": "sandbox.execution.workspace_files",
    "AppliedEdit": "sandbox.session_log",
    "FailedEdit": "sandbox.session_log",
    "Record": "sandbox.session_log",
    "RecordSink": "sandbox.session_log",
    "SandboxSession": "sandbox.session",
    "SessionLog": "sandbox.session_log",
    "manager_ports": "sandbox.session",
    "manager_session": "sandbox.managed_session",
    "SandboxManager": "sandbox.lifecycle.manager",
    "sweep_instance": "sandbox.lifecycle.reaper",
    "sandbox_disk": "sandbox.containers.disk_quota",
    "DEFAULT_DISK_ROOT": "sandbox.disk_mounts",
    "usable_root": "sandbox.disk_mounts",
    "registry_prefix": "sandbox.lifecycle.registry",
    "HostCapacity": "sandbox.backends.contract",
    "BRIDGE_FILTER_FIX": "sandbox.containers.networks",
    "instance_filter": "sandbox.containers.labels",
    "HostMemory": "sandbox.backends.host_memory",
    "busy_bytes": "sandbox.backends.host_memory",
    "room_for": "sandbox.backends.host_memory",
    "NodeReport": "sandbox.backends.swarm_nodes",
    "swarm_node_reports": "sandbox.backends.swarm_nodes",
    "SwarmSettings": "sandbox.cluster.swarm_settings",
    "BUILD_COMMAND": "sandbox.images.templates",
    "DEFAULT_TEMPLATE": "sandbox.images.templates",
    "TEMPLATES": "sandbox.images.templates",
    "Template": "sandbox.images.templates",
    "WORKSPACE": "sandbox.images.templates",
    "get_template": "sandbox.images.templates",
    "ImageBuildSettings": "sandbox.images.settings",
    "default_images_dir": "sandbox.images.settings",
    "BUILD_LOCK": "sandbox.images.builder",
    "PROXY_NAME": "sandbox.images.builder",
    "RENDER_SKIP_DISABLED": "sandbox.preview.render_check",
    "RENDER_SKIP_FAILED": "sandbox.preview.render_check",
    "RENDER_SKIP_IMAGE": "sandbox.preview.render_check",
    "RenderBrowser": "sandbox.preview.render_check",
    "warm_dev_server": "sandbox.preview.module_warmup",
    "RenderCheckSettings": "sandbox.preview.render_check",
    "RenderReport": "sandbox.preview.render_check",
    "render_image_present": "sandbox.preview.render_check",
    "probe_render_browser": "sandbox.preview.render_check",
    "run_render_check": "sandbox.preview.render_check",
    "RENDER_IMAGE": "sandbox.images.builder",
    "RENDER_NAME": "sandbox.images.builder",
    "SERVICE_IMAGES": "sandbox.images.builder",
    "ImageBuilder": "sandbox.images.builder",
    "ImageStatus": "sandbox.images.builder",
    "build_lock": "sandbox.images.builder",
    "BuildResult": "sandbox.images.docker_build",
    "ContextFile": "sandbox.images.docker_build",
    "EXCLUDED_NAMES": "sandbox.images.docker_build",
    "Progress": "sandbox.images.docker_build",
    "context_files": "sandbox.images.docker_build",
    "ImageRecipe": "sandbox.images.base_image",
    "StandIn": "sandbox.images.base_image",
    "build_if_stale": "sandbox.images.base_image",
    "ensure_stand_in": "sandbox.images.base_image",
    "WriteBuffer": "sandbox.writes.write_buffer",
    "wrap_redis_errors": "sandbox.redis_boundary",
    "ping_redis": "sandbox.redis_boundary",
    "redacted_url": "sandbox.redis_url",
    "redis_url_from_env": "sandbox.redis_url",
    "RedisAuthFailed": "sandbox.errors",
    "RedisUnavailable": "sandbox.errors",
    "describe_pool": "sandbox.lifecycle.pool_report",
    "pool_key": "sandbox.lifecycle.pool_report",
    "strip_wrapping_fence": "sandbox.writes.fences",
    "build_workspace_tar": "sandbox.writes.flush",
    "apply_edit_blocks": "sandbox.writes.edit_blocks",
    "PreviewProxy": "sandbox.preview.proxy",
    "HmrHold": "sandbox.preview.hmr_hold",
    "PreviewErrorIngest": "sandbox.preview.error_ingest",
    "ErrorStreamSettings": "sandbox.preview.error_stream",
    "PreviewErrorStream": "sandbox.preview.error_stream",
    "valid_stream_id": "sandbox.preview.error_stream",
    "hold_preview": "sandbox.preview.hmr_hold",
    "redis_hold": "sandbox.preview.hmr_hold",
    "release_preview": "sandbox.preview.hmr_hold",
    "Readiness": "sandbox.preview.readiness",
    "probe_preview": "sandbox.preview.readiness",
    "Refusal": "sandbox.preview.proxy",
    "Resolve": "sandbox.preview.proxy",
    "SANDBOX_ID": "sandbox.preview.proxy",
    "WS_NOT_FOUND": "sandbox.preview.proxy",
    "WS_POLICY_VIOLATION": "sandbox.preview.proxy",
    "host_name": "sandbox.preview.proxy",
    "preview_label": "sandbox.preview.proxy",
    "preview_url": "sandbox.preview.proxy",
    "refuse": "sandbox.preview.proxy",
    "call": "sandbox.docker_boundary",
    "bind_docker_tenant": "sandbox.docker_boundary",
    "docker_tenant": "sandbox.docker_boundary",
    "read_stdout": "sandbox.execution.exec_frames",
    "connect": "sandbox.docker_boundary",
}

__all__ = [
    "BRIDGE_FILTER_FIX",
    "BUILD_COMMAND",
    "BUILD_LOCK",
    "DEFAULT_DATA_DIR",
    "DEFAULT_DISK_ROOT",
    "DEFAULT_TEMPLATE",
    "EXCLUDED_NAMES",
    "PROXY_NAME",
    "RENDER_IMAGE",
    "RENDER_NAME",
    "RENDER_SKIP_DISABLED",
    "RENDER_SKIP_FAILED",
    "RENDER_SKIP_IMAGE",
    "SANDBOX_ID",
    "SERVICE_IMAGES",
    "TEMPLATES",
    "WORKSPACE",
    "WS_NOT_FOUND",
    "WS_POLICY_VIOLATION",
    "AppEnvironment",
    "AppliedEdit",
    "BuildResult",
    "CommandRefused",
    "ContextFile",
    "EnvReader",
    "ErrorStreamSettings",
    "FailedEdit",
    "FileTooLarge",
    "HmrHold",
    "HostCapacity",
    "HostMemory",
    "ImageBuildFailed",
    "ImageBuildSettings",
    "ImageBuilder",
    "ImageMissing",
    "ImageRecipe",
    "ImageStatus",
    "InstallRefused",
    "InstanceClaimed",
    "NestedExits",
    "NodeReport",
    "NpmProbe",
    "PreviewErrorIngest",
    "PreviewErrorStream",
    "PreviewProxy",
    "Progress",
    "ProxyCache",
    "Readiness",
    "Record",
    "RecordSink",
    "RedisAuthFailed",
    "RedisUnavailable",
    "Refusal",
    "RenderBrowser",
    "RenderCheckSettings",
    "RenderReport",
    "Resolve",
    "Sandbox",
    "SandboxConfigError",
    "SandboxError",
    "SandboxLost",
    "SandboxManager",
    "SandboxNotFound",
    "SandboxSession",
    "SandboxSettings",
    "SandboxUnavailable",
    "SessionLog",
    "StandIn",
    "SwarmSettings",
    "Template",
    "WorkspaceFile",
    "WriteBuffer",
    "WriteFailed",
    "apply_edit_blocks",
    "bind_docker_tenant",
    "build_if_stale",
    "build_lock",
    "build_workspace_tar",
    "busy_bytes",
    "call",
    "claim_instance",
    "connect",
    "context_files",
    "data_dir_from_env",
    "default_images_dir",
    "describe_pool",
    "docker_tenant",
    "ensure_stand_in",
    "get_template",
    "hold_preview",
    "host_memory_bytes",
    "host_name",
    "instance_filter",
    "manager_ports",
    "manager_session",
    "ping_redis",
    "pool_key",
    "preview_label",
    "preview_url",
    "probe_npm",
    "probe_preview",
    "probe_render_browser",
    "proxy_caches",
    "proxy_container_name",
    "read_stdout",
    "redacted_url",
    "redis_hold",
    "redis_url_from_env",
    "refuse",
    "registry_prefix",
    "release_preview",
    "render_image_present",
    "room_for",
    "run_render_check",
    "sandbox_disk",
    "size_bytes",
    "strip_wrapping_fence",
    "swarm_node_reports",
    "sweep_instance",
    "usable_root",
    "valid_stream_id",
    "warm_dev_server",
    "wrap_redis_errors",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
