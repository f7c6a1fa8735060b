/**
 * `scripts/example-receiver.ts` as a real process: svc
 * delivers to it, it verifies, saves the event to its inbox, answers 2xx at
 * once, then works the event off by reading the approval's current status.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as https from "node:https"
import * as os from "node:os"
import * as path from "node:path"
import { SvcTest } from "../../../src/testing.ts"
import { eventBody, insertEvents, waitForDeliveries, webhookService } from "../../integration/webhooks/support.ts"
import { eventually } from "../../support/http.ts"
import { compileCache, root } from "../../support/process.ts"
import { TestTls } from "../../support/tls.ts"

/**
 * The lines the receiver has finished writing to `file`: it appends each
 * as a whole line, but a reader may find the file just created, still
 * empty, or a line not yet ended.
 */
const writtenLines = (file: string): Array<string> =>
  fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").slice(0, -1) : []

const startReceiver = (env: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.callback<{ url: string; output: () => string }>((resume) => {
      const child = spawn(process.execPath, [path.join(root, "scripts/example-receiver.ts")], {
        cwd: root,
        env: { ...process.env, ...compileCache, ...env, NODE_NO_WARNINGS: "1" },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let output = ""
      const onData = (chunk: Buffer) => {
        output += chunk.toString()
        const match = /"message":"example receiver listening","url":"([^"]+)"/.exec(output)
        if (match) resume(Effect.succeed({ url: match[1]!, output: () => output, child }))
      }
      child.stdout.on("data", onData)
      child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()))
      child.on("exit", (code) => resume(Effect.die(new Error(`receiver exited ${code}: ${output}`))))
    }).pipe(Effect.timeout("30 seconds"), Effect.orDie),
    // Stopped and awaited, so a restart can listen on the same port.
    (started) =>
      Effect.callback<void>((resume) => {
        const child = (started as unknown as { child: import("node:child_process").ChildProcess }).child
        if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
        const timer = setTimeout(() => child.kill("SIGKILL"), 10_000)
        child.once("exit", () => {
          clearTimeout(timer)
          resume(Effect.void)
        })
        child.kill("SIGTERM")
      })
  )

const freePort = Effect.promise(() =>
  import("node:net").then((net) =>
    new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, "127.0.0.1", () => {
        const port = (s.address() as { port: number }).port
        s.close(() => resolve(port))
      })
    })
  )
)

layer(webhookService(), { excludeTestServices: true })("the example receiver", (it) => {
  it.effect(
    "its first run without a secret makes its certificate, says where and exits 0; a later one without a secret exits 2",
    () =>
      Effect.sync(() => {
        const data = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "svc-example-receiver-")), "data")
        const run = () => {
          const env: Record<string, string> = {
            ...process.env as Record<string, string>,
            ...compileCache,
            NODE_NO_WARNINGS: "1",
            RECEIVER_DATA: data,
            PORT: "0"
          }
          delete env.SVC_WEBHOOK_SECRET
          return spawnSync(process.execPath, [path.join(root, "scripts/example-receiver.ts")], {
            cwd: root,
            env,
            encoding: "utf8",
            timeout: 60_000
          })
        }
        const first = run()
        assert.strictEqual(first.status, 0, first.stderr)
        assert.include(first.stdout, path.join(data, "receiver-cert.pem"))
        assert.isTrue(fs.existsSync(path.join(data, "receiver-cert.pem")))
        const again = run()
        assert.strictEqual(again.status, 2)
        assert.include(again.stderr, "SVC_WEBHOOK_SECRET is required")
      }),
    120_000
  )

  it.effect(
    "verifies, saves durably and answers 202 at once, then works the event off; refuses a bad signature",
    () =>
      Effect.gen(function*() {
        const tls = yield* TestTls.shared
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "svc-example-receiver-"))
        fs.writeFileSync(path.join(dir, "cert.pem"), tls.cert)
        fs.writeFileSync(path.join(dir, "key.pem"), tls.key)
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const reader = yield* org.newKey(["agents.read"])
        // The endpoint is created first so the receiver knows its secret; its URL is fixed by a free port.
        const probe = yield* Effect.promise(() =>
          import("node:net").then((net) =>
            new Promise<number>((resolve) => {
              const s = net.createServer().listen(0, "127.0.0.1", () => {
                const port = (s.address() as { port: number }).port
                s.close(() => resolve(port))
              })
            })
          )
        )
        const { endpoint, secret } = yield* org.client.notifications.create({
          payload: { url: `https://127.0.0.1:${probe}/webhooks/svc` }
        })
        const receiver = yield* startReceiver({
          SVC_WEBHOOK_SECRET: secret,
          SVC_BASE_URL: svc.baseUrl,
          SVC_API_KEY: reader.key,
          SVC_ORG_ID: org.orgId,
          PORT: String(probe),
          RECEIVER_DATA: path.join(dir, "data"),
          RECEIVER_TLS_CERT: path.join(dir, "cert.pem"),
          RECEIVER_TLS_KEY: path.join(dir, "key.pem")
        })
        const event = eventBody(org.orgId, "approval.requested")
        yield* insertEvents([event])
        yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "delivered")
        const sql = svc.sql
        const [attempt] = yield* sql<{ status_code: number }>`
        SELECT a.status_code FROM delivery_attempt_records a JOIN deliveries d ON d.id = a.delivery_id WHERE d.target_id = ${endpoint.id}
      `
        assert.strictEqual(attempt!.status_code, 202)
        const inbox = fs.readFileSync(path.join(dir, "data", "inbox.jsonl"), "utf8")
        assert.strictEqual(JSON.parse(inbox.trim()).id, event.id)
        // Whole event bodies: the owner's only.
        assert.strictEqual(fs.statSync(path.join(dir, "data", "inbox.jsonl")).mode & 0o777, 0o600)
        assert.strictEqual(fs.statSync(path.join(dir, "data")).mode & 0o777, 0o700)
        // Worked off after reading the approval's current status.
        yield* eventually(
          Effect.sync(() => {
            const file = path.join(dir, "data", "done.jsonl")
            return fs.existsSync(file) && fs.readFileSync(file, "utf8").includes(event.id) ? true : undefined
          }),
          { what: "the event worked off", timeoutMs: 20_000 }
        )
        assert.notInclude(receiver.output(), secret)
        assert.strictEqual(fs.statSync(path.join(dir, "data", "done.jsonl")).mode & 0o777, 0o600)

        const bad = yield* Effect.promise(() =>
          new Promise<number>((resolve, reject) => {
            const request = https.request(receiver.url, {
              method: "POST",
              ca: tls.caCert,
              headers: { "x-svc-signature": `t=${Math.floor(Date.now() / 1000)},v1=${"0".repeat(64)}` }
            }, (response) => {
              response.resume()
              resolve(response.statusCode ?? 0)
            })
            request.on("error", reject)
            request.end(JSON.stringify(event))
          })
        )
        assert.strictEqual(bad, 400)
      }).pipe(Effect.scoped),
    60_000
  )

  it.effect(
    "several events of one approval waiting when it is decided: the agent is woken to resume the step once, not once per event",
    () =>
      Effect.gen(function*() {
        const tls = yield* TestTls.shared
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "svc-example-receiver-"))
        fs.writeFileSync(path.join(dir, "cert.pem"), tls.cert)
        fs.writeFileSync(path.join(dir, "key.pem"), tls.key)
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const port = yield* freePort
        const { endpoint, secret } = yield* org.client.notifications.create({
          payload: { url: `https://127.0.0.1:${port}/webhooks/svc` }
        })
        const env = {
          SVC_WEBHOOK_SECRET: secret,
          SVC_BASE_URL: svc.baseUrl,
          SVC_ORG_ID: org.orgId,
          PORT: String(port),
          RECEIVER_DATA: path.join(dir, "data"),
          RECEIVER_TLS_CERT: path.join(dir, "cert.pem"),
          RECEIVER_TLS_KEY: path.join(dir, "key.pem")
        }
        // First without a key that may read approvals: events are saved but stay pending.
        const unread = yield* org.newKey(["tasks.read"])
        const first = yield* Scope.make()
        yield* startReceiver({ ...env, SVC_API_KEY: unread.key }).pipe(Scope.provide(first))
        yield* org.client.approvalPolicies.put({
          params: { action_class: "payments.refund" },
          payload: {
            mode: "require_approval",
            review_seconds: 600,
            expiring_notice_seconds: 0,
            timeout_action: "reject"
          }
        })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const step = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: {
            step_id: "refund-1",
            tool: "stripe.refund",
            action_class: "payments.refund",
            arguments: { amount: 5 }
          }
        })
        yield* org.client.approvals.decide({
          params: { approval_id: step.approval_id! },
          payload: { decision: "approve" }
        })
        yield* waitForDeliveries(
          endpoint.id,
          (rows) => rows.length === 2 && rows.every((r) => r.status === "delivered")
        )
        yield* Scope.close(first, Exit.void)

        // Restarted with a key that reads approvals: both waiting events read "approved".
        const reader = yield* org.newKey(["agents.read"])
        const receiver = yield* startReceiver({ ...env, SVC_API_KEY: reader.key })
        yield* eventually(
          Effect.sync(() => {
            const file = path.join(dir, "data", "done.jsonl")
            return writtenLines(file).length === 2 ? true : undefined
          }),
          { what: "both events worked off", timeoutMs: 20_000 }
        )
        const resumed = receiver.output().split("\n").filter((line) =>
          line.includes("approved: resuming the saved step")
        )
        assert.strictEqual(resumed.length, 1, receiver.output())
        // The agent is woken once, told it may run the step; the receiver never sends the step again.
        const wakeups = writtenLines(path.join(dir, "data", "wakeups.jsonl")).map((line) => JSON.parse(line))
        assert.deepStrictEqual(wakeups, [{
          approval_id: step.approval_id,
          session_id: session.id,
          step_id: "refund-1",
          status: "approved",
          run: true
        }])
      }).pipe(Effect.scoped),
    60_000
  )
  it.effect(
    "an expired approval wakes the agent to run the step with the timeout action allow, to abandon it with reject",
    () =>
      Effect.gen(function*() {
        const tls = yield* TestTls.shared
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "svc-example-receiver-"))
        fs.writeFileSync(path.join(dir, "cert.pem"), tls.cert)
        fs.writeFileSync(path.join(dir, "key.pem"), tls.key)
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const port = yield* freePort
        const { secret } = yield* org.client.notifications.create({
          payload: { url: `https://127.0.0.1:${port}/webhooks/svc`, events: ["approval.expired"] }
        })
        const reader = yield* org.newKey(["agents.read"])
        yield* startReceiver({
          SVC_WEBHOOK_SECRET: secret,
          SVC_BASE_URL: svc.baseUrl,
          SVC_API_KEY: reader.key,
          SVC_ORG_ID: org.orgId,
          PORT: String(port),
          RECEIVER_DATA: path.join(dir, "data"),
          RECEIVER_TLS_CERT: path.join(dir, "cert.pem"),
          RECEIVER_TLS_KEY: path.join(dir, "key.pem")
        })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        for (const action of ["allow", "reject"] as const) {
          yield* org.client.approvalPolicies.put({
            params: { action_class: `fast.${action}` },
            payload: { mode: "require_approval", review_seconds: 1, expiring_notice_seconds: 0, timeout_action: action }
          })
          yield* org.client.agentSessions.governStep({
            params: { session_id: session.id },
            payload: { step_id: action, tool: "shell.exec", action_class: `fast.${action}`, arguments: {} }
          })
        }
        const file = path.join(dir, "data", "wakeups.jsonl")
        const wakeups = yield* eventually(
          Effect.sync(() => {
            const lines = writtenLines(file).map((line) => JSON.parse(line))
            return lines.length === 2 ? lines : undefined
          }),
          { what: "both agents woken", timeoutMs: 30_000 }
        )
        assert.deepStrictEqual(
          wakeups.map((w: { step_id: string; status: string; run: boolean }) => [w.step_id, w.status, w.run]).sort(),
          [["allow", "expired", true], ["reject", "expired", false]]
        )
      }).pipe(Effect.scoped),
    60_000
  )
})
