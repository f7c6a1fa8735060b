/**
 * Deno, Bun and workerd from this folder's own npm project (package.json
 * here; `npm run test:runtimes` installs it). Which of them are installed,
 * and whether a missing one is a skip (a contributor's run) or a
 * failure (CI).
 */
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const runtimesRequire = createRequire(fileURLToPath(new URL("package.json", import.meta.url)))

/** The executable a package's `bin` names (by default from this folder's node_modules). */
export const binOf = (name: string, bin = name, from = runtimesRequire): string => {
  const manifestPath = from.resolve(`${name}/package.json`)
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8"))
  const relative = typeof manifest.bin === "string" ? manifest.bin : manifest.bin[bin]
  return join(dirname(manifestPath), relative)
}

const installed = (name: string): boolean => {
  try {
    binOf(name)
    return true
  } catch {
    return false
  }
}

export const ci = process.env.CI !== undefined && process.env.CI !== "" && process.env.CI !== "0" &&
  process.env.CI !== "false"

/** The runtimes of `names` that are not installed, said once per test file when they are skipped. */
export const missingRuntimes = (what: string, names: ReadonlyArray<"Deno" | "Bun" | "workerd">): Array<string> => {
  const missing = names.filter((name) => !installed(name.toLowerCase()))
  if (missing.length > 0 && !ci) {
    console.warn(
      `${what} skips ${missing.join(", ")}: not installed (npm run test:runtimes installs them and runs it).`
    )
  }
  return missing
}
