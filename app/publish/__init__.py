"""Publishing a version of a chat's project at a public link of its own (issue 27).

- :mod:`app.publish.storage`: content-addressed, immutable builds (a blob per file, a manifest
  per publication) behind :class:`~app.publish.storage.BuildStorage`, with its local-disk
  implementation and garbage collection;
- :mod:`app.publish.build`: a version's production build in a fresh sandbox of its own;
- :mod:`app.publish.publisher`: build, store, move the link (one UPDATE), unpublish.

The link is served by :mod:`app.api.published_apps`.
"""
