import path from 'node:path'
import { defineConfig } from 'vite'
import react from '@vitejs/plugin-react'

// The dev server runs inside a kiln sandbox and is reached through kiln's preview proxy:
// - host: true / allowedHosts: true: listen on 0.0.0.0 and accept any Host header, because the
//   preview is served at an arbitrary name (<sandbox>.preview.<host>).
// - hmr is left at its defaults on purpose: without hmr.clientPort / hmr.host the browser opens
//   the HMR websocket to the page's own host and port, i.e. through the same proxy.
//   (The HMR websocket URL carries Vite's ?token=...; a proxy forwards path and query as is.)
// - watch.usePolling: files arrive through `docker put_archive` into a volume, written by the
//   Docker daemon outside the container; inotify events do not reach the container on every
//   Docker setup. Polling a small app costs well under 1% CPU; CHOKIDAR_USEPOLLING=false
//   turns it off.
// - restartOnInstall: kiln installs packages while the app is being written and the preview is
//   open. Left alone, Vite discovers the new package mid-session and re-bundles its dependencies
//   under pages already loaded; now and then a page then got React twice (old and new `?v=`
//   hashes: "Invalid hook call", a blank app even after a reload) or kept failing to resolve the
//   package. A dev server whose package.json changed starts over instead (about a second; its
//   pages reload when their HMR socket reconnects), with one consistent set of dependencies.
//   One restart per burst of changes (npm may write the file more than once), never two at once
//   (a second one would find the port taken), and a failed one is logged, not fatal.
const RESTART_DEBOUNCE_MS = 300

function restartOnInstall() {
  let timer = null
  let restarting = Promise.resolve()
  return {
    name: 'kiln:restart-on-install',
    apply: 'serve',
    configureServer(server) {
      const manifest = path.resolve(server.config.root, 'package.json')
      server.watcher.on('change', (file) => {
        if (path.resolve(file) !== manifest) return
        clearTimeout(timer)
        timer = setTimeout(() => {
          restarting = restarting
            .then(() => {
              // Vite's close() waits for every request in flight; one waiting for the dependency
              // optimizer being closed would wait forever, the port closed: forget them (their
              // browsers reload with the restart anyway).
              server._pendingRequests?.clear()
              return server.restart()
            })
            .catch((error) => server.config.logger.error(`restart failed: ${error}`))
        }, RESTART_DEBOUNCE_MS)
      })
    },
  }
}

export default defineConfig({
  plugins: [react(), restartOnInstall()],
  server: {
    host: true,
    port: 5173,
    strictPort: true,
    allowedHosts: true,
    watch: { usePolling: true, interval: 150 },
  },
  preview: {
    host: true,
    port: 5173,
    strictPort: true,
    allowedHosts: true,
  },
})
