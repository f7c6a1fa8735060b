/**
 * The agent loop of docs/approvals.md, as the two example agents run it:
 * `examples/agent.ts` (Node, the typed client) and `examples/agent.py`
 * (Python 3, standard library) as real child processes against a live svc,
 * through every way a step ends (allowed or rejected by policy, approved or
 * rejected by a person, expired with either timeout action), a stream
 * cut while they wait, and a restart that re-sends the step. Each prints
 * one line per change and reports the outcome of a tool it ran; the test
 * reads the outcome back from svc. Run again for a step whose outcome is
 * recorded (a crash after reporting it), an agent does not run its tool
 * again; the tool gets the step as its idempotency key, for a crash
 * between running it and reporting. A person decides only after the agent
 * says it is waiting, and a re-sent step answers `pending` for ever, so an
 * agent that waited for a re-sent step's new decision would never print
 * the approval's status: its run times out.
 *
 * Also: every request block of docs/approvals.md runs here as written.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, type Schema } from "effect"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { type Agent, agentFinished as finished, startAgent as start } from "../../support/agent-process.ts"
import { eventually } from "../../support/http.ts"
import { codeBlocks, read } from "../../support/markdown.ts"

type Decision = typeof import("../../../src/api/Approvals.ts").Decision.Type

const ARGUMENTS = { amount: 42 }
const ACTION_CLASS = "payments.refund"

/** Ids as the docs write them. */
const normalize = (line: string) => line.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "…")

const EXAMPLES = [
  { name: "examples/agent.ts", command: process.execPath, script: "examples/agent.ts" },
  { name: "examples/agent.py", command: "python3", script: "examples/agent.py" }
] as const

interface Case {
  readonly title: string
  readonly policy: {
    readonly mode: "allow" | "reject" | "require_approval"
    readonly review_seconds: number
    readonly timeout_action: "allow" | "reject"
    readonly arguments_schema?: { readonly [key: string]: Schema.Json }
    readonly quorum?: number
  }
  /**
   * What a person decides once the agent waits; none: the step closes by
   * itself. Several: votes of distinct people (keys), each after the agent
   * printed the one before.
   */
  readonly decide?: Decision | ReadonlyArray<Decision>
  /** The arguments the tool ran with, when not the step's. */
  readonly ranWith?: Schema.Json
  readonly printed: ReadonlyArray<string>
  readonly events: ReadonlyArray<string>
  readonly ran: boolean
}

const asked = "session …"
const pending = ["step refund-1: pending approval …", "waiting for approval …"]
const ran = ["tool example.echo: succeeded", "outcome succeeded recorded"]
const notRun = ["tool example.echo: not run"]

const CASES: ReadonlyArray<Case> = [
  {
    title: "allowed by policy: runs the tool at once and reports its outcome",
    policy: { mode: "allow", review_seconds: 60, timeout_action: "reject" },
    printed: [asked, "step refund-1: allow", ...ran],
    events: ["step:governed", "tool:succeeded"],
    ran: true
  },
  {
    title: "rejected by policy: does not run the tool",
    policy: { mode: "reject", review_seconds: 60, timeout_action: "reject" },
    printed: [asked, "step refund-1: reject", ...notRun],
    events: ["step:governed"],
    ran: false
  },
  {
    title: "pending, then approved by a person: runs the tool and reports its outcome",
    policy: { mode: "require_approval", review_seconds: 600, timeout_action: "reject" },
    decide: { decision: "approve" },
    printed: [asked, ...pending, "approval …: approved", ...ran],
    events: ["step:governed", "approval:decided", "tool:succeeded"],
    ran: true
  },
  {
    title: "pending, then rejected by a person: does not run the tool",
    policy: { mode: "require_approval", review_seconds: 600, timeout_action: "allow" },
    decide: { decision: "reject" },
    printed: [asked, ...pending, "approval …: rejected", ...notRun],
    events: ["step:governed", "approval:decided"],
    ran: false
  },
  {
    title:
      "pending, then approved with edited arguments: runs the tool with them and reports the outcome with their digest",
    policy: {
      mode: "require_approval",
      review_seconds: 600,
      timeout_action: "reject",
      arguments_schema: {
        type: "object",
        required: ["amount"],
        properties: { amount: { type: "number", maximum: 40 } }
      }
    },
    decide: { decision: "approve", arguments: { amount: 40 } },
    printed: [asked, ...pending, "approval …: approved", "arguments edited: /amount", ...ran],
    events: ["step:governed", "approval:decided", "tool:succeeded"],
    ran: true,
    ranWith: { amount: 40 }
  },
  {
    title: "pending, then answered instead: does not run the tool and passes the response on",
    policy: { mode: "require_approval", review_seconds: 600, timeout_action: "allow" },
    decide: { decision: "reject", response: "Refunds go through the billing desk." },
    printed: [
      asked,
      ...pending,
      "approval …: rejected",
      "response: \"Refunds go through the billing desk.\"",
      ...notRun
    ],
    events: ["step:governed", "approval:decided"],
    ran: false
  },
  {
    title:
      "pending with a quorum of two: waits through the first vote, then runs the tool once the second approver closes it",
    policy: { mode: "require_approval", review_seconds: 600, timeout_action: "reject", quorum: 2 },
    decide: [{ decision: "approve", reason: "Ticket 4411 matches." }, { decision: "approve" }],
    printed: [asked, ...pending, "vote approve by …: 1 more needed", "approval …: approved", ...ran],
    events: ["step:governed", "approval:voted", "approval:decided", "tool:succeeded"],
    ran: true
  },
  {
    title: "pending with a quorum of two: one approval, then a rejection closes it and the tool does not run",
    policy: { mode: "require_approval", review_seconds: 600, timeout_action: "allow", quorum: 2 },
    decide: [{ decision: "approve" }, { decision: "reject", reason: "Not this customer." }],
    printed: [asked, ...pending, "vote approve by …: 1 more needed", "approval …: rejected", ...notRun],
    events: ["step:governed", "approval:voted", "approval:decided"],
    ran: false
  },
  {
    title: "pending, then expired with the timeout action reject: does not run the tool",
    policy: { mode: "require_approval", review_seconds: 2, timeout_action: "reject" },
    printed: [asked, ...pending, "approval …: expired (timeout action reject)", ...notRun],
    events: ["step:governed", "approval:expired"],
    ran: false
  },
  {
    title: "pending, then expired with the timeout action allow: runs the tool and reports its outcome",
    policy: { mode: "require_approval", review_seconds: 2, timeout_action: "allow" },
    printed: [asked, ...pending, "approval …: expired (timeout action allow)", ...ran],
    events: ["step:governed", "approval:expired", "tool:succeeded"],
    ran: true
  }
]

/** The session's step as svc recorded it, and the names of its stream events, oldest first. */
const recorded = (org: TestOrg, sessionId: string) =>
  Effect.gen(function*() {
    const svc = yield* SvcTest
    const session = yield* org.client.agentSessions.get({ params: { session_id: sessionId }, query: {} })
    const events = yield* svc.sql<
      { name: string }
    >`SELECT name FROM session_events WHERE session_id = ${sessionId} ORDER BY seq`
    return { steps: session.steps, events: events.map((e) => e.name) }
  })

/** Decides the agent's approval once it says it waits; answers the approval id. */
const decideWhenWaiting = (org: TestOrg, agent: Agent, decision: Decision | "approve" | "reject") =>
  Effect.gen(function*() {
    const [, approvalId] = yield* Effect.promise(() => agent.line(/^waiting for approval (\S+)$/))
    const payload = typeof decision === "string" ? { decision } : decision
    yield* org.client.approvals.decide({ params: { approval_id: approvalId! }, payload })
  })

/**
 * Votes on the agent's approval once it says it waits, each by another
 * person (a key of its own with `approvals.decide`); after each vote that
 * leaves the approval pending, waits until the agent has printed it.
 */
const votesWhenWaiting = (org: TestOrg, agent: Agent, votes: ReadonlyArray<Decision>) =>
  Effect.gen(function*() {
    const [, approvalId] = yield* Effect.promise(() => agent.line(/^waiting for approval (\S+)$/))
    for (const [index, payload] of votes.entries()) {
      const decider = yield* org.newKey(["approvals.decide"])
      const answer = yield* decider.client.approvals.decide({ params: { approval_id: approvalId! }, payload })
      if (answer.status !== "pending") break
      const remaining = answer.approvals_remaining
      yield* Effect.promise(() =>
        agent.line(new RegExp(`^vote approve by ${decider.keyId}: ${remaining} more needed$`))
      )
      assert.isBelow(index, votes.length - 1)
    }
  })

/**
 * A loopback proxy in front of svc that cuts every session stream after
 * `cutMs`, as a dropped connection or a restarting svc would; it records
 * where each stream asked to resume (`after` or `Last-Event-ID`).
 */
const cuttingProxy = (target: string, cutMs: number) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ server: http.Server; url: string; resumes: Array<string> }>((resolve) => {
        const resumes: Array<string> = []
        const server = http.createServer((req, res) => {
          const url = new URL(req.url ?? "/", target)
          const upstream = http.request(url, { method: req.method, headers: req.headers }, (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.headers)
            answer.pipe(res)
          })
          upstream.on("error", () => res.destroy())
          req.pipe(upstream)
          if (url.pathname.endsWith("/events/stream")) {
            resumes.push(req.headers["last-event-id"]?.toString() ?? url.searchParams.get("after") ?? "")
            setTimeout(() => {
              res.destroy()
              upstream.destroy()
            }, cutMs)
          }
        })
        server.listen(0, "127.0.0.1", () => {
          const port = (server.address() as { port: number }).port
          resolve({ server, url: `http://127.0.0.1:${port}`, resumes })
        })
      })
    ),
    ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
  )

layer(SvcTest.layer(), { excludeTestServices: true })(
  "the agent loop of docs/approvals.md, run by the example agents",
  (it) => {
    for (const example of EXAMPLES) {
      describe(example.name, () => {
        for (const c of CASES) {
          it.effect(c.title, () =>
            Effect.gen(function*() {
              const svc = yield* SvcTest
              const org = yield* SvcTest.org()
              const agentKey = yield* org.newKey(["agents.read", "agents.write"])
              yield* org.client.approvalPolicies.put({
                params: { action_class: ACTION_CLASS },
                payload: { ...c.policy, expiring_notice_seconds: 0 }
              })
              const agent = yield* start(example.command, [
                example.script,
                ACTION_CLASS,
                "refund-1",
                JSON.stringify(ARGUMENTS)
              ], {
                SVC_URL: svc.baseUrl,
                SVC_API_KEY: agentKey.key
              })
              if (Array.isArray(c.decide)) yield* votesWhenWaiting(org, agent, c.decide)
              else if (c.decide !== undefined) yield* decideWhenWaiting(org, agent, c.decide as Decision)
              const { code, lines } = yield* finished(agent)
              assert.strictEqual(code, 0, agent.output())
              assert.deepStrictEqual(lines.map(normalize), c.printed, agent.output())

              const sessionId = /^session (\S+)$/.exec(lines[0]!)![1]!
              const { steps, events } = yield* recorded(org, sessionId)
              assert.deepStrictEqual(events, c.events)
              assert.lengthOf(steps, 1)
              const step = steps[0]!
              assert.strictEqual(step.resolution, c.ran ? "allow" : "reject")
              if (c.ran) {
                assert.strictEqual(step.outcome?.status, "succeeded")
                assert.deepStrictEqual(step.outcome?.result, {
                  echoed: c.ranWith ?? ARGUMENTS,
                  idempotency_key: `${sessionId}/refund-1`
                })
                if (c.ranWith !== undefined) assert.strictEqual(step.outcome?.arguments_digest, step.arguments_digest)
              } else {
                assert.isUndefined(step.outcome)
              }
            }).pipe(Effect.scoped), 60_000)
        }

        it.effect(
          "a stream cut while the agent waits: it reconnects after the last event it saw and still sees the decision",
          () =>
            Effect.gen(function*() {
              const svc = yield* SvcTest
              const org = yield* SvcTest.org()
              const agentKey = yield* org.newKey(["agents.read", "agents.write"])
              const proxy = yield* cuttingProxy(svc.baseUrl, 400)
              const agent = yield* start(example.command, [
                example.script,
                ACTION_CLASS,
                "refund-1",
                JSON.stringify(ARGUMENTS)
              ], {
                SVC_URL: proxy.url,
                SVC_API_KEY: agentKey.key
              })
              const [, approvalId] = yield* Effect.promise(() => agent.line(/^waiting for approval (\S+)$/))
              // Two reconnections after the agent saw step:governed (event 1). On a loaded machine a stream
              // may be cut before that event reached the agent: it then starts from the beginning again.
              yield* eventually(
                Effect.sync(() => (proxy.resumes.filter((at) => at === "1").length >= 2 ? true : undefined)),
                {
                  what: "two reconnections after event 1",
                  timeoutMs: 15_000
                }
              )
              yield* org.client.approvals.decide({
                params: { approval_id: approvalId! },
                payload: { decision: "approve" }
              })
              const { code, lines } = yield* finished(agent)
              assert.strictEqual(code, 0, agent.output())
              assert.deepStrictEqual(
                lines.map(normalize),
                [asked, ...pending, "approval …: approved", ...ran],
                agent.output()
              )
              // The first stream starts from the beginning; each reconnection resumes after the last event the
              // agent saw: the beginning until step:governed (event 1) arrived, then after it, never earlier.
              const seen = proxy.resumes.slice(0, proxy.resumes.lastIndexOf("1") + 1)
              assert.strictEqual(seen[0], "0")
              assert.deepStrictEqual(seen, [...seen].sort(), `resumes ${proxy.resumes.join(", ")}`)
              for (const at of seen) assert.oneOf(at, ["0", "1"])
            }).pipe(Effect.scoped),
          60_000
        )

        it.effect(
          "a restarted agent whose step already has an outcome (a crash after reporting it) reads it and does not run the tool again",
          () =>
            Effect.gen(function*() {
              const svc = yield* SvcTest
              const org = yield* SvcTest.org()
              const agentKey = yield* org.newKey(["agents.read", "agents.write"])
              yield* org.client.approvalPolicies.put({
                params: { action_class: ACTION_CLASS },
                payload: { mode: "allow", review_seconds: 60, timeout_action: "reject", expiring_notice_seconds: 0 }
              })
              const session = yield* org.client.agentSessions.create({ payload: {} })
              // Steps before it fill the first page (100), so the agent finds its step on the next one.
              for (let i = 0; i < 100; i++) {
                yield* org.client.agentSessions.governStep({
                  params: { session_id: session.id },
                  payload: { step_id: `earlier-${i}`, tool: "example.echo", action_class: ACTION_CLASS, arguments: {} }
                })
              }
              yield* org.client.agentSessions.governStep({
                params: { session_id: session.id },
                payload: { step_id: "refund-1", tool: "example.echo", action_class: ACTION_CLASS, arguments: ARGUMENTS }
              })
              yield* org.client.agentSessions.reportOutcome({
                params: { session_id: session.id, step_id: "refund-1" },
                payload: { status: "succeeded", result: { refunded: "once" } }
              })
              const agent = yield* start(example.command, [
                example.script,
                ACTION_CLASS,
                "refund-1",
                JSON.stringify(ARGUMENTS)
              ], {
                SVC_URL: svc.baseUrl,
                SVC_API_KEY: agentKey.key,
                SVC_SESSION_ID: session.id
              })
              const { code, lines } = yield* finished(agent)
              assert.strictEqual(code, 0, agent.output())
              assert.deepStrictEqual(lines.map(normalize), [
                asked,
                "step refund-1: allow",
                "outcome succeeded already recorded: tool example.echo not run again"
              ])
              const { events } = yield* recorded(org, session.id)
              assert.deepStrictEqual(events.filter((name) => name.startsWith("tool:")), ["tool:succeeded"])
            }).pipe(Effect.scoped),
          60_000
        )

        it.effect(
          "a restarted agent re-sends its saved step: the same approval, still pending, and it waits for the person",
          () =>
            Effect.gen(function*() {
              const svc = yield* SvcTest
              const org = yield* SvcTest.org()
              const agentKey = yield* org.newKey(["agents.read", "agents.write"])
              const session = yield* org.client.agentSessions.create({ payload: {} })
              const first = yield* org.client.agentSessions.governStep({
                params: { session_id: session.id },
                payload: { step_id: "refund-1", tool: "example.echo", action_class: ACTION_CLASS, arguments: ARGUMENTS }
              })
              const agent = yield* start(example.command, [
                example.script,
                ACTION_CLASS,
                "refund-1",
                JSON.stringify(ARGUMENTS)
              ], {
                SVC_URL: svc.baseUrl,
                SVC_API_KEY: agentKey.key,
                SVC_SESSION_ID: session.id
              })
              const [, answered] = yield* Effect.promise(() => agent.line(/^step refund-1: pending approval (\S+)$/))
              assert.strictEqual(answered, first.approval_id)
              yield* decideWhenWaiting(org, agent, "approve")
              const { code, lines } = yield* finished(agent)
              assert.strictEqual(code, 0, agent.output())
              assert.deepStrictEqual(lines.slice(-3).map(normalize), ["approval …: approved", ...ran])
              const { steps, events } = yield* recorded(org, session.id)
              assert.deepStrictEqual(events, ["step:governed", "approval:decided", "tool:succeeded"])
              assert.strictEqual(steps[0]!.outcome?.status, "succeeded")
            }).pipe(Effect.scoped),
          60_000
        )
      })
    }

    describe("docs/approvals.md runs as written", () => {
      const page = "docs/approvals.md"
      const text = read(page)
      const blocks = codeBlocks(page, text)
      const loopStart = text.indexOf("\n## The agent loop\n")
      const loopEnd = text.indexOf("\n## ", loopStart + 1)
      const lineOf = (offset: number) => text.slice(0, offset).split("\n").length + 1
      const inLoop = (line: number) => line > lineOf(loopStart) && line < lineOf(loopEnd)

      it.effect("every block is a shell command that runs here, output shown as text, or marked illustrative", () =>
        Effect.sync(() => {
          for (const block of blocks) {
            assert.isTrue(
              block.lang === "sh" || block.lang === "text" || block.flags.includes("illustrative"),
              `${page}:${block.line}: a \`${block.lang}\` block neither runs here nor is marked illustrative`
            )
          }
        }))

      it.effect("the agent loop's outputs of an edit, a response and a quorum are what the example agents print", () =>
        Effect.sync(() => {
          const shown = blocks.filter((block) => block.lang === "text" && inLoop(block.line))
          assert.lengthOf(shown, 3)
          const printed = CASES.map((c) => c.printed.join("\n"))
          for (const block of shown) {
            assert.include(printed, block.code.trim().replaceAll("0193…", "…"), `${page}:${block.line}`)
          }
        }))

      it.effect(
        "the agent loop's commands print what the page shows while a person approves",
        () =>
          Effect.gen(function*() {
            const svc = yield* SvcTest
            const org = yield* SvcTest.org()
            const agentKey = yield* org.newKey(["agents.read", "agents.write"])
            const loop = blocks.filter((block) => block.lang === "sh" && inLoop(block.line))
            assert.lengthOf(loop, 1)
            const lines = loop[0]!.code.split("\n")
            const commands = lines.filter((line) => !line.startsWith("#"))
            const shown = lines.filter((line) => line.startsWith("# ")).map((line) =>
              line.slice(2).replaceAll("0193…", "…")
            )
            assert.deepStrictEqual(commands.map((command) => command.split(" ").slice(2, 6).join(" ")), [
              "npm run -s example:agent",
              "python3 examples/agent.py payments.refund refund-2"
            ])
            // As in a newcomer's terminal: the shell's own Node (whatever its version) and npm, no
            // node_modules/.bin on PATH, no npm variables; this run's svc for 127.0.0.1:8080.
            const shell: Record<string, string> = {}
            for (const [name, value] of Object.entries(process.env)) {
              if (value !== undefined && !name.toLowerCase().startsWith("npm_") && name !== "NODE") shell[name] = value
            }
            shell.PATH = (process.env.PATH ?? "").split(path.delimiter).filter((dir) => !dir.includes("node_modules"))
              .join(path.delimiter)
            for (const command of commands) {
              const stepId = / (refund-\d+) /.exec(command)![1]!
              const agent = yield* start("env", [
                "-i",
                ...Object.entries({ ...shell, KEY: agentKey.key }).map(([name, value]) => `${name}=${value}`),
                "bash",
                "-c",
                command.replaceAll("http://127.0.0.1:8080", svc.baseUrl)
              ], {})
              yield* decideWhenWaiting(org, agent, "approve")
              const done = yield* finished(agent)
              assert.strictEqual(done.code, 0, agent.output())
              assert.deepStrictEqual(
                done.lines.map(normalize),
                shown.map((line) => line.replace("refund-1", stepId)),
                command
              )
            }
          }).pipe(Effect.scoped),
        90_000
      )

      it.effect(
        "its requests answer as the page says: a pending step, a policy, rules on arguments and their dry run, a decision with a reason, a reviewer group, a delegation and an escalation chain, an arguments schema and an approval with edits",
        () =>
          Effect.gen(function*() {
            const svc = yield* SvcTest
            const org = yield* SvcTest.org()
            const requests = blocks.filter((block) =>
              block.lang === "sh" && !block.flags.includes("illustrative") && !inLoop(block.line)
            )
            assert.lengthOf(requests, 12)
            // One shell session, block after block: the page defines every variable it uses but the README's KEY
            // (its "Your first calls" makes it); what a block sets, the next ones see (exported to a state file).
            const state = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "svc-approvals-page-")), "state.sh")
            const env: Record<string, string> = { KEY: org.key, STATE: state }
            const answers: Array<any> = []
            for (const block of requests) {
              const code = block.code.replaceAll("http://127.0.0.1:8080", svc.baseUrl)
              const script =
                `set -a\n[ -f "$STATE" ] && . "$STATE"\nset -eo pipefail\n${code}\nset +e\nexport -p > "$STATE"`
              const curl = yield* start("bash", ["-c", script], env)
              const done = yield* finished(curl)
              assert.strictEqual(done.code, 0, curl.output())
              if (curl.output().trim() === "") {
                continue
              }
              const answer = JSON.parse(curl.output())
              assert.isUndefined(answer.code, `${page}:${block.line}: ${curl.output()}`)
              answers.push(answer)
            }
            const [step, policy, rules, dryRun, decision, group, delegation, chain, schemaPolicy, editedStep, edited] =
              answers
            assert.strictEqual(step.decision, "pending") // no policy yet: the default asks a person
            assert.deepStrictEqual([policy.action_class, policy.mode, policy.escalation_seconds], [
              ACTION_CLASS,
              "require_approval",
              3600
            ])
            assert.deepStrictEqual(rules.rules.map((rule: { name: string }) => rule.name), ["small", "huge", "eur"])
            assert.deepStrictEqual(dryRun, {
              decision: "reject",
              rule: "huge",
              reason: "Refunds above 5 000 go through finance.",
              policy: "stored"
            })
            assert.deepStrictEqual([decision.status, decision.decision_reason], [
              "rejected",
              "Order 31 was refunded last week already."
            ])
            assert.deepStrictEqual([group.name, group.members], ["payments-leads", [
              { console_user: "ana", email: "ana@example.com", email_status: "invited" },
              { console_user: "ben", email: null, email_status: null }
            ]])
            assert.deepStrictEqual([delegation.delegate, delegation.ended_at], [{ console_user: "ben" }, null])
            assert.isAbove(Date.parse(delegation.ends_at) - Date.now(), 6 * 86_400_000)
            assert.deepStrictEqual([chain.action_class, chain.group, chain.escalation_chain], [
              "payments.payout",
              "payments-leads",
              ["finance", "cfo"]
            ])
            assert.deepStrictEqual((yield* org.client.reviewers.listGroups()).groups.map((g) => g.name), [
              "cfo",
              "finance",
              "payments-leads"
            ])
            assert.deepStrictEqual(schemaPolicy.arguments_schema.required, ["amount"])
            assert.strictEqual(editedStep.decision, "pending")
            assert.deepStrictEqual(
              [edited.status, edited.approved_arguments, edited.arguments_changed],
              ["approved", { amount: 100, currency: "EUR" }, ["/amount"]]
            )
            assert.match(edited.arguments_digest, /^[0-9a-f]{64}$/)
          }).pipe(Effect.scoped),
        60_000
      )
    })
  }
)
