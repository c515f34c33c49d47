// kiln's dev-server supervisor: the sandbox's main process (under Docker's --init), running
// `npm run dev` in /workspace and keeping it running. Plain Node, no dependencies, outside the
// workspace so that a generated app cannot replace it.
//
// - package.json or the installed packages changed in a way the running dev server may have
//   already loaded (an installed package's version changed or it was removed, or package.json
//   changed outside its dependency lists): the dev server starts over as a new process, with
//   one consistent set of dependencies. Packages only added (a restore's or a run's install of
//   a new package) or a write of the same content (npm rewrites package.json at every install's
//   end) keep it running: Vite resolves and pre-bundles a newly imported package when it is
//   first asked for (one reload), while starting over costs seconds of preview (issue 24).
//   Vite's in-process restart was tried first: now and then its close() waited forever for a
//   request held by the dependency optimizer, the port already closed, and the preview said
//   "starting" for good.
// - The process itself (kiln-dev-process.mjs, shared with the other templates' supervisor): its
//   own process group, ended for sure; started again after a crash, with growing pauses;
//   started over when kiln rewrites the app's environment (the chat's variables).
// - SIGTERM/SIGINT (docker stop): the dev server's group is stopped, then this process exits.
// - A dev script that is plain `vite` (the template's) runs as kiln-vite.mjs: the same Vite with
//   kiln's source-location plugin (kiln-source.mjs, dev only); any other script runs as written.
// - It also serves the resident builder (kiln-build-service.mjs), which builds the app for kiln.
import { existsSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'
import { startBuildService } from './kiln-build-service.mjs'
import { DevProcess, say } from './kiln-dev-process.mjs'

const WORKSPACE = process.env.KILN_WORKSPACE || '/workspace'
const WATCHED = ['package.json', 'node_modules/.package-lock.json'].map((f) => path.join(WORKSPACE, f))
const [PACKAGE_JSON, INSTALLED] = WATCHED
const VITE_BIN = path.join(WORKSPACE, 'node_modules/vite/bin/vite.js')
// package.json fields that only list or describe packages: what is installed is read from npm's
// record of node_modules instead.
const NOT_SERVED = ['dependencies', 'devDependencies', 'optionalDependencies', 'peerDependencies',
  'name', 'version', 'description', 'private']
const POLL_MS = 250
const DEBOUNCE_MS = 400 // npm writes package.json and its lock file in a burst

let manifest = fingerprint()
let changedAt = 0
let served = null // what the running dev server was started with (packagesServed())

// Any write counts, identical content included: kiln merges a new dependency into package.json
// before installing it, and npm's write at the end of the install (the same content) is the one
// that says the package is there. npm also rewrites node_modules/.package-lock.json then.
function fingerprint() {
  return WATCHED.map((file) => {
    try {
      const { mtimeMs, size } = statSync(file)
      return `${mtimeMs}:${size}`
    } catch {
      return '-' // not there (yet)
    }
  }).join('|')
}

// A JSON file's content: {} when it is not there (yet), null when it cannot be read (half
// written by npm, or broken): what was loaded is then unknown.
function readJson(file) {
  let text
  try {
    text = readFileSync(file, 'utf8')
  } catch {
    return {}
  }
  try {
    return JSON.parse(text)
  } catch {
    return null
  }
}

// What the dev server may have loaded: package.json but its package lists, and each installed
// package's identity (npm's hidden lock file in node_modules says what is there); null when
// either cannot be read.
function packagesServed() {
  const declared = readJson(PACKAGE_JSON)
  const record = readJson(INSTALLED)
  if (declared === null || record === null) return null
  const rest = Object.keys(declared).sort().filter((key) => !NOT_SERVED.includes(key))
  const installed = new Map()
  for (const [where, entry] of Object.entries(record.packages || {})) {
    installed.set(where, `${entry.version}|${entry.integrity || entry.resolved || ''}`)
  }
  return { config: JSON.stringify(rest.map((key) => [key, declared[key]])), installed }
}

// Whether `now` differs from `before` in anything but packages added (unknown: it does).
function startsOver(before, now) {
  if (before === null || now === null || before.config !== now.config) return true
  for (const [where, identity] of before.installed) {
    if (now.installed.get(where) !== identity) return true
  }
  return false
}

// `npm run dev`, or kiln's Vite with source locations when the dev script is plain `vite`.
function devCommand() {
  const declared = readJson(PACKAGE_JSON)
  const script = declared && declared.scripts && declared.scripts.dev
  if (typeof script === 'string' && script.trim() === 'vite' && existsSync(VITE_BIN)) {
    return ['node', [path.join(path.dirname(new URL(import.meta.url).pathname), 'kiln-vite.mjs'), VITE_BIN]]
  }
  return ['npm', ['run', 'dev']]
}

const dev = new DevProcess({
  workspace: WORKSPACE,
  command: devCommand,
  beforeStart: () => {
    served = packagesServed()
  },
})

function restart() {
  if (!dev.running) return
  const now = packagesServed()
  if (!startsOver(served, now)) {
    const added = now.installed.size - served.installed.size
    served = now
    say(`packages: ${added} added, none changed or removed: the dev server keeps running`)
    return
  }
  dev.startOver('packages changed')
}

function poll() {
  dev.followAppEnv()
  const now = fingerprint()
  if (now !== manifest) {
    manifest = now
    changedAt = Date.now()
  }
  if (changedAt && Date.now() - changedAt >= DEBOUNCE_MS) {
    changedAt = 0
    restart()
  }
}

function shutdown() {
  builds.stop()
  dev.stop()
}

process.on('SIGTERM', shutdown)
process.on('SIGINT', shutdown)
const builds = startBuildService({ workspace: WORKSPACE, fingerprint, say })
setInterval(poll, POLL_MS)
dev.start()
