/**
 * The consumer's files of test/packaging/packages.test.ts: what a user of
 * each package writes, installed from the tarballs outside the repository.
 */

/** Type-checked with `tsc --strict`: each package's public API, typed errors included. */
export const CONSUMER_TS = `import { Effect } from "effect"
import { CorrectionShapeMismatch, DeliveryFailed, NotFound, SvcClient } from "@svc/client"
import { constructEvent, handleRequest, memoryDedupStore, type WebhookEvent, WebhookVerificationError } from "@svc/receiver"
import { SvcWebhooks, WebhookRejected } from "@svc/receiver/effect"
import { SvcTest, type TestOrg } from "@svc/testing"

export const taskName = Effect.gen(function*() {
  const svc = yield* SvcClient
  const task = yield* svc.tasks.get({ params: { task_id: "0193a0a0-0000-7000-8000-000000000000" } })
  const name: string = task.name
  return name
}).pipe(
  Effect.catchTag("NotFound", (error: NotFound) => Effect.succeed(\`missing: \${error.title}\`)),
  Effect.provide(SvcClient.layer({ baseUrl: "http://127.0.0.1:8080", apiKey: "svc_test" }))
)

export const verified = async (raw: string, header: string, secret: string): Promise<string> => {
  try {
    const event: WebhookEvent = await constructEvent(raw, header, secret)
    return event.type
  } catch (error) {
    if (error instanceof WebhookVerificationError) return error.reason
    throw error
  }
}

export const receiver = (request: Request): Promise<Response> =>
  handleRequest(request, { secret: "whsec_x", dedup: memoryDedupStore(), onEvent: async () => {} })

export const inEffect = (raw: string, header: string) =>
  SvcWebhooks.constructEvent(raw, header, "whsec_x").pipe(
    Effect.catchTag("WebhookRejected", (error: WebhookRejected) => Effect.succeed(error.reason))
  )

export const orgId = Effect.map(SvcTest.org({ scopes: ["tasks.write"] }), (org: TestOrg) => org.orgId)

// A capability's own problems are exported classes: matched by tag with their fields typed, or by instanceof.
export const corrected = Effect.gen(function*() {
  const svc = yield* SvcClient
  const runs = yield* svc.tasks.listRuns({ params: { task_id: "0193a0a0-0000-7000-8000-000000000000" }, query: { limit: 5 } })
  return yield* svc.feedback.submit({ payload: { inference_log_id: runs.runs[0]!.trace_id, score: -1, correction: {} } })
}).pipe(
  Effect.catchTag("CorrectionShapeMismatch", (error: CorrectionShapeMismatch) => Effect.succeed(error.field))
)
export const isDeliveryFailure = (error: unknown): error is DeliveryFailed => error instanceof DeliveryFailed
`

/** Must fail to compile, and alone: proof that the types above were checked, not resolved to \`any\`. */
export const BROKEN_TS = `import { Effect } from "effect"
import { SvcClient } from "@svc/client"
import { constructEvent } from "@svc/receiver"
import { SvcTest } from "@svc/testing"

const client = Effect.gen(function*() {
  return yield* SvcClient
})
export const wrongPayload = Effect.flatMap(client, (svc) => svc.tasks.create({ payload: { name: 42 } }))
export const wrongTag = Effect.flatMap(client, (svc) => svc.tasks.list({})).pipe(Effect.catchTag("NoSuchError", () => Effect.void))
export const wrongArgs = constructEvent(1, 2, 3)
export const wrongScope = SvcTest.org({ scopes: ["no.such.scope"] })
export const wrongQueryType = Effect.flatMap(client, (svc) => svc.tasks.list({ query: { limit: "10" } }))
export const wrongQueryName = Effect.flatMap(client, (svc) => svc.tasks.list({ query: { page_size: 10 } }))
`

/**
 * Plain Node, no bundler and no TypeScript: the client against a running
 * server (task, run, feedback), and, when RECEIVER_URL is set, a webhook
 * endpoint at the receiver, its secret written to SECRET_FILE, and a test
 * delivery. Prints one JSON line.
 */
export const CLIENT_MJS = `import { Effect } from "effect"
import { SvcClient } from "@svc/client"
import { writeFileSync } from "node:fs"

const program = Effect.gen(function*() {
  const svc = yield* SvcClient
  const task = yield* svc.tasks.create({ payload: { name: "triage", answer_schema: { type: "object" } } })
  const run = yield* svc.tasks.logRun({ params: { task_id: task.id }, payload: { input: "q", answer: {} } })
  const feedback = yield* svc.feedback.submit({ payload: { inference_log_id: run.trace_id, score: 1 } })
  const missing = yield* svc.tasks.get({ params: { task_id: "0193a0a0-0000-7000-8000-000000000000" } }).pipe(
    Effect.as("found"),
    Effect.catchTag("NotFound", (error) => Effect.succeed(error._tag))
  )
  let delivery
  if (process.env.RECEIVER_URL) {
    const created = yield* svc.notifications.create({ payload: { url: process.env.RECEIVER_URL } })
    writeFileSync(process.env.SECRET_FILE, created.secret)
    delivery = yield* svc.notifications.test({ params: { id: created.endpoint.id }, payload: {} })
  }
  return { node: process.versions.node, task: task.id, run: run.trace_id, feedback: feedback.status, missing, delivery }
}).pipe(Effect.provide(SvcClient.layer({ baseUrl: process.env.SVC_URL, apiKey: process.env.SVC_API_KEY })))

console.log(JSON.stringify(await Effect.runPromise(program)))
`

/**
 * A webhook receiver on Node with the kit: HTTPS on loopback (the test CA),
 * verifying each delivery with the secret in SECRET_FILE; 202 when
 * verified, 400 otherwise. Saves the last delivery for the CommonJS check.
 */
export const RECEIVER_MJS = `import { createServer } from "node:https"
import { readFileSync, writeFileSync } from "node:fs"
import { constructEventFromHeaders, WebhookVerificationError } from "@svc/receiver"

const server = createServer({ cert: readFileSync(process.env.CERT_FILE), key: readFileSync(process.env.KEY_FILE) }, async (request, response) => {
  const chunks = []
  for await (const chunk of request) chunks.push(chunk)
  const raw = Buffer.concat(chunks)
  writeFileSync(process.env.DELIVERY_FILE, JSON.stringify({ headers: request.headers, body: raw.toString("utf8") }))
  try {
    const event = await constructEventFromHeaders(new Uint8Array(raw), request.headers, readFileSync(process.env.SECRET_FILE, "utf8"))
    console.log(\`VERIFIED \${event.type} \${event.id}\`)
    response.writeHead(202).end()
  } catch (error) {
    console.log(\`REFUSED \${error instanceof WebhookVerificationError ? error.reason : String(error)}\`)
    response.writeHead(400).end()
  }
})
server.listen(0, "127.0.0.1", () => console.log(\`LISTENING \${server.address().port}\`))
`

/** CommonJS: the same delivery, verified through require(). */
export const VERIFY_CJS = `const { constructEventFromHeaders, WebhookVerificationError } = require("@svc/receiver")
const { readFileSync } = require("node:fs")

const delivery = JSON.parse(readFileSync(process.env.DELIVERY_FILE, "utf8"))
const secret = readFileSync(process.env.SECRET_FILE, "utf8")
constructEventFromHeaders(delivery.body, delivery.headers, secret).then(async (event) => {
  const refused = await constructEventFromHeaders(delivery.body + " ", delivery.headers, secret).catch((error) => error)
  console.log(JSON.stringify({ type: event.type, test: event.test, refused: refused instanceof WebhookVerificationError ? refused.reason : "accepted" }))
})
`

/** \`@svc/receiver/effect\`: the same delivery, verified in an Effect program, and a typed rejection. */
export const VERIFY_EFFECT_MJS = `import { Effect } from "effect"
import { SvcWebhooks } from "@svc/receiver/effect"
import { readFileSync } from "node:fs"

const delivery = JSON.parse(readFileSync(process.env.DELIVERY_FILE, "utf8"))
const secret = readFileSync(process.env.SECRET_FILE, "utf8")
const program = Effect.gen(function*() {
  const event = yield* SvcWebhooks.constructEventFromHeaders(delivery.body, delivery.headers, secret)
  const refused = yield* SvcWebhooks.constructEventFromHeaders(delivery.body, delivery.headers, "whsec_wrong").pipe(
    Effect.as("accepted"),
    Effect.catchTag("WebhookRejected", (error) => Effect.succeed(error.reason))
  )
  return { type: event.type, refused }
})
console.log(JSON.stringify(await Effect.runPromise(program)))
`

/**
 * A REST consumer that never installs `@svc/client`: a client generated by
 * `@hey-api/openapi-ts` (a widely used generator nobody here wrote) from the
 * server's own `/openapi.json`, compiled with `tsc --strict` together with
 * this flow, then run against the server. Prints one JSON line.
 */
export const GENERATED_FLOW_TS = `import { createClient } from "./svc-api/client/index.ts"
import { feedbackList, feedbackSubmit, tasksCreate, tasksGet, tasksList, tasksLogRun } from "./svc-api/sdk.gen.ts"
import type { FeedbackListResponses, InvalidRequestEncoded, NotFoundEncoded } from "./svc-api/types.gen.ts"

const client = createClient({ baseUrl: process.env.SVC_URL!, headers: { authorization: \`Bearer \${process.env.SVC_API_KEY}\` } })

const task = (await tasksCreate({
  client,
  throwOnError: true,
  body: { name: "generated-client", answer_schema: { type: "object", properties: { label: { type: "string" } }, required: ["label"] } }
})).data
const run = (await tasksLogRun({ client, throwOnError: true, path: { task_id: task.id }, body: { input: "q", answer: { label: "spam" } } })).data
const page = (await tasksList({ client, throwOnError: true, query: { limit: 1 } })).data
const nextCursor: string | null = page.next_cursor
const sent = (await feedbackSubmit({
  client,
  throwOnError: true,
  body: { inference_log_id: run.trace_id, score: -1, correction: { label: "ham" } }
})).data
const listed = (await feedbackList({ client, throwOnError: true, query: { task_id: task.id, limit: 10 } })).data
const item: FeedbackListResponses[200]["feedback"][number] | undefined = listed.feedback.find((each) => each.id === sent.id)
// A feedback item's score is the one sent: 1, 0 or -1 (not any number).
const score: 1 | 0 | -1 | undefined = item?.score

// Refusals: the problem bodies are the document's, told apart by \`code\`.
const tooMany = await tasksList({ client, query: { limit: 101 } })
const invalid: InvalidRequestEncoded | undefined = tooMany.error?.code === "INVALID_REQUEST" ? tooMany.error : undefined
const missing = await tasksGet({ client, path: { task_id: "0193a0a0-0000-7000-8000-000000000000" } })
const notFound: NotFoundEncoded | undefined = missing.error?.code === "NOT_FOUND" ? missing.error : undefined

console.log(JSON.stringify({
  task: task.id,
  run: run.trace_id,
  page: page.tasks.length,
  next_cursor: nextCursor,
  correction: item?.correction,
  score,
  invalid: { status: tooMany.response.status, code: invalid?.code, field: invalid?.field },
  not_found: { status: missing.response.status, code: notFound?.code }
}))

/** Never called: what the generated types refuse (each line compiles, and so fails, if the document were looser). */
export const refused = () => [
  // @ts-expect-error \`limit\` is an integer, not a string
  tasksList({ client, query: { limit: "10" } }),
  // @ts-expect-error \`score\` is 1, 0 or -1
  feedbackSubmit({ client, body: { inference_log_id: "0".repeat(32), score: 2 } }),
  // @ts-expect-error a task needs its answer schema
  tasksCreate({ client, body: { name: "x" } }),
  // @ts-expect-error \`next_cursor\` may be null
  ((cursor: string) => cursor)(nextCursor)
]
`

/** The generator's settings: the document from OPENAPI_URL, imports with their `.ts` extension (Node runs the files as they are). */
export const GENERATOR_CONFIG_MJS = `export default {
  input: process.env.OPENAPI_URL,
  output: { path: "svc-api", importFileExtension: ".ts" }
}
`
