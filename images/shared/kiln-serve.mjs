// kiln's dev-server supervisor for the templates without one of their own (vanilla, nextjs):
// the sandbox's main process (under Docker's --init), running `npm run dev` in /workspace with
// the app's environment. Plain Node, no dependencies, outside the workspace so that a generated
// app cannot replace it. (vite-react's kiln-dev.mjs does the same and more: package changes, the
// resident builder.)
//
// - The app's environment (kiln-app-env.mjs: the chat's variables, written by kiln to a tmpfs
//   outside the workspace) is the dev server's: it starts over as a new process when kiln
//   rewrites it, since a running process cannot take new environment.
// - The dev server exited on its own (a crash): it is started again after a short pause that
//   grows while it keeps failing.
// - SIGTERM/SIGINT/SIGHUP (docker stop): the dev server's process group is stopped (SIGTERM,
//   then SIGKILL after a grace period), then this process exits.
import { spawn } from 'node:child_process'
import { appEnvFingerprint, appEnvironment } from './kiln-app-env.mjs'

const WORKSPACE = process.env.KILN_WORKSPACE || '/workspace'
const POLL_MS = 250
const STOP_GRACE_MS = 3000
const CRASH_PAUSES_MS = [500, 1000, 2000, 5000]
const STEADY_MS = 30000 // a dev server up this long has stopped crashing

let child = null
let wanted = 'running' // 'running' | 'restarting' | 'stopping'
let crashes = 0
let startedAt = 0
let servedEnv = appEnvFingerprint() // the app environment the running dev server has

function say(message) {
  console.log(`[kiln] ${message}`)
}

function start() {
  wanted = 'running'
  startedAt = Date.now()
  servedEnv = appEnvFingerprint()
  const env = { ...process.env, ...appEnvironment() }
  // Its own process group: npm, the shell and the server (Next's workers) end together.
  const started = spawn('npm', ['run', 'dev'], { cwd: WORKSPACE, env, stdio: 'inherit', detached: true })
  started.on('exit', (code, signal) => exited(started, code, signal))
  started.on('error', (error) => say(`could not start the dev server: ${error.message}`))
  child = started
}

function groupAlive(pid) {
  try {
    process.kill(-pid, 0)
    return true
  } catch {
    return false
  }
}

function signalGroup(pid, signal) {
  try {
    process.kill(-pid, signal)
  } catch {
    // already gone
  }
}

// Resolves once every process of the group is gone (the port is free again).
function stopGroup(pid) {
  signalGroup(pid, 'SIGTERM')
  const deadline = Date.now() + STOP_GRACE_MS
  return new Promise((resolve) => {
    const check = () => {
      if (!groupAlive(pid)) return resolve()
      if (Date.now() > deadline) signalGroup(pid, 'SIGKILL')
      setTimeout(check, 50)
    }
    check()
  })
}

async function exited(which, code, signal) {
  if (which !== child) return
  await stopGroup(which.pid) // what the group left behind (a server still closing its port)
  if (wanted === 'stopping') process.exit(0)
  if (wanted === 'restarting') return start()
  crashes = Date.now() - startedAt > STEADY_MS ? 1 : crashes + 1
  const pause = CRASH_PAUSES_MS[Math.min(crashes, CRASH_PAUSES_MS.length) - 1]
  say(`the dev server exited (${signal || `code ${code}`}); starting it again in ${pause} ms`)
  setTimeout(() => wanted === 'running' && child === which && start(), pause)
}

function poll() {
  if (!child || wanted !== 'running' || appEnvFingerprint() === servedEnv) return
  servedEnv = appEnvFingerprint()
  say("the app's environment changed: restarting the dev server")
  wanted = 'restarting'
  if (child.exitCode !== null || child.signalCode !== null) return start() // between crashes
  signalGroup(child.pid, 'SIGTERM') // `exited` starts the new one once the group is gone
}

function shutdown() {
  wanted = 'stopping'
  if (!child || child.exitCode !== null || child.signalCode !== null) process.exit(0)
  signalGroup(child.pid, 'SIGTERM')
}

for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, shutdown)
setInterval(poll, POLL_MS)
start()
