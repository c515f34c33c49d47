// `node /usr/local/lib/kiln/kiln-build.mjs [--warm]`: what kiln runs (docker exec) to build the
// app with the sandbox's resident builder (kiln-build-service.mjs) instead of a new `vite build`.
//
// - build: the output of `vite build` and its exit code. The output is printed when the build
//   is over (kiln keeps a build ahead's output to replay it anyway), so that a resident builder
//   lost halfway (out of memory, or the service is not there) leaves no half output: this then
//   runs `vite build` itself, as kiln did before, and prints what that prints.
// - --warm: asks the service to start a builder and warm it up; returns at once.
// Killing this process (kiln cancels a build whose files changed) ends the build it asked for.
import { spawn } from 'node:child_process'
import net from 'node:net'

const SOCKET = process.env.KILN_BUILD_SOCKET || '/tmp/kiln-build.sock'
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

function ask() {
  const output = []
  let pending = ''
  let code = null
  const connection = net.createConnection(SOCKET)
  connection.setEncoding('utf8')
  connection.on('connect', () => connection.write(`${JSON.stringify({ op })}\n`))
  connection.on('data', (text) => {
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
