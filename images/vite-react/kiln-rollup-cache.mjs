// Incremental builds in kiln's resident builder (kiln-builder.mjs): Rollup's own cache kept from
// one build to the next, so a build after a one-file edit transforms that file, not the app's
// dependencies again (react-dom's CommonJS transform is most of a warm build's plugin work).
//
// Vite's build() makes its Rollup bundle itself and does not hand it out, so its rollup() is
// wrapped (kiln-rollup-hooks.mjs): each build gets the cache of the last one that got as far as
// a bundle (a build that fails before keeps the one before) and leaves its own.
//
// Which cached modules are used as they are: Rollup reuses a module's transformed code only when
// the module's source is what it was, but Vite's plugins keep per-build state of what they
// transform (the CSS of each module, workers, glob imports) and the builder resolves a new config,
// with new plugins, for each build. So only the dependencies' plain JavaScript is reused; the
// app's own modules, virtual modules and anything with a query are transformed each time (a few
// small files). Installed packages never change under a builder: the service starts a new one,
// with an empty cache, when they do.
import { register } from 'node:module'

const DEPENDENCY_SCRIPT = /\/node_modules\/[^?\0]*\.[cm]?jsx?$/
let cache // Rollup's cache of the last bundle, or undefined

// Vite's rollup(), through the cache (called from the module kiln-rollup-hooks.mjs makes).
export async function cachedRollup(rollup, options) {
  const bundle = await rollup({ ...options, cache })
  cache = bundle.cache
  return bundle
}

/** Vite's imports of Rollup go through cachedRollup() from now on (call before importing Vite). */
export function useRollupCache() {
  try {
    register(new URL('./kiln-rollup-hooks.mjs', import.meta.url))
  } catch {
    // a Node without module hooks (before 20.6): every build is a full one, as before
  }
}

/** A plugin for each build: which cached modules must be transformed again (Vite's output says
 * how many were: "N modules transformed"). */
export function cacheRule() {
  return {
    name: 'kiln:rollup-cache',
    // First: Rollup asks until a plugin answers, and some answer false for what they do not
    // transform (CommonJS's), which would reuse the app's own modules too.
    shouldTransformCachedModule: {
      order: 'pre',
      handler: ({ id }) => (DEPENDENCY_SCRIPT.test(id) ? null : true),
    },
  }
}
