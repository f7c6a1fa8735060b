/**
 * This folder's own npm project (package.json beside this file): outside
 * tools and libraries svc is checked against that are too big for every
 * contributor's install. `npm run test:interop` installs them and runs the
 * folder's tests. Without them a run of the folder skips those tests and says so;
 * under CI (`CI` set) they run, and fail if the install is missing.
 */
import { existsSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname } from "node:path"
import { fileURLToPath } from "node:url"

/** Resolves and loads packages from this folder's project, not the repository's. */
export const interopRequire = createRequire(fileURLToPath(new URL("package.json", import.meta.url)))

export const packageDir = (require: NodeJS.Require, name: string) => dirname(require.resolve(`${name}/package.json`))

export const ci = process.env.CI !== undefined && process.env.CI !== "" && process.env.CI !== "0" &&
  process.env.CI !== "false"

/** Whether every one of `names` is installed in this folder's project (some do not export their package.json). */
export const installed = (...names: ReadonlyArray<string>) =>
  names.every((name) => existsSync(fileURLToPath(new URL(`node_modules/${name}/package.json`, import.meta.url))))

/**
 * Whether a file's tests run: its packages are installed, or CI runs them
 * anyway (and fails without them). Otherwise it says once what it skips.
 */
export const runs = (file: string, what: string, ...names: ReadonlyArray<string>) => {
  if (installed(...names) || ci) return true
  console.warn(`${file} skips ${what}: not installed (npm run test:interop installs them and runs it).`)
  return false
}
