// The app's environment (kiln's sandbox/execution/app_env.py): the chat's variables and
// secrets, which kiln writes as one JSON object to a root-owned tmpfs outside the workspace
// (never a file of the project). The dev server is started with it and started over when it
// changes (kiln-dev.mjs); the resident builder puts it into each build's environment
// (kiln-builder.mjs). Commands get it from the shell file next to it, sourced by their exec.
import { readFileSync, statSync } from 'node:fs'

export const APP_ENV_FILE = '/run/kiln/app-env.json'

// The variables ({} when kiln wrote none yet, or the file cannot be read): strings only.
export function appEnvironment() {
  let parsed
  try {
    parsed = JSON.parse(readFileSync(APP_ENV_FILE, 'utf8'))
  } catch {
    return {}
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return {}
  return Object.fromEntries(Object.entries(parsed).filter(([, value]) => typeof value === 'string'))
}

// Changes whenever kiln writes the file: it renames a new file into place (a new inode).
export function appEnvFingerprint() {
  try {
    const { ino, mtimeMs, size } = statSync(APP_ENV_FILE)
    return `${ino}:${mtimeMs}:${size}`
  } catch {
    return '-'
  }
}
