// kiln's resident builder: one long-lived Node process that runs `vite build` on request, so a
// build after the first reuses the loaded Vite, its esbuild service and a warmed-up JIT
// (measured in a 1-CPU sandbox: ~1.9 s for `vite build` as a new process, ~0.8-1.1 s here once
// warm). Forked by kiln-build-service.mjs, which says when it builds; plain Node, no dependencies.
//
// Each build calls Vite's own build() with what `vite build` passes it, so it reads the config,
// the sources and .env files afresh: what changes between builds is that the process is not
// new and that Rollup starts from the last build's cache (kiln-rollup-cache.mjs: the
// dependencies are not transformed again). The environment is put back before each build,
// with the app's own (Vite sets NODE_ENV and VITE_USER_NODE_ENV once, a new process would
// start without them). Installed packages are what a warm process cannot see change: the
// service starts a new builder, with an empty cache, when they did.
//
// Messages from the service: {op: 'build'} (output like `vite build`'s) or {op: 'warm'} (a silent
// build into memory, to warm up). To the service: {out}/{err} (the build's output, in order) and
// {done, code}.
import { writeFileSync } from 'node:fs'
import { setPriority } from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { appEnvironment } from './kiln-app-env.mjs'
import { cacheRule, useRollupCache } from './kiln-rollup-cache.mjs'

const WORKSPACE = process.env.KILN_WORKSPACE || '/workspace'
const VITE = path.join(WORKSPACE, 'node_modules/vite/dist/node/index.js')
const pristine = { ...process.env }
const NICENESS = 10

try {
  // The first process to go when the sandbox runs out of memory: the service starts another.
  writeFileSync('/proc/self/oom_score_adj', '1000')
} catch {
  // not on Linux, or not allowed: it only decides who goes first
}
// Behind the dev server in the sandbox's CPU share: a warm-up runs while the preview starts
// (right after an install, when the dev server starts over); a build after the answer finds
// the dev server idle and loses nothing. Its esbuild service inherits this.
setPriority(NICENESS)

// The service's environment and the app's as kiln wrote it last (kiln-app-env.mjs): a variable
// the chat removed is gone from the next build.
function restoreEnvironment() {
  for (const key of Object.keys(process.env)) if (!(key in pristine)) delete process.env[key]
  Object.assign(process.env, pristine, appEnvironment())
}

// The build's output goes to the service in order, stdout and stderr alike; nothing is printed.
function captureOutput() {
  for (const [stream, key] of [[process.stdout, 'out'], [process.stderr, 'err']]) {
    stream.write = (chunk, encoding, callback) => {
      process.send({ [key]: typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString() })
      if (typeof encoding === 'function') encoding()
      else if (typeof callback === 'function') callback()
      return true
    }
  }
}

async function build(vite, op) {
  restoreEnvironment()
  if (op === 'warm') {
    const silent = { logLevel: 'silent', plugins: [cacheRule()], build: { write: false } }
    await vite.build(silent).catch(() => {})
    return 0
  }
  try {
    await vite.build({ plugins: [cacheRule()], build: {} }) // as `vite build` without options
    return 0
  } catch (error) {
    // `vite build` prints this and exits with 1.
    vite.createLogger().error(`error during build:\n${error.stack}`, { error })
    return 1
  }
}

captureOutput()
useRollupCache()
// Listening before anything is awaited: a request sent while Vite loads is queued, not lost.
// Without Vite there is nothing to keep warm: the service sees the exit and the client builds
// as a new process, which says what is wrong.
let queue = import(pathToFileURL(VITE).href).catch(() => process.exit(3))
process.on('message', (message) => {
  queue = queue.then(async (vite) => {
    const code = await build(vite, message.op)
    process.send({ done: true, code })
    return vite
  })
})
