/**
 * Vitest's global setup: once per run, a migrated, empty database is made
 * that every in-process service (`SvcTest.layer`) starts as a copy of,
 * instead of running the migrations again (and, on PGlite, `initdb`): on
 * PGlite a snapshot file (`TEST_DATABASE_SNAPSHOT`), about 0.6 s to open
 * instead of 3 to 5; on the PostgreSQL server of `TEST_DATABASE_URL` a
 * template database (`TEST_DATABASE_TEMPLATE`), about 0.5 s to copy
 * instead of 3 to 4. The suite starts about a hundred such services.
 */
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { buildConsole, isStale } from "../../scripts/build-console.ts"
import { isOutdated } from "../../scripts/build-packages.ts"
import { bundleCli } from "../../scripts/bundle-cli.ts"
import { SvcTest } from "../../src/testing.ts"
import { writeEmptySnapshot } from "./databases.ts"
import { dropDatabase, root } from "./process.ts"

export default async function setup() {
  // The console's bundle, once, before any file starts: the servers of
  // the browser and console tests serve it, and a build in one test process
  // would replace the folder under another's server. It is fresh after
  // `npm install` (`prepare`); rebuilt here only when a source changed.
  if (isStale()) await buildConsole()
  const done: Array<() => Promise<void> | void> = []
  // svc as installed (`bin/svc.js` runs this bundle: the CLI and `svc
  // start`'s server), built from this checkout's sources when one is newer
  // than it: a process loads one file graph instead of about 244 modules
  // from src/ (a server's start 0.27 CPU-s less, a CLI command 0.2-0.4).
  // Two folders below the checkout, as dist/cli-bundle is below the
  // package: the packages left out of the bundle resolve from node_modules,
  // and the server finds the console's build. Always the same folder, so
  // that Node's compile cache (`compileCache`) knows its files next run.
  // Built while the snapshots below are written (rolldown bundles on threads of its own).
  const bundling = (async () => {
    if (process.env.TEST_SVC_CLI !== undefined) return
    const dir = path.join(root, "node_modules", ".svc-test-bundle")
    const sources = ["src", "package-lock.json", "scripts/bundle-cli.ts"].map((source) => path.join(root, source))
    if (isOutdated(path.join(dir, "main.js"), sources)) {
      // Built beside it, then put in place: a run never sees half a bundle.
      const next = `${dir}.next-${process.pid}`
      await bundleCli(next)
      fs.rmSync(dir, { recursive: true, force: true })
      fs.renameSync(next, dir)
    }
    process.env.TEST_SVC_CLI = path.join(dir, "main.js")
    process.env.TEST_SVC_SERVER = path.join(dir, "server.js")
    done.push(() => {
      delete process.env.TEST_SVC_CLI
      delete process.env.TEST_SVC_SERVER
    })
  })()
  if (process.env.TEST_DATABASE_SNAPSHOT === undefined) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "svc-test-snapshot-"))
    const file = path.join(dir, "migrated.tar")
    const empty = path.join(dir, "empty.tar")
    // The empty one for tests of a database before svc's migrations (and of
    // the embedded database itself), which would otherwise each run initdb.
    await Promise.all([Effect.runPromise(SvcTest.writeSnapshot(file)), Effect.runPromise(writeEmptySnapshot(empty))])
    process.env.TEST_DATABASE_SNAPSHOT = file
    process.env.TEST_DATABASE_EMPTY_SNAPSHOT = empty
    done.push(() => {
      delete process.env.TEST_DATABASE_SNAPSHOT
      delete process.env.TEST_DATABASE_EMPTY_SNAPSHOT
      fs.rmSync(dir, { recursive: true, force: true })
    })
  }
  await bundling
  const serverUrl = process.env.TEST_DATABASE_URL
  if (serverUrl !== undefined && serverUrl !== "" && process.env.TEST_DATABASE_TEMPLATE === undefined) {
    const name = `svc_template_${randomBytes(6).toString("hex")}`
    await Effect.runPromise(SvcTest.makeTemplate(serverUrl, name))
    process.env.TEST_DATABASE_TEMPLATE = name
    done.push(async () => {
      delete process.env.TEST_DATABASE_TEMPLATE
      await Effect.runPromise(dropDatabase(name))
    })
  }
  return async () => {
    for (const step of done.reverse()) await step()
  }
}
