/**
 * Console sign-in, sessions and the approvals stream with real processes:
 * `console login` prints a link the running server accepts; `console sessions` / `console revoke`
 * end a session at once; on a PostgreSQL server, approval changes made
 * through one process reach the organization stream open on another, and a
 * revocation through the CLI stops the session in every process.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as net from "node:net"
import { onServerRun } from "../../support/databases.ts"
import {
  cli,
  type RunningServer,
  scratchDatabaseUrl,
  seededDataDir,
  startServer,
  startServers
} from "../../support/process.ts"
import { openSse } from "../../support/sse.ts"

const HEADERS = { "content-type": "application/json", "x-svc-console": "1" }

const json = (stdout: string) => JSON.parse(stdout.trim())

/** Signs in with the link the CLI printed, as the sign-in page does: the fragment is the token. */
const signInWith = async (server: RunningServer, url: string) => {
  const token = new URL(url).hash.slice(1)
  const response = await fetch(`${server.baseUrl}/v1/console/sign-in`, {
    method: "POST",
    headers: HEADERS,
    body: JSON.stringify({ token })
  })
  const cookie = response.headers.getSetCookie().find((c) => c.startsWith("svc_console_session="))?.split(";")[0]
  return { status: response.status, body: await response.json(), cookie: cookie ?? "" }
}

const statusWith = async (server: RunningServer, cookie: string, route: string) =>
  (await fetch(`${server.baseUrl}${route}`, { headers: { cookie } })).status

const orgAndKey = async (env: Record<string, string>) => {
  const org = json((await cli(["orgs", "create", "--name", "console", "--json"], env)).stdout)
  const key = json(
    (await cli(
      ["keys", "create", "--org", org.id, "--scopes", "org_config.write,agents.write,agents.read", "--json"],
      env
    )).stdout
  )
  return { orgId: org.id as string, key: key.key as string }
}

describe.skipIf(onServerRun)("console CLI (embedded database, running server)", () => {
  it("login prints one JSON object whose link signs in once; sessions lists it; revoke ends it at once", async () => {
    const dataDir = seededDataDir("svc-console-")
    const env = { SVC_DATA_DIR: dataDir, DATABASE_URL: "" }
    const server = await startServer(env)
    try {
      const port = new URL(server.baseUrl).port
      const cliEnv = { ...env, PORT: port }
      const { orgId } = await orgAndKey(cliEnv)
      const login = await cli([
        "console",
        "login",
        "--org",
        orgId,
        "--preset",
        "approver",
        "--name",
        "Ada Lovelace",
        "--ttl",
        "5m",
        "--json"
      ], cliEnv)
      assert.strictEqual(login.code, 0, login.stderr)
      assert.strictEqual(login.stdout.trim().split("\n").length, 1, "exactly one line")
      const link = json(login.stdout)
      assert.sameMembers(Object.keys(link), ["url", "expires_at", "preset"])
      assert.strictEqual(link.preset, "approver")
      assert.match(link.url, new RegExp(`^http://127\\.0\\.0\\.1:${port}/console/sign-in#svl_[A-Za-z0-9_-]{43}$`))
      const ttl = Date.parse(link.expires_at) - Date.now()
      assert.isTrue(ttl > 3 * 60_000 && ttl <= 5 * 60_000 + 5_000, `ttl ${ttl}`)

      const first = await signInWith(server, link.url)
      assert.strictEqual(first.status, 200, JSON.stringify(first.body))
      assert.strictEqual(first.body.person, "Ada Lovelace")
      assert.strictEqual((await signInWith(server, link.url)).body.code, "LINK_USED")
      assert.strictEqual(await statusWith(server, first.cookie, "/v1/agent-approvals"), 200)
      assert.notInclude(server.output(), new URL(link.url).hash.slice(1), "the secret is not in the server's log")

      const listed = json((await cli(["console", "sessions", "--org", orgId, "--json"], cliEnv)).stdout)
      assert.deepStrictEqual(listed.sessions.map((s: { id: string }) => s.id), [first.body.session_id])
      const revoked = await cli(["console", "revoke", "--session", first.body.session_id, "--json"], cliEnv)
      assert.strictEqual(revoked.code, 0, revoked.stderr)
      assert.strictEqual(await statusWith(server, first.cookie, "/v1/agent-approvals"), 401)

      // --all ends every session of the organization.
      const a = await signInWith(
        server,
        json(
          (await cli(["console", "login", "--org", orgId, "--preset", "admin", "--name", "A", "--json"], cliEnv)).stdout
        ).url
      )
      const b = await signInWith(
        server,
        json(
          (await cli(["console", "login", "--org", orgId, "--preset", "reviewer", "--name", "B", "--json"], cliEnv))
            .stdout
        ).url
      )
      const all = json((await cli(["console", "revoke", "--all", "--org", orgId, "--json"], cliEnv)).stdout)
      assert.strictEqual(all.revoked, 2)
      assert.strictEqual(await statusWith(server, a.cookie, "/v1/console/session"), 401)
      assert.strictEqual(await statusWith(server, b.cookie, "/v1/console/session"), 401)

      // Refused input says why, on stderr, with a non-zero exit.
      const badTtl = await cli(
        ["console", "login", "--org", orgId, "--preset", "admin", "--name", "A", "--ttl", "2d"],
        cliEnv
      )
      assert.notStrictEqual(badTtl.code, 0)
      assert.include(badTtl.stderr, "--ttl")
    } finally {
      server.child.kill("SIGTERM")
      await server.exited
    }
  }, 240_000)
})

describe.skipIf(onServerRun)("server connections", () => {
  it("beyond SVC_MAX_CONNECTIONS a new connection is closed at once; a freed place serves again", async () => {
    const dataDir = seededDataDir("svc-connections-")
    const server = await startServer({ SVC_DATA_DIR: dataDir, DATABASE_URL: "", SVC_MAX_CONNECTIONS: "16" })
    const sockets: Array<net.Socket> = []
    try {
      const { hostname, port } = new URL(server.baseUrl)
      for (let i = 0; i < 16; i++) {
        sockets.push(
          await new Promise<net.Socket>((resolve, reject) => {
            const socket = net.connect(Number(port), hostname, () => resolve(socket))
            socket.on("error", reject)
          })
        )
      }
      // Give the server a moment to count them (they are accepted asynchronously).
      await new Promise((resolve) => setTimeout(resolve, 200))
      const refused = await fetch(`${server.baseUrl}/health`).then((r) => r.status, (e: Error) => e.name)
      assert.notStrictEqual(refused, 200)
      sockets.pop()!.destroy()
      let status: number | string = 0
      const deadline = Date.now() + 10_000
      while (status !== 200 && Date.now() < deadline) {
        status = await fetch(`${server.baseUrl}/health`).then((r) => r.status, (e: Error) => e.name)
        if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 100))
      }
      assert.strictEqual(status, 200)
    } finally {
      for (const socket of sockets) socket.destroy()
      server.child.kill("SIGTERM")
      await server.exited
    }
  }, 120_000)
})

describe.runIf(process.env.TEST_DATABASE_URL)("console with two service processes on one PostgreSQL server", () => {
  it.live(
    "an approval requested through one process reaches the organization stream on the other; a CLI revocation stops the session in both",
    () =>
      Effect.gen(function*() {
        const url = yield* scratchDatabaseUrl("svc_console")
        // Streams re-read only every minute: a live event from the other process can only come through NOTIFY.
        const env = {
          DATABASE_URL: url,
          SVC_MASTER_KEY: Buffer.alloc(32, 7).toString("base64"),
          SVC_SSE_POLL_MS: "60000"
        }
        const { key, orgId } = yield* Effect.promise(() => orgAndKey(env))
        const [a, b] = (yield* startServers(env, 2)) as [RunningServer, RunningServer]
        yield* Effect.promise(async () => {
          const link = json(
            (await cli(["console", "login", "--org", orgId, "--preset", "approver", "--name", "Ops", "--json"], env))
              .stdout
          )
          const session = await signInWith(a, link.url)
          assert.strictEqual(session.status, 200)
          const sse = await openSse(`${a.baseUrl}/v1/agent-approvals/events/stream`, { cookie: session.cookie })
          try {
            assert.strictEqual(sse.status, 200)
            const call = async (route: string, body: unknown) => {
              const response = await fetch(`${b.baseUrl}${route}`, {
                method: "POST",
                headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
                body: JSON.stringify(body)
              })
              return response.json()
            }
            const agent = await call("/v1/agent-sessions", {})
            const answer = await call(`/v1/agent-sessions/${agent.id}/steps`, {
              step_id: "x",
              tool: "kubectl",
              action_class: "ops",
              arguments: {}
            })
            const [event] = await sse.events(1, 20_000)
            assert.strictEqual(event!.event, "approval.requested")
            assert.strictEqual(JSON.parse(event!.data).approval_id, answer.approval_id)
            assert.strictEqual(await statusWith(b, session.cookie, "/v1/agent-approvals"), 200)
            const revoked = await cli(["console", "revoke", "--all", "--org", orgId, "--json"], env)
            assert.strictEqual(revoked.code, 0, revoked.stderr)
            assert.strictEqual(await statusWith(a, session.cookie, "/v1/agent-approvals"), 401)
            assert.strictEqual(await statusWith(b, session.cookie, "/v1/agent-approvals"), 401)
          } finally {
            sse.close()
          }
        })
      }).pipe(Effect.scoped),
    300_000
  )
})
