/**
 * Agent sessions and governed steps. A step is answered from the
 * organization's policy for its action class: `allow` or `reject` at once,
 * or `pending` with a new approval. Its `step_id` is the idempotency key
 * within the session.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema, Stream } from "effect"
import type { Statement } from "effect/sql"
import {
  type GovernedStep,
  type Session,
  type SessionDetail,
  type Step,
  type StepAnswer,
  STEPS_PAGE_DEFAULT,
  type ToolOutcome
} from "../api/Agents.ts"
import { type InvalidRequest, type InvalidTransition, NotFound, type ValidationBusy } from "../api/Errors.ts"
import { Approvals } from "../approvals/Approvals.ts"
import { approvalsTopic } from "../approvals/OrgStream.ts"
import { deadlineOffsets } from "../approvals/Requested.ts"
import { POLL_CAP_MS } from "../approvals/Scheduler.ts"
import { Topics, Wakeups } from "../database/Wakeups.ts"
import { Metrics } from "../observability/Metrics.ts"
import { SvcConfig } from "../platform/Config.ts"
import { SecretBox } from "../platform/Crypto.ts"
import { type CursorMac, type CursorScope, encodeCursor, page, type PageRequest, seqBound } from "../platform/Cursor.ts"
import { newId } from "../platform/Ids.ts"
import { Stale, whileStale } from "../platform/Optimistic.ts"
import { rowsOf, Timestamp } from "../platform/Rows.ts"
import { hubFrames, hubSignal, SessionHub, storedEvents, STREAM_BATCH } from "../streams/SessionEvents.ts"
import { type GatedOutcome, gatedOutcome, outcomeBody } from "./OutcomeStatement.ts"
import { sessionInsert } from "./SessionInsert.ts"
import { appendSessionEvent } from "./StepRecords.ts"
import {
  digestRefused,
  replay,
  reportedAgain,
  STEP_COLUMNS,
  StepPageRows,
  StepRows,
  toAnswer,
  toStep
} from "./Steps.ts"
import { stepStatement } from "./StepStatement.ts"

const SessionRows = rowsOf(
  "agent_sessions",
  Schema.Struct({
    id: Schema.String,
    task_id: Schema.NullOr(Schema.String),
    created_at: Timestamp
  })
)

const EventRows = storedEvents("session_events")

/** Runs of a step's statement that may find the cached policy out of date (a policy changed meanwhile each time). */
const MAX_POLICY_RELOADS = 5

const toSession = (
  row: { readonly id: string; readonly task_id: string | null; readonly created_at: string }
): Session => ({
  id: row.id,
  task_id: row.task_id,
  created_at: row.created_at
})

export class AgentSessions extends Context.Service<AgentSessions, {
  readonly create: (orgId: string, input: { readonly task_id?: string }) => Effect.Effect<Session, NotFound>
  /** The session and a page of its steps, oldest first. */
  readonly get: (
    orgId: string,
    sessionId: string,
    page: PageRequest
  ) => Effect.Effect<SessionDetail, NotFound | InvalidRequest>
  readonly governStep: (
    orgId: string,
    sessionId: string,
    step: GovernedStep
  ) => Effect.Effect<StepAnswer, NotFound | InvalidRequest | ValidationBusy>
  /**
   * `governStep` with another owner's row written in the step's statement when the step is new
   * (`StepStatement.ts`, `companion`): the piece for the step's decision, and what it answered (`undefined`:
   * the step was not new, or no piece).
   */
  readonly governStepWith: (
    orgId: string,
    sessionId: string,
    step: GovernedStep,
    companion: (decision: StepAnswer["decision"], approvalId: string | null) => Statement.Fragment | undefined
  ) => Effect.Effect<
    { readonly answer: StepAnswer; readonly companion: unknown },
    NotFound | InvalidRequest | ValidationBusy
  >
  readonly reportOutcome: (
    orgId: string,
    sessionId: string,
    stepId: string,
    outcome: ToolOutcome
  ) => Effect.Effect<Step, NotFound | InvalidTransition | InvalidRequest>
  /**
   * `reportOutcome` behind a gate the caller writes, in one statement (`OutcomeStatement.ts`): whether
   * the gate passed, and whether the outcome was recorded (an allowed step of the organization without one).
   */
  readonly reportOutcomeGated: (
    input: GatedOutcome
  ) => Effect.Effect<{ readonly gated: boolean; readonly recorded: boolean }>
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
      const box = yield* SecretBox
      const mac: CursorMac = (message) => box.mac("cursor", message)

      const findSession = (orgId: string, sessionId: string) =>
        Effect.flatMap(
          SessionRows.one(
            sql`SELECT id, task_id, created_at FROM agent_sessions WHERE id = ${sessionId} AND org_id = ${orgId}`
          ),
          (row) =>
            row === undefined ? Effect.fail(new NotFound({ detail: "No such agent session." })) : Effect.succeed(row)
        )

      // The span without `Effect.fn`'s call-site stack capture: this runs on every POST.
      const create = Effect.fnUntraced(function*(orgId: string, input: { readonly task_id?: string }) {
        const taskId = input.task_id ?? null
        const id = newId()
        const row = yield* SessionRows.one(sessionInsert(sql, id, orgId, taskId))
        if (row === undefined) return yield* new NotFound({ detail: "No such task." })
        yield* Effect.annotateCurrentSpan({ "svc.session_id": id })
        return toSession(row)
      }, Effect.withSpan("AgentSessions.create", undefined, { captureStackTrace: false }))

      const get = Effect.fn("AgentSessions.get")(function*(orgId: string, sessionId: string, options: PageRequest) {
        const scope: CursorScope = { orgId, list: "session-steps", filters: [sessionId] }
        const bound = yield* seqBound(mac, scope, options.cursor)
        const session = yield* findSession(orgId, sessionId)
        const limit = options.limit ?? STEPS_PAGE_DEFAULT
        const rows = yield* StepPageRows.all(sql`
          SELECT s.seq::text AS seq, ${sql.literal(STEP_COLUMNS)} FROM agent_steps s
          WHERE s.session_id = ${sessionId} AND s.seq > ${Option.getOrElse(bound, () => "0")}
          ORDER BY s.seq LIMIT ${limit + 1}
        `)
        const { items, next_cursor } = page(rows, limit, (seq) => encodeCursor(mac, scope, seq))
        return { ...toSession(session), steps: items.map(toStep), next_cursor }
      })

      const findStep = (sessionId: string, stepId: string) =>
        StepRows.one(
          sql`SELECT ${
            sql.literal(STEP_COLUMNS)
          } FROM agent_steps WHERE session_id = ${sessionId} AND step_id = ${stepId}`
        )
      /** The step as recorded, when the session is the organization's. */
      const findOwnStep = (orgId: string, sessionId: string, stepId: string) =>
        StepRows.one(sql`
          SELECT ${
          sql.literal(STEP_COLUMNS)
        } FROM agent_steps WHERE session_id = ${sessionId} AND step_id = ${stepId} AND org_id = ${orgId}
        `)

      /**
       * One statement (`StepStatement.ts`). It writes nothing when the
       * cached policy turned out to be out of date: the policy is read
       * again and the statement runs again.
       */
      const governStepWith = Effect.fn("AgentSessions.governStep")(
        function*(
          orgId: string,
          sessionId: string,
          step: GovernedStep,
          companion?: (decision: StepAnswer["decision"], approvalId: string | null) => Statement.Fragment | undefined
        ) {
          // The OpenTelemetry GenAI semantic conventions' names beside svc's own (docs/telemetry.md).
          yield* Effect.annotateCurrentSpan({
            "svc.session_id": sessionId,
            "svc.action_class": step.action_class,
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": step.tool,
            "gen_ai.tool.call.id": step.step_id,
            "gen_ai.conversation.id": sessionId
          })
          return yield* whileStale(
            MAX_POLICY_RELOADS,
            Effect.gen(function*() {
              // The policy's answer (`approvals/StepRulings.ts`); a step sent again is answered from its row when that costs less.
              const answered = yield* approvals.answerStep(
                orgId,
                sessionId,
                step,
                findOwnStep(orgId, sessionId, step.step_id)
              )
              if (answered._tag === "SentBefore") {
                return { answer: yield* replay(answered.answer, step), companion: undefined }
              }
              const { ruling } = answered
              const approval = ruling.decision === "pending" ? { id: newId(), eventId: newId() } : null
              // The scheduler re-reads its next deadline at least every POLL_CAP_MS:
              // only an approval due sooner than that needs to wake it.
              const wake = approval === null
                ? wakeups.inStatement(hubSignal(sessionId))
                : deadlineOffsets(ruling.settings).due <= POLL_CAP_MS
                ? wakeups.inStatement(
                  Topics.events,
                  Topics.approvals,
                  hubSignal(sessionId),
                  hubSignal(approvalsTopic(orgId))
                )
                : wakeups.inStatement(Topics.events, hubSignal(sessionId), hubSignal(approvalsTopic(orgId)))
              const row = yield* stepStatement(sql, {
                orgId,
                sessionId,
                step,
                ruling,
                approval,
                notify: wake.notify,
                companion: companion?.(ruling.decision, approval?.id ?? null)
              })
              if (row === undefined || !row.found) return yield* new NotFound({ detail: "No such agent session." })
              if (row.decision !== null) {
                const answer = yield* replay({
                  tool: row.tool!,
                  action_class: row.action_class!,
                  arguments: row.arguments,
                  decision: row.decision,
                  approval_id: row.approval_id,
                  rule: row.rule,
                  reason: row.reason
                }, step)
                return { answer, companion: undefined }
              }
              if (row.inserted) {
                yield* wake.local
                if (approval !== null) yield* Effect.annotateCurrentSpan({ "svc.approval_id": approval.id })
                const answer = toAnswer({
                  decision: ruling.decision,
                  approval_id: approval?.id ?? null,
                  rule: ruling.rule,
                  reason: ruling.reason
                })
                return { answer, companion: row.companion ?? undefined }
              }
              if (row.fresh) {
                // A concurrent send of this step_id committed after the statement's snapshot.
                const raced = yield* findStep(sessionId, step.step_id)
                if (raced === undefined) {
                  return yield* Effect.die(new Error("a governed step neither inserted nor found"))
                }
                return { answer: yield* replay(raced, step), companion: undefined }
              }
              // The cached policy was out of date: read it again.
              yield* approvals.forgetRules(orgId)
              return yield* new Stale({ what: `the policy of action class ${step.action_class}` })
            })
          )
        }
      )

      const governStep = (orgId: string, sessionId: string, step: GovernedStep) =>
        Effect.map(governStepWith(orgId, sessionId, step), (governed) => governed.answer)

      const reportOutcome = Effect.fn("AgentSessions.reportOutcome")(function*(
        orgId: string,
        sessionId: string,
        stepId: string,
        outcome: ToolOutcome
      ) {
        yield* Effect.annotateCurrentSpan({ "svc.session_id": sessionId })
        yield* findSession(orgId, sessionId)
        const body = outcomeBody(outcome)
        const result = yield* sql.withTransaction(Effect.gen(function*() {
          const row = yield* StepRows.one(sql`
            UPDATE agent_steps SET outcome = ${outcome.status}, outcome_body = ${sql.json(body)},
              outcome_at = now()
            WHERE session_id = ${sessionId} AND step_id = ${stepId} AND resolution = 'allow' AND outcome IS NULL
              AND arguments_digest IS NOT DISTINCT FROM ${outcome.arguments_digest ?? null}
            RETURNING ${sql.literal(STEP_COLUMNS)}
          `)
          if (row === undefined) return { recorded: false as const, row: yield* findStep(sessionId, stepId) }
          yield* appendSessionEvent(sql, {
            sessionId,
            orgId,
            name: outcome.status === "succeeded" ? "tool:succeeded" : "tool:failed",
            data: {
              step_id: stepId,
              tool: row.tool,
              status: outcome.status,
              ...body,
              reported_at: row.outcome_at ?? row.created_at
            }
          })
          return { recorded: true as const, row }
        })).pipe(Effect.orDie)
        if (result.row === undefined) return yield* new NotFound({ detail: "No such step in this session." })
        if (result.recorded) {
          yield* hub.notify(sessionId)
          return toStep(result.row)
        }
        if (result.row.resolution === "allow" && result.row.outcome === null) return yield* digestRefused(result.row)
        return yield* reportedAgain(result.row, outcome.status)
      })

      const reportOutcomeGated = Effect.fn("AgentSessions.reportOutcomeGated")(function*(input: GatedOutcome) {
        yield* Effect.annotateCurrentSpan({ "svc.session_id": input.sessionId })
        const wake = wakeups.inStatement(hubSignal(input.sessionId))
        const row = yield* gatedOutcome(sql, { ...input, notify: wake.notify })
        if (row.recorded) yield* wake.local
        return row
      })

      const stream = Effect.fn("AgentSessions.stream")(function*(orgId: string, sessionId: string, after: string) {
        yield* Effect.annotateCurrentSpan({ "svc.session_id": sessionId })
        yield* findSession(orgId, sessionId)
        return hubFrames(hub, {
          key: sessionId,
          after,
          open: metrics.streamOpen("session"),
          read: (from) =>
            EventRows.all(sql`
              SELECT e.seq::text AS seq, e.name, e.data FROM session_events e
              WHERE e.session_id = ${sessionId} AND e.seq > ${from} ORDER BY e.seq LIMIT ${STREAM_BATCH}
            `).pipe(Effect.map((rows) => ({ rows, held: false }))),
          keepAliveMs: config.sseKeepAliveMs,
          pollMs: config.ssePollMs
        })
      })

      return AgentSessions.of({ create, get, governStep, governStepWith, reportOutcome, reportOutcomeGated, stream })
    })
  )
}
