/**
 * Telemetry with two service processes on one PostgreSQL server: both
 * capture the organization's spans (the destination created through one is
 * learnt by the other from the database), batches go through the shared
 * delivery queue, and each batch reaches the collector once.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { HttpsReceiver } from "../../support/HttpsReceiver.ts"
import { decodeOtlp } from "../../support/Otlp.ts"
import { cli, type RunningServer, scratchDatabaseUrl, startServers } from "../../support/process.ts"
import { TestTls } from "../../support/tls.ts"

const call = async (server: RunningServer, key: string, method: string, route: string, body?: unknown) => {
  const response = await fetch(`${server.baseUrl}${route}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  if (response.status >= 300) throw new Error(`${method} ${route}: ${response.status} ${text}`)
  return text === "" ? undefined : JSON.parse(text)
}

describe.runIf(process.env.TEST_DATABASE_URL)("telemetry with two service processes on one PostgreSQL server", () => {
  it.live("both processes export the organization's spans; every batch arrives once", () =>
    Effect.gen(function*() {
      const tls = yield* TestTls.shared
      const collector = yield* HttpsReceiver.make()
      const env = {
        DATABASE_URL: yield* scratchDatabaseUrl("svc_telemetry"),
        SVC_MASTER_KEY: Buffer.alloc(32, 7).toString("base64"),
        SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8",
        SVC_EXTRA_CA_FILE: tls.caFile
      }
      const key = yield* Effect.promise(async () => {
        const org = JSON.parse((await cli(["orgs", "create", "--name", "telemetry", "--json"], env)).stdout.trim())
        const created = await cli([
          "keys",
          "create",
          "--org",
          org.id,
          "--scopes",
          "org_config.write,org_config.read,tasks.read",
          "--json"
        ], env)
        return JSON.parse(created.stdout.trim()).key as string
      })
      const [a, b] = (yield* startServers(env, 2)) as [RunningServer, RunningServer]
      const destination = yield* Effect.promise(() =>
        call(a, key, "POST", "/v1/telemetry-destinations", { url: collector.url("/v1/traces") })
      )
      const portOf = (server: RunningServer) => Number(new URL(server.baseUrl).port)
      // B learns of the destination from the database (within its refresh period).
      const seen = (server: RunningServer) =>
        collector.requests().some((r) =>
          decodeOtlp(r).spans.some((s) => s.kind === 2 && s.attributes["server.port"] === portOf(server))
        )
      yield* Effect.promise(async () => {
        const deadline = Date.now() + 40_000
        while (!(seen(a) && seen(b))) {
          if (Date.now() > deadline) throw new Error("spans of both processes never arrived")
          await call(a, key, "GET", "/v1/tasks")
          await call(b, key, "GET", "/v1/tasks")
          await new Promise((resolve) => setTimeout(resolve, 200))
        }
      })
      const requests = collector.requests()
      for (const request of requests) assert.deepStrictEqual(decodeOtlp(request).problems, [])
      const ids = requests.flatMap((r) => decodeOtlp(r).spans.map((s) => s.spanId))
      assert.strictEqual(new Set(ids).size, ids.length, "no batch was sent twice")
      const listed = yield* Effect.promise(() =>
        call(b, key, "GET", `/v1/telemetry-destinations/${destination.id}/deliveries`)
      )
      assert.isAbove(listed.deliveries.length, 0)
    }).pipe(Effect.scoped), 120_000)
})
