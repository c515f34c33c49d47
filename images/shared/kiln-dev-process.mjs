// One dev server as a supervised process group, for kiln's supervisors (vite-react's
// kiln-dev.mjs; vanilla's and nextjs's kiln-serve.mjs). Plain Node, no dependencies.
//
// - Started with the app's environment (kiln-app-env.mjs) in a process group of its own: npm,
//   the shell and the server (Vite with esbuild, Next's workers) end together.
// - Starting over and stopping wait until every process of the group is gone (SIGTERM, then
//   SIGKILL after a grace period), so the next one finds its port free.
// - A dev server that exits on its own (a crash, an unhandled rejection while files were half
//   written) is started again after a pause that grows while it keeps failing, so the preview
//   comes back without anyone asking.
// - The app's environment changed (kiln rewrote the chat's variables): it starts over, since a
//   running process cannot take new environment.
import { spawn } from 'node:child_process'
import { appEnvFingerprint, appEnvironment } from './kiln-app-env.mjs'

const STOP_GRACE_MS = 3000
const CRASH_PAUSES_MS = [500, 1000, 2000, 5000]
const STEADY_MS = 30000 // a dev server up this long has stopped crashing

export function say(message) {
  console.log(`[kiln] ${message}`)
}

export class DevProcess {
  // `command()` gives [command, args] at each start; `beforeStart()` runs as each one starts
  // (what the supervisor records of what the new process is started with).
  constructor({ workspace, command, beforeStart = () => {} }) {
    this.workspace = workspace
    this.command = command
    this.beforeStart = beforeStart
    this.child = null
    this.wanted = 'running' // 'running' | 'restarting' | 'stopping'
    this.crashes = 0
    this.startedAt = 0
    this.servedEnv = appEnvFingerprint() // the app environment the running one has
  }

  // Whether a dev server is (meant to be) running now: not stopping, not starting over.
  get running() {
    return this.child !== null && this.wanted === 'running'
  }

  start() {
    this.wanted = 'running'
    this.startedAt = Date.now()
    this.beforeStart()
    this.servedEnv = appEnvFingerprint()
    const env = { ...process.env, ...appEnvironment() }
    const [command, args] = this.command()
    const started = spawn(command, args, { cwd: this.workspace, env, stdio: 'inherit', detached: true })
    started.on('exit', (code, signal) => this.exited(started, code, signal))
    started.on('error', (error) => say(`could not start the dev server: ${error.message}`))
    this.child = started
  }

  // A new process in place of this one, once its whole group is gone.
  startOver(reason) {
    say(`${reason}: restarting the dev server`)
    this.wanted = 'restarting'
    if (this.ended()) return this.start() // between crashes
    signalGroup(this.child.pid, 'SIGTERM') // `exited` starts the new one once the group is gone
  }

  // Called at each poll: starts over when kiln rewrote the app's environment.
  followAppEnv() {
    if (this.running && appEnvFingerprint() !== this.servedEnv) {
      this.startOver("the app's environment changed")
    }
  }

  // docker stop: the group is stopped, then this process exits.
  stop() {
    this.wanted = 'stopping'
    if (!this.child || this.ended()) process.exit(0)
    signalGroup(this.child.pid, 'SIGTERM')
  }

  ended() {
    return this.child.exitCode !== null || this.child.signalCode !== null
  }

  async exited(which, code, signal) {
    if (which !== this.child) return
    await stopGroup(which.pid) // what the group left behind (a server still closing its port)
    if (this.wanted === 'stopping') process.exit(0)
    if (this.wanted === 'restarting') return this.start()
    this.crashes = Date.now() - this.startedAt > STEADY_MS ? 1 : this.crashes + 1
    const pause = CRASH_PAUSES_MS[Math.min(this.crashes, CRASH_PAUSES_MS.length) - 1]
    say(`the dev server exited (${signal || `code ${code}`}); starting it again in ${pause} ms`)
    setTimeout(() => this.wanted === 'running' && this.child === which && this.start(), pause)
  }
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
