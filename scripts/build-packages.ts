/**
 * Builds svc's four packages to JavaScript and declarations, the compilers
 * running side by side:
 *
 * - `svc` (the repository root): src/ into dist/ (tsconfig.build.json),
 *   and the bundle its `svc` command runs into dist/cli-bundle/
 *   (scripts/bundle-cli.ts);
 *   the console (console/dist) is built by scripts/build-console.ts;
 * - `@svc/client` (packages/client): src/client.ts and what it imports
 *   (src/api/**) into packages/client/dist, checked to be nothing else and
 *   to import nothing but `effect`;
 * - `@svc/receiver` (packages/receiver): ES modules in dist/esm, CommonJS
 *   in dist/cjs;
 * - `@svc/testing` (packages/testing): nothing to compile (it re-exports
 *   `svc/testing`).
 *
 * Run by `npm install` (`prepare`, with the console, `--if-stale`: only the
 * packages whose sources changed since their build) and `npm run build`.
 *
 *   node scripts/build-packages.ts [server] [client] [receiver] [--if-stale]   (default: all)
 *   node scripts/build-packages.ts --pack <dir>                   (build, then `npm pack` the four into <dir>)
 *
 * The `svc` tarball is packed from a staged copy (`stageServer`): the
 * published package has no development scripts and links only to files it
 * ships.
 */
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { bundleCli } from "./bundle-cli.ts"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const tsc = path.join(root, "node_modules/typescript/bin/tsc")

/** The package folders, in the order their tarballs are packed. */
export const packageDirs = {
  server: root,
  client: path.join(root, "packages/client"),
  receiver: path.join(root, "packages/receiver"),
  testing: path.join(root, "packages/testing")
} as const

const compile = (project: string, outDir: string): Promise<void> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [tsc, "-p", project, "--outDir", outDir], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    child.on("error", reject)
    child.on("close", (code) =>
      code === 0 ? resolve() : reject(new Error(`tsc -p ${path.relative(root, project)} failed:\n${output}`)))
  })

const filesUnder = (dir: string): Array<string> =>
  fs.readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.join(entry.parentPath, entry.name))

/**
 * Declarations keep the source's `./x.ts` specifiers (only the JavaScript's
 * are rewritten); a consumer resolving `./x.ts` finds no such file, so they
 * become `./x.js` like the code beside them.
 */
const rewriteDeclarations = (dir: string) => {
  for (const file of filesUnder(dir).filter((name) => name.endsWith(".d.ts"))) {
    const text = fs.readFileSync(file, "utf8")
    const fixed = text.replace(/(from\s+|import\()(["'])(\.{1,2}\/[^"']+)\.ts\2/g, "$1$2$3.js$2")
    if (fixed !== text) fs.writeFileSync(file, fixed)
  }
}

/** The module specifiers a compiled file imports (static and dynamic), comments aside. */
export const importsOf = (code: string): Array<string> => {
  const withoutComments = code.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "")
  const patterns = [
    /^\s*(?:import|export)\s+(?:type\s+)?(?:\*(?:\s+as\s+\w+)?|\{[^}]*\}|\w+(?:\s*,\s*(?:\{[^}]*\}|\*\s+as\s+\w+))?)\s+from\s*["']([^"']+)["']/gm,
    /^\s*import\s*["']([^"']+)["']/gm,
    /\bimport\(\s*["']([^"']+)["']\s*\)/g,
    /\brequire\(\s*["']([^"']+)["']\s*\)/g
  ]
  return patterns.flatMap((pattern) => [...withoutComments.matchAll(pattern)].map((match) => match[1]!))
}

/**
 * The client package is the contract and the client only: its build holds
 * client.* and api/** and imports nothing outside itself but `effect`.
 */
export const checkClientClosure = (dist: string): Array<string> => {
  const problems: Array<string> = []
  for (const file of filesUnder(dist)) {
    const relative = path.relative(dist, file).split(path.sep).join("/")
    if (!/^client\.(js|d\.ts)$/.test(relative) && !relative.startsWith("api/")) {
      problems.push(`${relative}: not src/client.ts nor src/api/**`)
    }
    if (!/\.(js|d\.ts)$/.test(relative)) continue
    for (const specifier of importsOf(fs.readFileSync(file, "utf8"))) {
      if (specifier.startsWith(".")) continue
      if (specifier !== "effect" && !specifier.startsWith("effect/")) problems.push(`${relative} imports ${specifier}`)
    }
  }
  return problems
}

/** The newest modification time under `entries` (files and folders, recursively). */
const newest = (entries: ReadonlyArray<string>): number =>
  Math.max(
    0,
    ...entries.flatMap((entry) => {
      const stat = fs.statSync(entry, { throwIfNoEntry: false })
      if (stat === undefined) return []
      return stat.isDirectory() ? [newest(fs.readdirSync(entry).map((name) => path.join(entry, name)))] : [stat.mtimeMs]
    })
  )

/** What each build is made of, and the file whose time says when it was built. */
const inputs = {
  server: { sources: ["src", "tsconfig.json", "tsconfig.build.json", "package-lock.json"], stamp: "dist/main.js" },
  client: {
    sources: ["src/client.ts", "src/api", "packages/client/tsconfig.json", "package-lock.json"],
    stamp: "packages/client/dist/client.js"
  },
  receiver: {
    sources: ["packages/receiver/src", "packages/receiver/tsconfig.json", "packages/receiver/tsconfig.cjs.json"],
    stamp: "packages/receiver/dist/cjs/package.json"
  }
} as const

/** Whether the build whose file is `stamp` is missing or older than a file under `sources` (absolute paths). */
export const isOutdated = (stamp: string, sources: ReadonlyArray<string>): boolean => {
  const built = fs.statSync(stamp, { throwIfNoEntry: false })
  return built === undefined || built.mtimeMs < newest(sources)
}

const isStale = (target: keyof typeof inputs): boolean =>
  isOutdated(path.join(root, inputs[target].stamp), inputs[target].sources.map((source) => path.join(root, source)))

/**
 * Builds into a fresh folder beside `dist`, then puts it in place: a build
 * never leaves a half-written `dist` for a test or program reading it
 * meanwhile, nor files of sources since deleted.
 */
const replaceDist = async (dist: string, make: (next: string) => Promise<void>) => {
  const next = `${dist}.next-${process.pid}`
  const old = `${dist}.old-${process.pid}`
  fs.rmSync(next, { recursive: true, force: true })
  try {
    await make(next)
    rewriteDeclarations(next)
    if (fs.existsSync(dist)) fs.renameSync(dist, old)
    fs.renameSync(next, dist)
  } finally {
    fs.rmSync(next, { recursive: true, force: true })
    fs.rmSync(old, { recursive: true, force: true })
  }
}

const builds = {
  // The compiled modules, and the bundle the installed `svc` command runs (scripts/bundle-cli.ts).
  server: () =>
    replaceDist(path.join(root, "dist"), async (next) => {
      await Promise.all([
        compile(path.join(root, "tsconfig.build.json"), next),
        bundleCli(path.join(next, "cli-bundle"))
      ])
    }),
  client: () =>
    replaceDist(path.join(packageDirs.client, "dist"), async (next) => {
      await compile(path.join(packageDirs.client, "tsconfig.json"), next)
      const problems = checkClientClosure(next)
      if (problems.length > 0) {
        throw new Error(
          `@svc/client must hold only src/client.ts and src/api/**, importing only effect:\n${problems.join("\n")}`
        )
      }
    }),
  receiver: () =>
    replaceDist(path.join(packageDirs.receiver, "dist"), async (next) => {
      await Promise.all([
        compile(path.join(packageDirs.receiver, "tsconfig.json"), path.join(next, "esm")),
        compile(path.join(packageDirs.receiver, "tsconfig.cjs.json"), path.join(next, "cjs"))
      ])
      fs.writeFileSync(path.join(next, "cjs/package.json"), `${JSON.stringify({ type: "commonjs" })}\n`)
    })
} as const

type Target = keyof typeof builds

export const build = async (targets: ReadonlyArray<Target> = Object.keys(builds) as Array<Target>) => {
  await Promise.all(targets.map((target) => builds[target]()))
}

/** The repository's own fields of the root manifest: how svc is developed here, nothing a user of the `svc` package runs. */
const DEVELOPMENT_FIELDS = [
  "scripts",
  "devDependencies",
  "devEngines",
  "workspaces",
  "overrides",
  "allowScripts"
] as const

/**
 * The published package's bin. Not in the root manifest: there `npx svc`
 * would take the root for a package to install into npx's cache (checking
 * its engines against the machine's Node) before running the workspace's
 * bin (`tools/cli`, on the project's Node 24).
 */
const SERVER_BIN = { svc: "bin/svc.js" } as const

/** The manual, shipped in the `svc` package beside the README that links to it. */
const SHIPPED_PAGES = ["docs/", "examples/"] as const

/**
 * A Markdown page with every relative link to a file the package does not
 * hold turned into its text: the packed pages link only to what they ship.
 * Links in code blocks are left as they are (they are code, not links).
 */
export const unlinkMissing = (text: string, exists: (target: string) => boolean): string => {
  let fence: string | undefined
  return text.split("\n").map((line) => {
    const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line)
    if (fence === undefined && marker !== null) {
      fence = marker[1]!
      return line
    }
    if (fence !== undefined) {
      if (new RegExp(`^ {0,3}${fence[0]}{${fence.length},}\\s*$`).test(line)) fence = undefined
      return line
    }
    return line.replace(
      /(!?)\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g,
      (link, _image: string, label: string, target: string) => {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("#")) return link
        return exists(decodeURI(target.split("#", 1)[0]!)) ? link : label
      }
    )
  }).join("\n")
}

/**
 * The `svc` package as published, staged in `dir`: the root manifest's
 * `files` and the manual (docs/, examples/), a manifest without the
 * repository's development fields (its `prepare` builds the console from
 * sources the package does not ship), and pages whose links resolve inside
 * the package.
 */
const stageServer = (dir: string) => {
  fs.rmSync(dir, { recursive: true, force: true })
  fs.mkdirSync(dir, { recursive: true })
  const manifest = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as Record<string, unknown> & {
    files: Array<string>
  }
  for (const field of DEVELOPMENT_FIELDS) delete manifest[field]
  manifest.bin = SERVER_BIN
  manifest.files = [...manifest.files, ...SHIPPED_PAGES]
  for (const entry of manifest.files) fs.cpSync(path.join(root, entry), path.join(dir, entry), { recursive: true })
  fs.writeFileSync(path.join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`)
  for (
    const page of filesUnder(dir).filter((file) =>
      file.endsWith(".md") && !file.includes(`${path.sep}node_modules${path.sep}`)
    )
  ) {
    const text = fs.readFileSync(page, "utf8")
    const fixed = unlinkMissing(text, (target) => {
      const resolved = path.resolve(path.dirname(page), target)
      return resolved.startsWith(dir + path.sep) && fs.existsSync(resolved)
    })
    if (fixed !== text) fs.writeFileSync(page, fixed)
  }
}

/** `npm pack` of each package into `dir` (already built: the packs run no scripts); the tarballs' paths. */
export const pack = (dir: string): Array<string> => {
  fs.mkdirSync(dir, { recursive: true })
  const staged = path.join(dir, `.svc-staged-${process.pid}`)
  try {
    stageServer(staged)
    return Object.entries(packageDirs).map(([name, packageDir]) => {
      const result = spawnSync("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", dir], {
        cwd: name === "server" ? staged : packageDir,
        encoding: "utf8"
      })
      if (result.status !== 0) throw new Error(`npm pack in ${packageDir} failed:\n${result.stderr}`)
      const [tarball] = JSON.parse(result.stdout) as Array<{ filename: string }>
      return path.join(dir, tarball!.filename)
    })
  } finally {
    fs.rmSync(staged, { recursive: true, force: true })
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const args = process.argv.slice(2)
  const packAt = args.indexOf("--pack")
  const ifStale = args.includes("--if-stale")
  const targets = args.filter((arg, i) => !arg.startsWith("--") && (packAt === -1 || i !== packAt + 1)) as Array<Target>
  for (const target of targets) {
    if (!(target in builds)) throw new Error(`unknown package ${target}; one of ${Object.keys(builds).join(", ")}`)
  }
  const chosen = targets.length === 0 ? Object.keys(builds) as Array<Target> : targets
  await build(ifStale ? chosen.filter(isStale) : chosen)
  if (packAt !== -1) {
    const dir = path.resolve(args[packAt + 1] ?? "tarballs")
    for (const tarball of pack(dir)) console.log(path.relative(process.cwd(), tarball))
  }
}
