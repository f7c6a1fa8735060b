/**
 * Vitest's global setup: once per run, a migrated, empty PGlite database is
 * written to a temporary file, and every in-process service
 * (`SvcTest.layer`) on PGlite starts as a copy of it
 * (`TEST_DATABASE_SNAPSHOT`) instead of running `initdb` and the
 * migrations again: about 3 s less for each of the suite's ~90 services.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { SvcTest } from "../../src/testing.ts"

export default async function setup() {
  if (process.env.TEST_DATABASE_SNAPSHOT !== undefined) return
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "svc-test-snapshot-"))
  const file = path.join(dir, "migrated.tar")
  await Effect.runPromise(SvcTest.writeSnapshot(file))
  process.env.TEST_DATABASE_SNAPSHOT = file
  return () => {
    delete process.env.TEST_DATABASE_SNAPSHOT
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
