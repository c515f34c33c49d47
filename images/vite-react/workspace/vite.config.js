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
// - No restart here when package.json changes (kiln installs packages while the preview is
//   open): the sandbox's supervisor (/usr/local/lib/kiln/kiln-dev.mjs) starts the dev server
//   over as a new process, which Vite's in-process restart could not always do.

export default defineConfig({
  plugins: [react()],
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
