// The dev server runs inside a kiln sandbox behind kiln's preview proxy. Next 14's dev server
// accepts any Host header, and its HMR websocket (/_next/webpack-hmr) uses the page's own origin,
// so nothing proxy-specific is needed here. File watching polls (WATCHPACK_POLLING, set in the
// image), because files arrive through `docker put_archive`.
/** @type {import('next').NextConfig} */
const nextConfig = {
  reactStrictMode: true,
}

export default nextConfig
