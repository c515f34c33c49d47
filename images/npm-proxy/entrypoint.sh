#!/bin/sh
# Writes Verdaccio's config from the environment kiln gives the container, then runs it.
#   KILN_PROXY_LISTEN    space-separated host:port addresses (the sandbox bridges' gateways)
#   KILN_PROXY_UPSTREAM  the registry the proxy fetches from (its only uplink)
#   HTTP(S)_PROXY, NO_PROXY, NODE_EXTRA_CA_CERTS: how the host reaches that registry; they stay
#   in this container (Verdaccio reads the proxy variables itself), never in a sandbox.
# Nobody may publish, unpublish or add a user: the cache holds what upstream served, nothing else.
set -eu
config=/verdaccio/conf/config.yaml
{
  echo "storage: /verdaccio/storage"
  echo "listen:"
  for address in ${KILN_PROXY_LISTEN:?no listen address}; do echo "  - $address"; done
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
exec verdaccio --config "$config"
