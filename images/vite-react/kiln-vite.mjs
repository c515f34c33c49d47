// kiln's dev server: what `vite` (the template's `npm run dev`) does, with kiln's source-location
// plugin (kiln-source.mjs) added to the project's own config. Started by the supervisor
// (kiln-dev.mjs) when the dev script is plain `vite`, with the project's Vite binary as its
// argument (the Vite it runs); any other dev script runs as written, without source locations.
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { kilnSource } from './kiln-source.mjs'

const WORKSPACE = process.env.KILN_WORKSPACE || '/workspace'

const started = performance.now()

// The Vite to run is named by its binary (argv[2], the project's node_modules/vite/bin/vite.js);
// its package says its version and where its ES module entry is.
function viteModule(binary) {
  const folder = path.dirname(path.dirname(binary))
  const manifest = JSON.parse(readFileSync(path.join(folder, 'package.json'), 'utf8'))
  const exported = manifest.exports['.']
  const entry = typeof exported === 'string' ? exported : exported.import.default || exported.import
  return { version: manifest.version, url: pathToFileURL(path.join(folder, entry)).href }
}

// What the `vite` command prints and does (its "ready in" line included: tests and people read it).
async function serve() {
  const vite = viteModule(process.argv[2])
  const { createServer } = await import(vite.url)
  const server = await createServer({ root: WORKSPACE, plugins: [kilnSource({ workspace: WORKSPACE })] })
  await server.listen()
  server.config.logger.info(`\n  VITE v${vite.version}  ready in ${Math.ceil(performance.now() - started)} ms\n`)
  server.printUrls()
}

try {
  await serve()
} catch (error) {
  console.error(`error when starting dev server:\n${error.stack}`)
  process.exit(1)
}
