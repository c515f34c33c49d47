// A tiny static file server for the vanilla template: no dependencies, no caching (files change
// under it while the app is generated), listens on 0.0.0.0 so kiln's preview proxy can reach it.
// `node server.js --check` is the template's "build": it only checks that index.html exists.
'use strict'

const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')

const ROOT = __dirname
const PORT = Number(process.env.PORT || 8080)
const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
}

function resolveRequest(url) {
  let pathname
  try {
    pathname = decodeURIComponent(new URL(url, 'http://localhost').pathname)
  } catch {
    return null
  }
  const file = path.join(ROOT, path.normalize(pathname))
  // Never serve outside the workspace, nor its dependencies.
  if (file !== ROOT && !file.startsWith(ROOT + path.sep)) return null
  if (file.startsWith(path.join(ROOT, 'node_modules'))) return null
  return file
}

function send(res, status, body, type) {
  res.writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store' })
  res.end(body)
}

function handle(req, res) {
  const file = resolveRequest(req.url)
  if (file === null) return send(res, 400, 'bad path\n', TYPES['.txt'])
  fs.stat(file, (statError, stat) => {
    const target = !statError && stat.isDirectory() ? path.join(file, 'index.html') : file
    fs.readFile(target, (readError, body) => {
      if (readError) return send(res, 404, 'not found\n', TYPES['.txt'])
      const type = TYPES[path.extname(target).toLowerCase()] || 'application/octet-stream'
      send(res, 200, req.method === 'HEAD' ? '' : body, type)
    })
  })
}

if (process.argv.includes('--check')) {
  if (!fs.existsSync(path.join(ROOT, 'index.html'))) {
    console.error('index.html is missing')
    process.exit(1)
  }
  console.log('index.html present; a static site needs no build')
} else {
  http.createServer(handle).listen(PORT, '0.0.0.0', () => {
    console.log(`serving ${ROOT} on http://0.0.0.0:${PORT}`)
  })
}
