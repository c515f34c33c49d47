// kiln's front of the npm proxy: what sandboxes talk to (on their bridge's gateway), in front of
// Verdaccio (on a unix socket inside this container). Three jobs, all of them about what a
// sandbox may learn or leave behind (see sandbox/containers/npm_proxy.py):
//
// 1. Only installs' requests pass: GET/HEAD of a packument (`/name`, `/@scope%2fname`) or a
//    tarball (`/name/-/file.tgz`). Listings (`/-/all`, `/-/v1/search`, `/-/verdaccio/...`), user
//    and token endpoints and every write are refused with 403 and words: `/-/all` listed what
//    every other user of the host had installed.
// 2. Packuments announce the upstream's tarball URLs (`https://registry.npmjs.org/x/-/x-1.tgz`),
//    not this proxy's address, so package-lock.json files never carry kiln's private address.
//    npm in the sandbox fetches them here anyway (`--replace-registry-host=always`). A request
//    path that carries the upstream's own path prefix (a mirror at https://host/npm/) loses it.
// 3. The cache (Verdaccio's storage) is bounded: KILN_PROXY_CACHE_BYTES. An index of package
//    folders (bytes, last use) is built once at start and updated per response; after a response
//    that may have grown the cache, the least recently used packages are removed until the
//    cache is under the low-water mark (LOW_WATER of the bound). Verdaccio fetches a removed
//    package from upstream again when it is next asked for.
//
// GET /-/kiln/cache answers {bytes, bound, packages, evicted} to the host only (a request whose source is
// one of this proxy's own listen addresses): `kiln doctor` shows it.
'use strict';
const fs = require('fs');
const http = require('http');
const path = require('path');
const { spawn } = require('child_process');

const STORAGE = process.env.KILN_PROXY_STORAGE || '/verdaccio/storage';
const SOCKET = process.env.KILN_PROXY_SOCKET || '/tmp/kiln-verdaccio.sock';
const BOUND = Number(process.env.KILN_PROXY_CACHE_BYTES || 2 * 1024 ** 3);
const LOW_WATER = 0.8;
const RECENT_MS = 30000;
const SETTLE_MS = [1000, 15000];
const UPSTREAM = new URL(process.env.KILN_PROXY_UPSTREAM || 'https://registry.npmjs.org/');
const UPSTREAM_PREFIX = UPSTREAM.pathname.replace(/\/+$/, '');
const LISTEN = (process.env.KILN_PROXY_LISTEN || '').split(/\s+/).filter(Boolean);
const NAME = '(?:@[a-z0-9][\\w.~-]*(?:%2f|/))?[a-z0-9_][\\w.~-]*';
const PACKUMENT = new RegExp(`^/(${NAME})$`, 'i');
const TARBALL = new RegExp(`^/(${NAME})/-/(?:@[\\w.~-]+/)?[\\w.~-]+\\.tgz$`, 'i');

// package folder (relative to STORAGE, e.g. "react" or "@types/react") -> {bytes, used}
const index = new Map();
let total = 0;
let evicted = 0; // bytes removed since the start

function folderBytes(folder) {
  let bytes = 0;
  let names = [];
  try {
    names = fs.readdirSync(path.join(STORAGE, folder));
  } catch {
    return 0;
  }
  for (const name of names) {
    try {
      const stat = fs.statSync(path.join(STORAGE, folder, name));
      if (stat.isFile()) bytes += stat.size;
    } catch {
      // removed while counted: it holds nothing now
    }
  }
  return bytes;
}

function account(folder, used) {
  const bytes = folderBytes(folder);
  const before = index.get(folder);
  total += bytes - (before ? before.bytes : 0);
  if (bytes === 0) index.delete(folder);
  else index.set(folder, { bytes, used: used || (before && before.used) || Date.now() });
}

function touch(folder) {
  const entry = index.get(folder);
  if (entry) entry.used = Date.now();
  else index.set(folder, { bytes: 0, used: Date.now() });
}

function scanOnce() {
  let entries = [];
  try {
    entries = fs.readdirSync(STORAGE, { withFileTypes: true });
  } catch {
    return;
  }
  for (const entry of entries) {
    if (!entry.isDirectory()) continue;
    const folders = entry.name.startsWith('@')
      ? fs.readdirSync(path.join(STORAGE, entry.name)).map((n) => `${entry.name}/${n}`)
      : [entry.name];
    for (const folder of folders) {
      let used = 0;
      try {
        used = fs.statSync(path.join(STORAGE, folder)).mtimeMs;
      } catch {
        continue;
      }
      account(folder, used);
    }
  }
}

// Oldest first; folders used in the last RECENT_MS (an install under way) go last of all.
function evict() {
  if (total <= BOUND) return;
  const recent = Date.now() - RECENT_MS;
  const order = [...index.entries()].sort(
    (a, b) => (a[1].used > recent) - (b[1].used > recent) || a[1].used - b[1].used,
  );
  for (const [folder, entry] of order) {
    if (total <= BOUND * LOW_WATER) break;
    try {
      fs.rmSync(path.join(STORAGE, folder), { recursive: true, force: true });
    } catch (err) {
      console.error(`kiln npm proxy: could not evict ${folder}: ${err.message}`);
      continue;
    }
    total -= entry.bytes;
    evicted += entry.bytes;
    index.delete(folder);
  }
}

// Verdaccio writes a package's files while and shortly after it answers: a folder is counted
// again a moment after each response and once more later, then the cache is evicted down.
function settle(folder) {
  for (const delay of SETTLE_MS) {
    setTimeout(() => {
      account(folder);
      evict();
    }, delay).unref();
  }
}

function refuse(res, status, message) {
  const body = JSON.stringify({ error: message });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function publicPackument(body) {
  const doc = JSON.parse(body);
  for (const version of Object.values(doc.versions || {})) {
    if (version && version.dist && typeof version.dist.tarball === 'string') {
      // Verdaccio names a scoped tarball /@scope%2fname/-/...; the registry's own is /@scope/name/-/...
      const local = new URL(version.dist.tarball, 'http://local/').pathname.replace(/%2f/i, '/');
      version.dist.tarball = `${UPSTREAM.origin}${UPSTREAM_PREFIX}${local}`;
    }
  }
  return JSON.stringify(doc);
}

function forward(req, res, name, isPackument) {
  const folder = decodeURIComponent(name);
  touch(folder);
  const headers = { ...req.headers, 'accept-encoding': 'identity' };
  const upstream = http.request(
    { socketPath: SOCKET, method: req.method, path: req.url, headers },
    (answer) => {
      const done = () => settle(folder);
      if (!isPackument || answer.statusCode !== 200 || req.method === 'HEAD') {
        res.writeHead(answer.statusCode, answer.headers);
        answer.pipe(res);
        answer.on('end', done);
        return;
      }
      const chunks = [];
      answer.on('data', (chunk) => chunks.push(chunk));
      answer.on('end', () => {
        let body;
        try {
          body = publicPackument(Buffer.concat(chunks).toString('utf8'));
        } catch (err) {
          refuse(res, 502, `the npm proxy got a packument it could not read: ${err.message}`);
          return;
        }
        const out = { ...answer.headers, 'content-length': Buffer.byteLength(body) };
        delete out['transfer-encoding'];
        delete out.etag; // the body is not Verdaccio's any more
        res.writeHead(200, out);
        res.end(body);
        done();
      });
    },
  );
  upstream.on('error', (err) => refuse(res, 502, `the npm proxy is not ready: ${err.code || err.message}`));
  req.pipe(upstream);
}

function handle(req, res) {
  let url = req.url.split('?')[0];
  if (UPSTREAM_PREFIX && url.startsWith(`${UPSTREAM_PREFIX}/`)) {
    url = url.slice(UPSTREAM_PREFIX.length);
    req.url = url;
  }
  if (url === '/-/kiln/cache' && LISTEN.some((a) => a.split(':')[0] === req.socket.remoteAddress)) {
    const body = JSON.stringify({ bytes: total, bound: BOUND, packages: index.size, evicted });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(body);
    return;
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    refuse(res, 403, `kiln's npm proxy only serves packages: ${req.method} ${url} is refused`);
    return;
  }
  const tarball = TARBALL.exec(url);
  const packument = tarball ? null : PACKUMENT.exec(url);
  if (!tarball && !packument) {
    refuse(res, 403, `kiln's npm proxy only serves packages and their tarballs: ${url} is refused`);
    return;
  }
  forward(req, res, (tarball || packument)[1].replace(/%2f/i, '/'), Boolean(packument));
}

// Verdaccio is this process's child: when it ends, so does the front (and the container, which
// Docker starts again). The front listens once Verdaccio's socket is there, so a proxy that
// accepts connections (what kiln waits for) serves them.
const verdaccio = spawn('verdaccio', ['--config', process.argv[2]], { stdio: 'inherit' });
verdaccio.on('exit', (code) => process.exit(code || 1));
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => verdaccio.kill(signal));
scanOnce();
evict();
const waitForSocket = setInterval(() => {
  if (!fs.existsSync(SOCKET)) return;
  clearInterval(waitForSocket);
  for (const address of LISTEN) {
    const at = address.lastIndexOf(':');
    http.createServer(handle).listen(Number(address.slice(at + 1)), address.slice(0, at));
  }
}, 100);
