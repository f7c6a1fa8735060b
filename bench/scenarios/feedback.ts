/**
 * Sustained `POST /v1/feedback` with a correction against a task with a
 * realistic answer schema (an order: customer, line items, totals, notes),
 * measured side by side with a baseline: a bare `node:http` handler that
 * parses the same body and does the same INSERT through the same database
 * client (the same PGlite socket, or the same PostgreSQL server when
 * TEST_DATABASE_URL is set). Loopback only; bounded request counts.
 *
 * svc does per request: key authentication, the run and schema lookup,
 * JSON Schema validation, the organization's known credentials (key
 * hashes, secret store values) and the secret ruleset scan, then the INSERT.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, ManagedRuntime } from "effect"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { randomUUID } from "node:crypto"
import { SvcTest } from "../../src/testing.ts"
import type { ScenarioResult } from "../run.ts"
import { load, type RawLoad, summarize } from "../support/load.ts"

const COUNT = Number(process.env.BENCH_FEEDBACK_REQUESTS ?? 2400)
const CONCURRENCY = Number(process.env.BENCH_FEEDBACK_CONCURRENCY ?? 16)
const WARMUP = 300
const ROUNDS = 4

const answerSchema = {
  type: "object",
  required: ["customer", "items", "total", "currency"],
  additionalProperties: false,
  properties: {
    customer: {
      type: "object",
      required: ["id", "email"],
      properties: {
        id: { type: "string", pattern: "^C-[0-9]{6}$" },
        email: { type: "string", format: "email" },
        name: { type: "string", maxLength: 200 }
      }
    },
    items: {
      type: "array",
      minItems: 1,
      maxItems: 50,
      items: {
        type: "object",
        required: ["sku", "quantity", "price"],
        properties: {
          sku: { type: "string", minLength: 3 },
          quantity: { type: "integer", minimum: 1 },
          price: { type: "number", minimum: 0 },
          note: { type: "string" }
        }
      }
    },
    total: { type: "number" },
    currency: { enum: ["EUR", "USD", "GBP"] },
    status: { enum: ["open", "refunded", "shipped"] },
    notes: { type: "string", maxLength: 2000 },
    token: { type: "string" }
  }
}

const correction = (i: number) => ({
  customer: { id: `C-${String(100000 + (i % 900000))}`, email: `buyer${i}@example.com`, name: "Ada Lovelace" },
  items: Array.from({ length: 5 }, (_, k) => ({ sku: `SKU-${k}-${i % 97}`, quantity: 1 + k, price: 9.99 * (k + 1), note: "gift wrap please" })),
  total: 149.85,
  currency: "EUR",
  status: "refunded",
  notes: "Customer called twice about the late delivery; refund approved by the shift lead after checking the courier log.",
  token: "session-7"
})

export default async (): Promise<ScenarioResult> => {
  const runtime = ManagedRuntime.make(SvcTest.layer())
  try {
    const { svc, sql } = await runtime.runPromise(Effect.gen(function*() {
      return { svc: yield* SvcTest, sql: yield* PgClient.PgClient }
    }))
    const org = await runtime.runPromise(svc.provisionOrg({ scopes: ["feedback.write", "tasks.write"] }))
    const task = await runtime.runPromise(org.client.tasks.create({ payload: { name: "orders", answer_schema: answerSchema as never } }))
    const run = await runtime.runPromise(org.client.tasks.logRun({ params: { task_id: task.id }, payload: { input: { ticket: "where is my refund" }, answer: correction(0) } }))
    const bodies = Array.from({ length: 64 }, (_, i) => JSON.stringify({ inference_log_id: run.trace_id, score: -1, correction: correction(i) }))
    const headers = { authorization: `Bearer ${org.key}`, "content-type": "application/json" }

    // The baseline: parse, one INSERT through the same client, answer 201.
    const baseline = createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (chunk: Buffer) => chunks.push(chunk))
      req.on("end", () => {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { inference_log_id: string; score: number; correction: unknown }
        const id = randomUUID()
        runtime.runPromise(sql`
          INSERT INTO feedback (id, org_id, task_id, inference_log_id, score, correction, status)
          SELECT ${id}, org_id, task_id, trace_id, ${body.score}, ${sql.json(body.correction)}, 'pending'
          FROM runs WHERE trace_id = ${body.inference_log_id}
          RETURNING id, created_at
        `).then(
          (rows) => {
            res.writeHead(rows.length === 1 ? 201 : 404, { "content-type": "application/json" })
            res.end(JSON.stringify({ id, ...body, status: "pending", created_at: rows[0]?.created_at }))
          },
          () => {
            res.writeHead(500)
            res.end()
          }
        )
      })
    })
    await new Promise<void>((resolve) => baseline.listen(0, "127.0.0.1", resolve))
    const baselineUrl = `http://127.0.0.1:${(baseline.address() as AddressInfo).port}/v1/feedback`
    const svcUrl = `${svc.baseUrl}/v1/feedback`
    // A reference point: the foundation's cheapest comparable write (key
    // authentication + one INSERT of a run with the same JSON), without any
    // feedback work. The gap between it and the baseline is the framework's.
    const floorUrl = `${svc.baseUrl}/v1/tasks/${task.id}/runs`
    const floorBodies = Array.from({ length: 64 }, (_, i) => JSON.stringify({ input: { ticket: "where is my refund" }, answer: correction(i) }))

    const spec = (url: string, count: number) => ({ url, headers, bodies, count, concurrency: CONCURRENCY, expectStatus: 201 })
    await load(spec(svcUrl, WARMUP))
    await load(spec(baselineUrl, WARMUP))
    // Interleaved rounds, so a burst of other work on the machine hits both.
    const svcRuns: Array<RawLoad> = []
    const baseRuns: Array<RawLoad> = []
    const floorRuns: Array<RawLoad> = []
    await load({ ...spec(floorUrl, WARMUP), bodies: floorBodies })
    for (let round = 0; round < ROUNDS; round++) {
      svcRuns.push(await load(spec(svcUrl, Math.ceil(COUNT / ROUNDS))))
      baseRuns.push(await load(spec(baselineUrl, Math.ceil(COUNT / ROUNDS))))
      floorRuns.push(await load({ ...spec(floorUrl, Math.ceil(COUNT / ROUNDS)), bodies: floorBodies }))
    }
    baseline.close()
    const svcResult = summarize(svcRuns)
    const baseResult = summarize(baseRuns)
    const floorResult = summarize(floorRuns)

    const ratio = svcResult.rps / baseResult.rps
    return {
      name: "feedback",
      rows: [
        { variant: "svc POST /v1/feedback", ...svcResult },
        { variant: "baseline node:http + INSERT", ...baseResult },
        { variant: "reference: svc POST /v1/tasks/:id/runs", ...floorResult }
      ],
      notes: [
        `database: ${svc.database}; ${COUNT} requests each at concurrency ${CONCURRENCY} in ${ROUNDS} interleaved rounds, after ${WARMUP} warm-up requests each`,
        `throughput ratio svc/baseline: ${ratio.toFixed(2)} (aim: >= 0.50)`,
        `feedback work's own cost: svc feedback/runs reference ${(svcResult.rps / floorResult.rps).toFixed(2)}; reference/baseline ${(floorResult.rps / baseResult.rps).toFixed(2)}`
      ]
    }
  } finally {
    await runtime.dispose()
  }
}
