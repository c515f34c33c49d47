#!/bin/sh
# `kiln` in the kiln image. Started as root (compose does, and so does `docker compose exec`), it
# drops to the unprivileged kiln user first, so files in the data volume always belong to kiln,
# whichever way a command was started. When the Docker socket is mounted (the worker), kiln also
# joins the socket's group, whatever its number is on this host, instead of staying root.
set -eu
if [ "$(id -u)" = 0 ]; then
  data=${KILN_DATA_DIR:-/var/lib/kiln}
  mkdir -p "$data"
  # A bind-mounted or pre-existing data folder may belong to someone else.
  [ "$(stat -c %u "$data")" = "$(id -u kiln)" ] || chown kiln:kiln "$data"
  groups=kiln
  socket=${DOCKER_HOST:-unix:///var/run/docker.sock}
  socket=${socket#unix://}
  if [ -S "$socket" ]; then groups="$groups,$(stat -c %g "$socket")"; fi
  HOME=/var/lib/kiln exec setpriv --reuid=kiln --regid=kiln --groups="$groups" -- "$0" "$@"
fi
exec /opt/kiln/venv/bin/python -m app "$@"
