/**
 * A module of another checkout by its path under `src/`, for the in-process
 * comparisons: a checkout older than the `database/` folder keeps the
 * database's modules under `platform/`.
 */
import { existsSync } from "node:fs"
import * as path from "node:path"
import { pathToFileURL } from "node:url"

export const checkoutModule = (root: string, file: string): string => {
  const at = path.resolve(root, "src", file)
  const older = path.resolve(root, "src", file.replace(/^database\/(embedded\/)?/, "platform/"))
  return pathToFileURL(existsSync(at) || !file.startsWith("database/") ? at : older).href
}
