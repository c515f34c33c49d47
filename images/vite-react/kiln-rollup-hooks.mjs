// Node module hooks of kiln's resident builder (registered by kiln-rollup-cache.mjs, run on
// Node's loader thread): Vite's own `import('rollup')` gets a module that is Rollup with its
// rollup() passed through the builder's cache, everything else as Rollup exports it. Only
// Vite's import is redirected: the app's config and plugins get Rollup as it is.
const SHIM = 'file:///kiln-rollup-with-cache.mjs?rollup='
const CACHE = new URL('./kiln-rollup-cache.mjs', import.meta.url).href

export async function resolve(specifier, context, nextResolve) {
  const fromVite = context.parentURL?.includes('/node_modules/vite/dist/node/')
  if (specifier !== 'rollup' || !fromVite) return nextResolve(specifier, context)
  const rollup = await nextResolve(specifier, context)
  return { url: SHIM + encodeURIComponent(rollup.url), format: 'module', shortCircuit: true }
}

export async function load(url, context, nextLoad) {
  if (!url.startsWith(SHIM)) return nextLoad(url, context)
  const rollup = JSON.stringify(decodeURIComponent(url.slice(SHIM.length)))
  const source = [
    `export * from ${rollup}`, // a local export of the same name wins over this one
    `import { rollup as uncached } from ${rollup}`,
    `import { cachedRollup } from ${JSON.stringify(CACHE)}`,
    `export const rollup = (options) => cachedRollup(uncached, options)`,
  ].join('\n')
  return { format: 'module', source, shortCircuit: true }
}
