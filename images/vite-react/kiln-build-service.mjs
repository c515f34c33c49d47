// The resident builder's service, part of kiln's dev-server supervisor (kiln-dev.mjs): it
// listens on a Unix socket in the sandbox for kiln-build.mjs, keeps at most one builder
// (kiln-builder.mjs) and gives it one request at a time.
//
// - The socket is in the abstract namespace (SOCKET, exported for the client): no file the app's
//   code could replace, remove or put a folder in the way of, and gone with the container's
//   network namespace. It is bound before the dev server (the app's code) starts; a name taken
//   all the same (see docs/architecture.md) leaves the supervisor running without the service,
//   and the client, which checks whose listener it reached, builds as a new process.
//
// - {op: 'warm'} is answered at once; a builder is started (if none runs for the installed
//   packages) and builds into memory WARM_ROUNDS times, so the next build finds its Rollup cache
//   full (kiln-rollup-cache.mjs) and its JIT warm: V8 optimises Rollup's tree-shaking only after
//   a few builds (template app, 1 CPU: ~1.6 s, 0.9 s, 0.75 s, 0.7 s, then ~0.45 s). A build asked
//   for meanwhile goes before the rounds left. A builder warm already (it warmed up or built)
//   does nothing: its cache holds every dependency, and the app's own modules are transformed
//   at each build.
// - {op: 'build'} waits for its turn, then streams the build's output and {exit}; one that
//   comes early in a warm-up (PREEMPT_MS) stops it and builds on a new builder instead.
// - The installed packages changed since a builder started (kiln installed one): that builder
//   is replaced before it builds. A warm process never builds with packages it did not load.
// - A client that goes away while its build runs (kiln cancelled it) takes the builder with it:
//   a cancelled build never writes dist/ after the cancel.
// - A builder unused for IDLE_MS ends, so a sandbox holds its memory only while it is in use;
//   one whose warm-up takes over WARM_LIMIT_MS (a plugin waiting forever) is stopped.
import { fork } from 'node:child_process'
import net from 'node:net'
import { fileURLToPath } from 'node:url'

export const SOCKET_NAME = 'kiln-build'
export const SOCKET = `\0${SOCKET_NAME}` // abstract: Linux only, like the sandbox
const BUILDER = fileURLToPath(new URL('./kiln-builder.mjs', import.meta.url))
const IDLE_MS = 180000
const WARM_LIMIT_MS = 120000 // a warm-up nobody waits for must not hold the queue for good
// A build that comes this early in a warm-up takes its place: waiting for the rest of the
// warm-up and then building warm would take longer than building cold right away (template app
// in a 1-CPU sandbox: warm-up ~1.8 s, warm build ~1.1 s, cold build ~1.9 s).
const PREEMPT_MS = 1000
const HEAP_MB = 512 // a builder past this dies (a request then builds without it), not the sandbox
const WARM_ROUNDS = 4

function requestedOp(line) {
  try {
    return JSON.parse(line).op
  } catch {
    return null
  }
}

export function startBuildService({ workspace, fingerprint, say }) {
  let builder = null // { child, packages, warm }
  let queue = Promise.resolve()
  let idleTimer = null
  let pending = 0 // requests queued or running
  let warming = null // { builder, since } while a warm-up runs
  let buildsWaiting = 0 // build requests queued, not yet started

  function stopBuilder(reason) {
    if (!builder) return
    say(`resident builder stopped (${reason})`)
    try {
      process.kill(-builder.child.pid, 'SIGKILL') // with its esbuild service
    } catch {
      // already gone
    }
    builder = null
  }

  function currentBuilder() {
    if (builder && builder.packages !== fingerprint()) stopBuilder('packages changed')
    if (builder) return builder
    const child = fork(BUILDER, [], {
      cwd: workspace,
      detached: true, // its own process group: it ends with its esbuild service
      execArgv: [`--max-old-space-size=${HEAP_MB}`],
      stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
    })
    const started = { child, packages: fingerprint(), warm: false }
    child.on('exit', () => builder === started && (builder = null))
    child.on('error', () => builder === started && (builder = null))
    builder = started
    return started
  }

  // Runs one request on the builder; resolves with the exit code, or null if the builder died.
  function run(op, onOutput) {
    const current = currentBuilder()
    return new Promise((resolve) => {
      const onMessage = (message) => {
        if (message.done) finish(message.code)
        else if (message.out !== undefined || message.err !== undefined) onOutput(message)
      }
      const onExit = () => finish(null)
      function finish(code) {
        current.child.off('message', onMessage)
        current.child.off('exit', onExit)
        resolve(code)
      }
      current.child.on('message', onMessage)
      current.child.on('exit', onExit)
      current.child.send({ op }, (error) => error && finish(null))
    })
  }

  function enqueue(job) {
    clearTimeout(idleTimer)
    pending += 1
    queue = queue
      .then(job)
      .catch((error) => say(`resident builder: ${error.message}`))
      .finally(() => {
        pending -= 1
        if (pending === 0) idleTimer = setTimeout(() => stopBuilder('idle'), IDLE_MS)
      })
  }

  function warm() {
    enqueue(async () => {
      const current = currentBuilder()
      if (current.warm) return
      const limit = setTimeout(() => stopBuilder('its warm-up took too long'), WARM_LIMIT_MS)
      warming = { builder: current, since: Date.now() }
      let rounds = 0
      while (rounds < WARM_ROUNDS && buildsWaiting === 0) {
        if ((await run('warm', () => {})) === null || builder !== current) break
        rounds += 1
        current.warm = true
      }
      if (rounds) say(`resident builder warmed up (${rounds} of ${WARM_ROUNDS} builds)`)
      warming = null
      clearTimeout(limit)
    })
  }

  function build(socket) {
    let gone = false
    socket.on('close', () => (gone = true))
    if (warming && warming.builder === builder && Date.now() - warming.since < PREEMPT_MS) {
      stopBuilder('a build came early in its warm-up')
    }
    buildsWaiting += 1
    enqueue(async () => {
      buildsWaiting -= 1
      if (gone) return
      const send = (message) => socket.write(`${JSON.stringify(message)}\n`)
      const current = currentBuilder()
      const cancel = () => builder === current && stopBuilder('its build was cancelled')
      socket.on('close', cancel)
      const code = await run('build', send)
      socket.off('close', cancel)
      if (code === null) return socket.destroy() // the client builds without us
      current.warm = true
      socket.end(`${JSON.stringify({ exit: code })}\n`)
    })
  }

  const server = net.createServer((socket) => {
    let text = ''
    socket.setEncoding('utf8')
    socket.on('error', () => {})
    socket.on('data', (chunk) => {
      text += chunk
      if (!text.includes('\n')) return
      socket.removeAllListeners('data')
      const op = requestedOp(text.slice(0, text.indexOf('\n')))
      if (op === 'warm') {
        socket.end(`${JSON.stringify({ exit: 0 })}\n`)
        warm()
      } else if (op === 'build') build(socket)
      else socket.destroy() // not kiln-build.mjs: the supervisor must not fall over on it
    })
  })
  // Bound at once (a Unix socket binds within listen()), before the dev server starts. An error
  // is the name taken: kiln builds without the service then, and the dev server still runs.
  server.on('error', (error) => say(`resident builder unavailable (${error.code}): kiln builds without it`))
  server.listen(SOCKET)
  return { stop: () => stopBuilder('the sandbox stops') }
}
