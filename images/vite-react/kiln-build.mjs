// `node /usr/local/lib/kiln/kiln-build.mjs [--warm]`: what kiln runs (docker exec) to build the
// app with the sandbox's resident builder (kiln-build-service.mjs) instead of a new `vite build`.
//
// - build: the output of `vite build` and its exit code. The output is printed when the build
//   is over (kiln keeps a build ahead's output to replay it anyway), so that a resident builder
//   lost halfway (out of memory, or the service is not there) leaves no half output: this then
//   runs `vite build` itself, as kiln did before, and prints what that prints.
// - --warm: asks the service to start a builder and warm it up; returns at once.
// Killing this process (kiln cancels a build whose files changed) ends the build it asked for.
//
// The app's code runs as the same user as the supervisor and could listen on the service's name
// first: an answer counts only from the supervisor's own listener (servedBySupervisor). Any
// other listener is left at once, and the app is built as a new process.
import { spawn } from 'node:child_process'
import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import net from 'node:net'
import { SOCKET, SOCKET_NAME } from './kiln-build-service.mjs'

const WORKSPACE = process.env.KILN_WORKSPACE || '/workspace'
const op = process.argv.includes('--warm') ? 'warm' : 'build'

function buildAlone() {
  if (op === 'warm') process.exit(0) // nothing to warm up without the service
  const vite = spawn('node', ['node_modules/vite/bin/vite.js', 'build'], {
    cwd: WORKSPACE,
    stdio: 'inherit',
  })
  vite.on('exit', (code, signal) => process.exit(signal ? 1 : code))
  process.on('SIGTERM', () => vite.kill('SIGKILL'))
}

// The inodes of the listening sockets that show as the service's name in this network namespace
// (the sandbox's own). Node pads an abstract name with NULs, and /proc shows a NUL and a real
// '@' alike: a look-alike name shows here too and makes the answer untrusted.
function listenerInodes() {
  const ACCEPTING = 0x10000 // __SO_ACCEPTCON: a listening socket
  return readFileSync('/proc/net/unix', 'utf8')
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields.length >= 8 && parseInt(fields[3], 16) & ACCEPTING)
    .filter((fields) => fields.slice(7).join(' ').replace(/@+$/, '') === `@${SOCKET_NAME}`)
    .map((fields) => fields[6])
}

// ppid and start time (clock ticks since boot) of a process, from /proc/PID/stat.
function processStat(pid) {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
  return { pid: Number(pid), ppid: Number(fields[1]), start: Number(fields[19]) }
}

// The supervisor: the container's first process after its init (Docker's --init runs it as the
// first child of PID 1), or PID 1 itself without an init. The app's processes start later: an
// orphan of theirs that PID 1 adopts is never the earliest child.
function supervisorPids() {
  const children = []
  for (const entry of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue
    try {
      const stat = processStat(entry)
      if (stat.ppid === 1) children.push(stat)
    } catch {
      // gone meanwhile
    }
  }
  children.sort((a, b) => a.start - b.start)
  const first = children.length && (children.length === 1 || children[0].start < children[1].start)
  return first ? [1, children[0].pid] : [1]
}

function holds(pid, inode) {
  try {
    return readdirSync(`/proc/${pid}/fd`).some((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`) === `socket:[${inode}]`
      } catch {
        return false
      }
    })
  } catch {
    return false
  }
}

// Whether the one listener with the service's name is the supervisor's. Checked once connected:
// the supervisor binds its name once, at its start, and keeps it while the container lives, so
// a listener it holds now is the one this connection reached.
function servedBySupervisor() {
  try {
    const inodes = listenerInodes()
    return inodes.length === 1 && supervisorPids().some((pid) => holds(pid, inodes[0]))
  } catch {
    return false // no /proc to tell: not trusted
  }
}

function ask() {
  const output = []
  let pending = ''
  let code = null
  let trusted = false
  const connection = net.createConnection(SOCKET)
  connection.setEncoding('utf8')
  connection.on('connect', () => {
    trusted = servedBySupervisor()
    if (trusted) return connection.write(`${JSON.stringify({ op })}\n`)
    // Said, so that a slower build has its reason in the output; 'close' follows, no answer.
    process.stderr.write(`[kiln] the builder's socket is not the supervisor's: building as a new process\n`)
    connection.destroy()
  })
  connection.on('data', (text) => {
    if (!trusted) return
    const lines = (pending + text).split('\n')
    pending = lines.pop()
    for (const line of lines) {
      const message = JSON.parse(line)
      if ('exit' in message) code = message.exit
      else output.push(message)
    }
  })
  connection.on('error', () => {}) // 'close' follows: no service, or it went away
  connection.on('close', () => {
    if (code === null) return buildAlone()
    for (const { out, err } of output) (out !== undefined ? process.stdout : process.stderr).write(out ?? err)
    process.exitCode = code
  })
}

ask()
