/**
 * Speeds up: the installed `svc` command (`bin/svc.js`), which runs this
 * bundle of `src/cli/main.ts` and, for `svc start`, of `src/main.ts`,
 * instead of dist/'s module tree. A process loaded about 244 modules, 203
 * of them Effect's, and spent most of its time resolving and reading them
 * (package.json lookups, file stats, URL work). Two-core machine,
 * `/usr/bin/time`, five runs each, alternated: `svc --help` 0.32-0.59 s to
 * 0.15-0.21 s, `svc orgs create` on the embedded database (no server)
 * 1.02-1.24 s to 0.69-0.81 s; `svc start` on a migrated embedded database,
 * until it listens (four starts each): 1.51-1.63 CPU-s to 1.25-1.39, and
 * 1.21-1.27 s to 0.99-1.10 s.
 *
 * What is bundled: svc's own modules, Effect and the `@effect/*` packages,
 * in one module graph, so that a process holds a single copy of Effect.
 * Every other package stays an import of node_modules (PGlite finds its
 * WebAssembly beside its own files). Entry points: the CLI, the server, and
 * each module svc starts as a worker thread, all in one folder, since a
 * worker is found beside the module that starts it
 * (`src/platform/ModuleUrl.ts`). The folder sits two below the package, as
 * `src/server/` does: the server finds the console's build at
 * `../../console/dist`.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { build } from "rolldown"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

/**
 * The bundle's entry points by output name: the CLI, the server `svc start`
 * runs, and every module started as a worker thread or a child process
 * (named by its file, as `siblingModule` finds them): the rule workers are
 * child processes of `compile-cached` running `rule-worker`.
 */
export const BUNDLE_ENTRIES = {
  main: "src/cli/main.ts",
  server: "src/main.ts",
  "compile-cached": "src/platform/compile-cached.ts",
  "embedded-worker": "src/database/embedded/embedded-worker.ts",
  "validation-worker": "src/tasks/validation-worker.ts",
  "correction-worker": "src/feedback/correction-worker.ts",
  "rule-worker": "src/approvals/rule-worker.ts",
  "process-forker": "src/platform/process-forker.ts"
} as const

/** Bundled: svc's own modules and Effect's packages; every other bare specifier stays external. */
const external = (specifier: string) =>
  /^[^./]/.test(specifier) && !path.isAbsolute(specifier) &&
  !(specifier === "effect" || specifier.startsWith("effect/") || specifier.startsWith("@effect/"))

/**
 * Writes the bundle into `outDir` (dist/cli-bundle).
 * A module Effect imports dynamically is a chunk of its own even when
 * nothing the bundle keeps imports it (Effect's API reference pages): only
 * the files an entry point reaches are written.
 */
export const bundleCli = async (outDir: string): Promise<void> => {
  const { output } = await build({
    cwd: root,
    input: BUNDLE_ENTRIES,
    platform: "node",
    external,
    transform: { target: "node22" },
    logLevel: "warn",
    write: false,
    output: { format: "esm", entryFileNames: "[name].js", chunkFileNames: "chunk-[hash].js" }
  })
  const chunks = new Map(output.flatMap((file) => (file.type === "chunk" ? [[file.fileName, file] as const] : [])))
  const reached = new Set<string>()
  const visit = (fileName: string) => {
    const chunk = chunks.get(fileName)
    if (reached.has(fileName) || chunk === undefined) return
    reached.add(fileName)
    for (const imported of [...chunk.imports, ...chunk.dynamicImports]) visit(imported)
  }
  for (const chunk of chunks.values()) if (chunk.isEntry) visit(chunk.fileName)
  fs.mkdirSync(outDir, { recursive: true })
  for (const fileName of reached) fs.writeFileSync(path.join(outDir, fileName), chunks.get(fileName)!.code)
  const assets = output.filter((file) => file.type === "asset")
  if (assets.length > 0) throw new Error(`unexpected assets in the bundle: ${assets.map((a) => a.fileName).join(", ")}`)
}
