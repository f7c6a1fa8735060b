/**
 * The key cache across processes on one PostgreSQL server: a key that two
 * service processes have just authenticated (and so hold in memory) is
 * refused by both within the stated revocation bound once the CLI revokes
 * it (NOTIFY evicts it at once; the cache lifetime bounds it otherwise).
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { KEY_CACHE_TTL } from "../../../src/identity/Identity.ts"
import { cli, type RunningServer, scratchDatabaseUrl, startServers } from "../../support/process.ts"

const status = async (server: RunningServer, key: string) =>
  (await fetch(`${server.baseUrl}/v1/tasks`, { headers: { authorization: `Bearer ${key}` } })).status

describe.runIf(process.env.TEST_DATABASE_URL)(
  "API key revocation with two service processes on one PostgreSQL server",
  () => {
    it.live(
      "a revoked key is refused by every process within KEY_CACHE_TTL, though each had just authenticated it",
      () =>
        Effect.gen(function*() {
          const env = {
            DATABASE_URL: yield* scratchDatabaseUrl("svc_keys"),
            SVC_MASTER_KEY: Buffer.alloc(32, 7).toString("base64")
          }
          const key = yield* Effect.promise(async () => {
            const org = JSON.parse((await cli(["orgs", "create", "--name", "keys", "--json"], env)).stdout.trim())
            return JSON.parse(
              (await cli(["keys", "create", "--org", org.id, "--scopes", "tasks.read", "--json"], env)).stdout.trim()
            ) as {
              id: string
              key: string
            }
          })
          const servers = (yield* startServers(env, 2)) as [RunningServer, RunningServer]
          yield* Effect.promise(async () => {
            for (const server of servers) {
              assert.strictEqual(await status(server, key.key), 200)
              assert.strictEqual(await status(server, key.key), 200)
            }
            await cli(["keys", "revoke", "--id", key.id, "--json"], env)
            const revokedAt = Date.now()
            for (const server of servers) {
              while ((await status(server, key.key)) !== 401) {
                // The bound, plus room for a loaded machine.
                assert.isBelow(
                  Date.now() - revokedAt,
                  Duration.toMillis(KEY_CACHE_TTL) + 3_000,
                  "still accepted after the bound"
                )
                await new Promise((resolve) => setTimeout(resolve, 50))
              }
            }
            for (const server of servers) assert.strictEqual(await status(server, key.key), 401)
          })
        }).pipe(Effect.scoped),
      120_000
    )
  }
)
