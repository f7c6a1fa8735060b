/**
 * Agent sessions and governed steps. A step is answered from the
 * organization's policy for its action class: `allow` or `reject` at once,
 * or `pending` with a new approval. Its `step_id` is the idempotency key
 * within the session.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Schema, Stream } from "effect"
import { appendApprovalStream, approvalsTopic } from "../approvals/OrgStream.ts"
import { GovernedStep, type Session, type SessionDetail, type Step, type StepAnswer, StepDecision, type ToolOutcome } from "../api/Agents.ts"
import { InvalidRequest, InvalidTransition, NotFound } from "../api/Errors.ts"
import { Approvals } from "../approvals/Approvals.ts"
import { Metrics } from "../observability/Metrics.ts"
import { SvcConfig } from "../platform/Config.ts"
import { newId } from "../platform/Ids.ts"
import { JsonColumn, rowsOf, Timestamp, TimestampOrNull } from "../platform/Rows.ts"
import { databaseNow } from "../platform/Time.ts"
import { Topics, Wakeups } from "../platform/Wakeups.ts"
import { appendSessionEvent, hubFrames, SessionHub, STREAM_BATCH, storedEvents } from "../streams/SessionEvents.ts"

const SessionRows = rowsOf("agent_sessions", Schema.Struct({
  id: Schema.String,
  task_id: Schema.NullOr(Schema.String),
  created_at: Timestamp
}))

const StepColumns = Schema.Struct({
  step_id: Schema.String,
  tool: Schema.String,
  action_class: Schema.String,
  arguments: JsonColumn(GovernedStep.fields.arguments),
  decision: StepDecision,
  approval_id: Schema.NullOr(Schema.String),
  resolution: StepDecision,
  outcome: Schema.NullOr(Schema.Literals(["succeeded", "failed"])),
  outcome_body: Schema.NullOr(JsonColumn(Schema.Struct({ result: Schema.optionalKey(Schema.Json), error: Schema.optionalKey(Schema.String) }))),
  outcome_at: TimestampOrNull,
  created_at: Timestamp
})
type StepRow = typeof StepColumns.Type
const StepRows = rowsOf("agent_steps", StepColumns)
const EventRows = storedEvents("session_events")

const STEP_COLUMNS = "step_id, tool, action_class, arguments, decision, approval_id, resolution, outcome, outcome_body, outcome_at, created_at"

const toSession = (row: { readonly id: string; readonly task_id: string | null; readonly created_at: string }): Session => ({
  id: row.id,
  task_id: row.task_id,
  created_at: row.created_at
})

const toAnswer = (row: Pick<StepRow, "decision" | "approval_id">): StepAnswer =>
  row.approval_id === null ? { decision: row.decision } : { decision: row.decision, approval_id: row.approval_id }

const toStep = (row: StepRow): Step => ({
  step_id: row.step_id,
  tool: row.tool,
  action_class: row.action_class,
  arguments: row.arguments,
  decision: row.decision,
  ...(row.approval_id === null ? {} : { approval_id: row.approval_id }),
  resolution: row.resolution,
  ...(row.outcome === null ? {} : {
    outcome: {
      status: row.outcome,
      ...(row.outcome_body?.result === undefined ? {} : { result: row.outcome_body.result }),
      ...(row.outcome_body?.error === undefined ? {} : { error: row.outcome_body.error }),
      reported_at: row.outcome_at ?? row.created_at
    }
  }),
  created_at: row.created_at
})

const sameJson = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  if (Array.isArray(a)) {
    const bb = b as Array<unknown>
    return a.length === bb.length && a.every((value, i) => sameJson(value, bb[i]))
  }
  const ka = Object.keys(a).sort()
  const kb = Object.keys(b).sort()
  return ka.length === kb.length && ka.every((key, i) =>
    key === kb[i] && sameJson((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key])
  )
}

export class AgentSessions extends Context.Service<AgentSessions, {
  readonly create: (orgId: string, input: { readonly task_id?: string }) => Effect.Effect<Session, NotFound>
  readonly get: (orgId: string, sessionId: string) => Effect.Effect<SessionDetail, NotFound>
  readonly governStep: (orgId: string, sessionId: string, step: GovernedStep) => Effect.Effect<StepAnswer, NotFound | InvalidRequest>
  readonly reportOutcome: (
    orgId: string,
    sessionId: string,
    stepId: string,
    outcome: ToolOutcome
  ) => Effect.Effect<Step, NotFound | InvalidTransition>
  /** SSE frames of the session after event id `after` (`"0"`: from the start), live until the client leaves. */
  readonly stream: (orgId: string, sessionId: string, after: string) => Effect.Effect<Stream.Stream<string>, NotFound>
}>()("svc/agents/AgentSessions") {
  static readonly layer = Layer.effect(
    AgentSessions,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const approvals = yield* Approvals
      const wakeups = yield* Wakeups
      const hub = yield* SessionHub
      const metrics = yield* Metrics
      const config = yield* SvcConfig

      const findSession = (orgId: string, sessionId: string) =>
        Effect.flatMap(
          SessionRows.one(sql`SELECT id, task_id, created_at FROM agent_sessions WHERE id = ${sessionId} AND org_id = ${orgId}`),
          (row) => row === undefined ? Effect.fail(new NotFound({ detail: "No such agent session." })) : Effect.succeed(row)
        )

      // The span without `Effect.fn`'s call-site stack capture: this runs on every POST.
      const create = Effect.fnUntraced(function*(orgId: string, input: { readonly task_id?: string }) {
        const taskId = input.task_id ?? null
        const id = newId()
        const row = yield* SessionRows.one(sql`
          INSERT INTO agent_sessions (id, org_id, task_id)
          SELECT ${id}, ${orgId}, ${taskId}
          WHERE ${taskId}::uuid IS NULL OR EXISTS (SELECT 1 FROM tasks WHERE id = ${taskId} AND org_id = ${orgId})
          RETURNING id, task_id, created_at
        `)
        if (row === undefined) return yield* new NotFound({ detail: "No such task." })
        yield* Effect.annotateCurrentSpan({ "svc.session_id": id })
        return toSession(row)
      }, Effect.withSpan("AgentSessions.create", undefined, { captureStackTrace: false }))

      const get = Effect.fn("AgentSessions.get")(function*(orgId: string, sessionId: string) {
        const session = yield* findSession(orgId, sessionId)
        const steps = yield* StepRows.all(sql`
          SELECT ${sql.literal(STEP_COLUMNS)} FROM agent_steps WHERE session_id = ${sessionId} ORDER BY seq
        `)
        return { ...toSession(session), steps: steps.map(toStep) }
      })

      const findStep = (sessionId: string, stepId: string) =>
        StepRows.one(sql`SELECT ${sql.literal(STEP_COLUMNS)} FROM agent_steps WHERE session_id = ${sessionId} AND step_id = ${stepId}`)

      /** The original answer to a re-sent step, or 400 when it is not the same step. */
      const replay = (existing: StepRow, step: GovernedStep) =>
        existing.tool === step.tool && existing.action_class === step.action_class && sameJson(existing.arguments, step.arguments)
          ? Effect.succeed(toAnswer(existing))
          : Effect.fail(new InvalidRequest({
            field: "step_id",
            detail: "This step_id was already sent in this session with another tool, action class or arguments."
          }))

      const governStep = Effect.fn("AgentSessions.governStep")(function*(orgId: string, sessionId: string, step: GovernedStep) {
        yield* Effect.annotateCurrentSpan({ "svc.session_id": sessionId, "svc.action_class": step.action_class })
        const session = yield* findSession(orgId, sessionId)
        const earlier = yield* findStep(sessionId, step.step_id)
        if (earlier !== undefined) return yield* replay(earlier, step)

        const rule = yield* approvals.ruleFor(orgId, step.action_class)
        const result = yield* sql.withTransaction(Effect.gen(function*() {
          // Lock the session first: a concurrent send of the same step_id
          // has committed by the time we hold it, and we answer with its row.
          yield* sql`SELECT 1 FROM agent_sessions WHERE id = ${sessionId} FOR UPDATE`
          const raced = yield* findStep(sessionId, step.step_id)
          if (raced !== undefined) return { kind: "existing" as const, row: raced }
          // Deadlines start from the database's clock, not this process's.
          const now = yield* databaseNow(sql)
          const decision: StepDecision = rule.mode === "allow" ? "allow" : rule.mode === "reject" ? "reject" : "pending"
          const approvalId = decision === "pending"
            ? yield* approvals.requestInTransaction({
              orgId,
              sessionId,
              stepId: step.step_id,
              taskId: session.task_id,
              rule,
              now
            })
            : null
          yield* sql`
            INSERT INTO agent_steps (session_id, step_id, org_id, tool, action_class, arguments, decision, approval_id, resolution, created_at)
            VALUES (${sessionId}, ${step.step_id}, ${orgId}, ${step.tool}, ${step.action_class}, ${JSON.stringify(step.arguments)}::jsonb,
              ${decision}, ${approvalId}, ${decision}, ${new Date(now).toISOString()}::timestamptz)
          `
          yield* appendSessionEvent(sql, {
            sessionId,
            orgId,
            name: "step:governed",
            data: {
              step_id: step.step_id,
              tool: step.tool,
              action_class: step.action_class,
              arguments: step.arguments,
              decision,
              ...(approvalId === null ? {} : { approval_id: approvalId })
            }
          })
          // Last: the organization's approval stream (its counter lock is taken after every other).
          if (approvalId !== null) yield* appendApprovalStream(sql, orgId, [{ type: "approval.requested", approvalId }])
          return { kind: "new" as const, answer: toAnswer({ decision, approval_id: approvalId }) }
        })).pipe(Effect.orDie)
        if (result.kind === "existing") return yield* replay(result.row, step)
        if (result.answer.approval_id !== undefined) {
          yield* Effect.annotateCurrentSpan({ "svc.approval_id": result.answer.approval_id })
          yield* wakeups.signal(Topics.events, Topics.approvals)
          yield* hub.notify(approvalsTopic(orgId))
        }
        yield* hub.notify(sessionId)
        return result.answer
      })

      const reportOutcome = Effect.fn("AgentSessions.reportOutcome")(function*(
        orgId: string,
        sessionId: string,
        stepId: string,
        outcome: ToolOutcome
      ) {
        yield* Effect.annotateCurrentSpan({ "svc.session_id": sessionId })
        yield* findSession(orgId, sessionId)
        const body = {
          ...(outcome.result === undefined ? {} : { result: outcome.result }),
          ...(outcome.error === undefined ? {} : { error: outcome.error })
        }
        const result = yield* sql.withTransaction(Effect.gen(function*() {
          const row = yield* StepRows.one(sql`
            UPDATE agent_steps SET outcome = ${outcome.status}, outcome_body = ${sql.json(body)},
              outcome_at = now()
            WHERE session_id = ${sessionId} AND step_id = ${stepId} AND resolution = 'allow' AND outcome IS NULL
            RETURNING ${sql.literal(STEP_COLUMNS)}
          `)
          if (row === undefined) return { recorded: false as const, row: yield* findStep(sessionId, stepId) }
          yield* appendSessionEvent(sql, {
            sessionId,
            orgId,
            name: outcome.status === "succeeded" ? "tool:succeeded" : "tool:failed",
            data: { step_id: stepId, tool: row.tool, status: outcome.status, ...body, reported_at: row.outcome_at ?? row.created_at }
          })
          return { recorded: true as const, row }
        })).pipe(Effect.orDie)
        if (result.row === undefined) return yield* new NotFound({ detail: "No such step in this session." })
        if (result.recorded) {
          yield* hub.notify(sessionId)
          return toStep(result.row)
        }
        const existing = result.row
        if (existing.outcome !== null && existing.outcome === outcome.status) return toStep(existing)
        return yield* new InvalidTransition({
          status_now: existing.outcome ?? existing.resolution,
          detail: existing.outcome !== null
            ? `The step's outcome was already reported as ${existing.outcome}.`
            : `The step's resolution is ${existing.resolution}; only an allowed step has a tool outcome.`
        })
      })

      const keepAliveMs = config.sseKeepAliveMs
      const pollMs = config.ssePollMs

      const stream = Effect.fn("AgentSessions.stream")(function*(orgId: string, sessionId: string, after: string) {
        yield* Effect.annotateCurrentSpan({ "svc.session_id": sessionId })
        yield* findSession(orgId, sessionId)
        return hubFrames(hub, {
          key: sessionId,
          after,
          open: metrics.streamOpen("session"),
          read: (from) =>
            EventRows.all(sql`
              SELECT seq::text AS seq, name, data FROM session_events
              WHERE session_id = ${sessionId} AND seq > ${from} ORDER BY seq LIMIT ${STREAM_BATCH}
            `),
          keepAliveMs,
          pollMs
        })
      })

      return AgentSessions.of({ create, get, governStep, reportOutcome, stream })
    })
  )
}
