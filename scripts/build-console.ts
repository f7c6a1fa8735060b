/**
 * Builds the web console (`console/`) into `console/dist/`, which the server
 * answers at `/console/`. Run by `npm install` (`prepare`) and by `npm start`
 * (`prestart`, with `--if-stale`: only when a source is newer than the
 * build). The bundle has a content hash in its name, so browsers cache it
 * for good and a new build is picked up at the next page load.
 *
 *   node scripts/build-console.ts [--if-stale] [--quiet]
 */
import { transform as transformCss } from "lightningcss"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { gzipSync } from "node:zlib"
import { build } from "rolldown"
import { isOutdated } from "./build-packages.ts"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const consoleDir = path.join(root, "console")
const dist = path.join(consoleDir, "dist")
const stamp = path.join(dist, "build.json")
/** Everything the bundle is made of: the console and the API contract it imports. */
const sources = [
  path.join(consoleDir, "src"),
  path.join(consoleDir, "index.html"),
  path.join(root, "src/api"),
  path.join(root, "package-lock.json"),
  fileURLToPath(import.meta.url)
]

const args = new Set(process.argv.slice(2))

/** Whether a source of the bundle is newer than the last build (or there is none). */
export const isStale = () => isOutdated(stamp, sources)

export interface BuildReport {
  readonly script: string
  readonly style: string
  readonly bytes: number
  readonly gzipBytes: number
}

/** The browsers the console supports: what the script and the style sheet are lowered for. */
const BROWSERS = { chrome: 111, firefox: 115, safari: 16 } as const

export const buildConsole = async (): Promise<BuildReport> => {
  // The script: rolldown (Vite's bundler), JSX for Preact as console/tsconfig.json says.
  const { output } = await build({
    cwd: root,
    input: { app: path.join(consoleDir, "src/main.tsx") },
    platform: "browser",
    tsconfig: path.join(consoleDir, "tsconfig.json"),
    transform: {
      target: ["es2022", ...Object.entries(BROWSERS).map(([name, version]) => `${name}${version}`)],
      define: { "process.env.NODE_ENV": "\"production\"" }
    },
    logLevel: "warn",
    write: false,
    output: { format: "esm", minify: true, comments: false, entryFileNames: "[name]-[hash].js" }
  })
  // The style sheet: one file, minified by Lightning CSS (Vite's CSS minifier).
  const css = transformCss({
    filename: "style.css",
    code: fs.readFileSync(path.join(consoleDir, "src/style.css")),
    minify: true,
    targets: Object.fromEntries(Object.entries(BROWSERS).map(([name, version]) => [name, version << 16]))
  })
  const files = [
    ...output.map((file) => ({
      name: file.fileName,
      contents: file.type === "chunk" ? Buffer.from(file.code) : Buffer.from(file.source)
    })),
    {
      name: `style-${createHash("sha256").update(css.code).digest("base64url").slice(0, 8)}.css`,
      contents: Buffer.from(css.code)
    }
  ]
  const assets = path.join(dist, "assets")
  fs.rmSync(dist, { recursive: true, force: true })
  fs.mkdirSync(assets, { recursive: true })
  let script = ""
  let style = ""
  let bytes = 0
  let gzipBytes = 0
  for (const file of files) {
    fs.writeFileSync(path.join(assets, file.name), file.contents)
    if (file.name.endsWith(".js")) script = file.name
    if (file.name.endsWith(".css")) style = file.name
    bytes += file.contents.byteLength
    gzipBytes += gzipSync(file.contents, { level: 9 }).byteLength
  }
  fs.copyFileSync(path.join(consoleDir, "src/favicon.svg"), path.join(assets, "favicon.svg"))
  const template = fs.readFileSync(path.join(consoleDir, "index.html"), "utf8")
  const html = template.replace("%SCRIPT%", `/console/assets/${script}`).replace("%STYLE%", `/console/assets/${style}`)
  fs.writeFileSync(path.join(dist, "index.html"), html)
  const report: BuildReport = { script, style, bytes, gzipBytes }
  const digest = createHash("sha256").update(html).digest("hex").slice(0, 12)
  fs.writeFileSync(stamp, JSON.stringify({ ...report, index: digest }, null, 2) + "\n")
  return report
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (args.has("--if-stale") && !isStale()) {
    process.exit(0)
  }
  const report = await buildConsole()
  if (!args.has("--quiet")) {
    console.log(
      `console built into console/dist: ${(report.bytes / 1024).toFixed(1)} KiB, ${
        (report.gzipBytes / 1024).toFixed(1)
      } KiB gzip`
    )
  }
}
