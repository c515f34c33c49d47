"""Projects: each chat's source files, versioned by kiln outside any container (one version per
turn that changed files); the sandbox is a cache of the latest version.

- :mod:`app.projects.store`: the :class:`ProjectStore` interface and its value types;
- :mod:`app.projects.git_store`: the local backend, one bare git repository per chat;
- :mod:`app.projects.rules`: which workspace files belong to a project, path safety, size cap;
- :mod:`app.projects.workspace_io`: reading a sandbox's workspace, writing a version into it;
- :mod:`app.projects.sync`: a chat's project and sandbox in step (record, restore).
"""
