/**
 * Liveness tells the truth: when the embedded database session is lost
 * (here: a statement on the server's own session outruns the watchdog,
 * `test/support/stalling-server.ts`), the server stops serving and
 * exits non-zero within a stated bound, and a restart serves every write it
 * had answered.
 */
import { assert, describe, it } from "vitest"
import { onServerRun } from "../../support/databases.ts"
import { cli, seededDataDir, startServer } from "../../support/process.ts"

const json = (text: string) => JSON.parse(text)

describe.skipIf(onServerRun)("liveness of the embedded database", () => {
  it(
    "a statement past SVC_DB_STATEMENT_TIMEOUT loses the session: the process exits 1 within the timeout plus 10 s; a restart serves every accepted write",
    async () => {
      const dataDir = seededDataDir("svc-liveness-")
      const env = { SVC_DATA_DIR: dataDir, DATABASE_URL: "", SVC_DB_STATEMENT_TIMEOUT: "2s" }
      const server = await startServer(env, 150_000, "test/support/stalling-server.ts")
      let again: Awaited<ReturnType<typeof startServer>> | undefined
      try {
        const org = await cli(["orgs", "create", "--name", "accepted", "--json"], env)
        assert.strictEqual(org.code, 0, org.stderr)
        const orgId = json(org.stdout).id as string

        const started = Date.now()
        server.child.kill("SIGUSR2")
        assert.strictEqual(await server.exited, 1)
        assert.isBelow(Date.now() - started, 2_000 + 10_000, "exited within the watchdog's bound")
        assert.include(server.output(), "the database session is lost")

        again = await startServer(env, 150_000)
        const listed = await cli(["orgs", "list", "--json"], env)
        assert.strictEqual(listed.code, 0, listed.stderr)
        assert.include((json(listed.stdout).orgs as Array<{ id: string }>).map((o) => o.id), orgId)
      } finally {
        server.child.kill("SIGKILL")
        again?.child.kill("SIGTERM")
        await again?.exited.catch(() => undefined)
      }
    },
    300_000
  )
})
