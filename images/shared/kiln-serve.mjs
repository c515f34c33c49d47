// kiln's dev-server supervisor for the templates without one of their own (vanilla, nextjs):
// the sandbox's main process (under Docker's --init), running `npm run dev` in /workspace with
// the app's environment, started again when it crashes and started over when kiln rewrites
// that environment (kiln-dev-process.mjs). Plain Node, no dependencies, outside the workspace
// so that a generated app cannot replace it. (vite-react's kiln-dev.mjs does the same and more:
// package changes, source locations, the resident builder.)
// SIGTERM/SIGINT/SIGHUP (docker stop): the dev server's process group is stopped, then this
// process exits.
import { DevProcess } from './kiln-dev-process.mjs'

const POLL_MS = 250

const dev = new DevProcess({
  workspace: process.env.KILN_WORKSPACE || '/workspace',
  command: () => ['npm', ['run', 'dev']],
})

for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, () => dev.stop())
setInterval(() => dev.followAppEnv(), POLL_MS)
dev.start()
