#!/bin/sh
# Writes Verdaccio's config from the environment kiln gives the container, then runs kiln's front
# (front.js), which starts Verdaccio on a unix socket and is what sandboxes talk to.
#   KILN_PROXY_LISTEN    space-separated host:port addresses (the sandbox bridges' gateways): the
#                        front's; Verdaccio listens only on $socket, inside this container
#   KILN_PROXY_UPSTREAM  the registry the proxy fetches from (its only uplink)
#   KILN_PROXY_CACHE_BYTES  the bound of the cache (front.js evicts the least recently used)
#   HTTP(S)_PROXY, NO_PROXY, NODE_EXTRA_CA_CERTS: how the host reaches that registry; they stay
#   in this container (Verdaccio reads the proxy variables itself), never in a sandbox.
# Nobody may publish, unpublish or add a user: the cache holds what upstream served, nothing else.
set -eu
config=/verdaccio/conf/config.yaml
socket=/tmp/kiln-verdaccio.sock
rm -f "$socket"
: "${KILN_PROXY_LISTEN:?no listen address}"
{
  echo "storage: /verdaccio/storage"
  echo "listen: unix:$socket"
  echo "web: {enable: false}"
  echo "max_body_size: 1mb"
  echo "auth: {htpasswd: {file: /verdaccio/conf/htpasswd, max_users: -1}}"
  echo "uplinks:"
  echo "  upstream: {url: '${KILN_PROXY_UPSTREAM:?no upstream}', timeout: 60s, maxage: 2m}"
  echo "packages:"
  for pattern in "'@*/*'" "'**'"; do
    echo "  $pattern: {access: \$all, publish: kiln-nobody, unpublish: kiln-nobody, proxy: upstream}"
  done
  echo "log: {type: stdout, format: pretty, level: warn}"
} >"$config"
: >/verdaccio/conf/htpasswd
export KILN_PROXY_SOCKET="$socket"
exec node /opt/kiln-npm-proxy/front.js "$config"
