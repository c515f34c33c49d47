"""Sandbox lifecycle: the manager, the Redis registry, the warm pool and the reaper."""
