/**
 * Agent sessions and governed steps. A step is answered from the
 * organization's policy for its action class: `allow` or `reject` at once,
 * or `pending` with a new approval. Its `step_id` is the idempotency key
 * within the session.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema, Stream } from "effect"
import {
  GovernedStep,
  type Session,
  type SessionDetail,
  type Step,
  type StepAnswer,
  StepDecision,
  STEPS_PAGE_DEFAULT,
  type ToolOutcome
} from "../api/Agents.ts"
import { InvalidRequest, InvalidTransition, NotFound, type ValidationBusy } from "../api/Errors.ts"
import { Approvals } from "../approvals/Approvals.ts"
import { EditColumns, editStepMembers } from "../approvals/Edits.ts"
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
import { JsonColumn, rowsOf, Timestamp, TimestampOrNull } from "../platform/Rows.ts"
import { hubFrames, hubSignal, SessionHub, storedEvents, STREAM_BATCH } from "../streams/SessionEvents.ts"
import { sessionInsert } from "./SessionInsert.ts"
import { appendSessionEvent } from "./StepRecords.ts"
import { stepStatement } from "./StepStatement.ts"

const SessionRows = rowsOf(
  "agent_sessions",
  Schema.Struct({
    id: Schema.String,
    task_id: Schema.NullOr(Schema.String),
    created_at: Timestamp
  })
)

const StepColumns = Schema.Struct({
  step_id: Schema.String,
  tool: Schema.String,
  action_class: Schema.String,
  arguments: JsonColumn(GovernedStep.fields.arguments),
  decision: StepDecision,
  approval_id: Schema.NullOr(Schema.String),
  rule: Schema.NullOr(Schema.String),
  reason: Schema.NullOr(Schema.String),
  resolution: StepDecision,
  outcome: Schema.NullOr(Schema.Literals(["succeeded", "failed"])),
  outcome_body: Schema.NullOr(JsonColumn(Schema.Struct({
    result: Schema.optionalKey(Schema.Json),
    error: Schema.optionalKey(Schema.String),
    arguments_digest: Schema.optionalKey(Schema.String)
  }))),
  outcome_at: TimestampOrNull,
  approved_arguments: EditColumns.fields.approved_arguments,
  arguments_digest: EditColumns.fields.arguments_digest,
  response: EditColumns.fields.response,
  created_at: Timestamp
})
type StepRow = typeof StepColumns.Type
const StepRows = rowsOf("agent_steps", StepColumns)
const StepPageRows = rowsOf("agent_steps", Schema.Struct({ ...StepColumns.fields, seq: Schema.String }))
const EventRows = storedEvents("session_events")

/** Runs of a step's statement that may find the cached policy out of date (a policy changed meanwhile each time). */
const MAX_POLICY_RELOADS = 5

const STEP_COLUMNS =
  "step_id, tool, action_class, arguments, decision, approval_id, rule, reason, resolution, outcome, outcome_body, outcome_at, approved_arguments, arguments_digest, response, created_at"

const toSession = (
  row: { readonly id: string; readonly task_id: string | null; readonly created_at: string }
): Session => ({
  id: row.id,
  task_id: row.task_id,
  created_at: row.created_at
})

const toAnswer = (row: Pick<StepRow, "decision" | "approval_id" | "rule" | "reason">): StepAnswer => ({
  decision: row.decision,
  ...(row.approval_id === null ? {} : { approval_id: row.approval_id }),
  ...(row.rule === null ? {} : { rule: row.rule }),
  ...(row.reason === null ? {} : { reason: row.reason })
})

const toStep = (row: StepRow): Step => ({
  step_id: row.step_id,
  tool: row.tool,
  action_class: row.action_class,
  arguments: row.arguments,
  decision: row.decision,
  ...(row.approval_id === null ? {} : { approval_id: row.approval_id }),
  resolution: row.resolution,
  ...(row.rule === null ? {} : { rule: row.rule }),
  ...(row.reason === null ? {} : { reason: row.reason }),
  ...editStepMembers(row),
  ...(row.outcome === null ? {} : {
    outcome: {
      status: row.outcome,
      ...(row.outcome_body?.result === undefined ? {} : { result: row.outcome_body.result }),
      ...(row.outcome_body?.error === undefined ? {} : { error: row.outcome_body.error }),
      ...(row.outcome_body?.arguments_digest === undefined
        ? {}
        : { arguments_digest: row.outcome_body.arguments_digest }),
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
  return ka.length === kb.length &&
    ka.every((key, i) =>
      key === kb[i] && sameJson((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key])
    )
}

/** The original answer to a re-sent step, or 400 when it is not the same step. */
const replay = (
  existing: Pick<StepRow, "tool" | "action_class" | "arguments" | "decision" | "approval_id" | "rule" | "reason">,
  step: GovernedStep
) =>
  existing.tool === step.tool && existing.action_class === step.action_class &&
    sameJson(existing.arguments, step.arguments)
    ? Effect.succeed(toAnswer(existing))
    : Effect.fail(
      new InvalidRequest({
        field: "step_id",
        detail: "This step_id was already sent in this session with another tool, action class or arguments."
      })
    )

/** An outcome reported again: the step as it is when it is the same outcome, else the transition refused. */
const reportedAgain = (existing: StepRow, status: ToolOutcome["status"]) =>
  existing.outcome !== null && existing.outcome === status
    ? Effect.succeed(toStep(existing))
    : Effect.fail(
      new InvalidTransition({
        status_now: existing.outcome ?? existing.resolution,
        detail: existing.outcome !== null
          ? `The step's outcome was already reported as ${existing.outcome}.`
          : `The step's resolution is ${existing.resolution}; only an allowed step has a tool outcome.`
      })
    )

/** An outcome whose `arguments_digest` is not the step's (`Edits.ts`): it is bound to the arguments that were approved. */
const digestRefused = (existing: StepRow) =>
  Effect.fail(
    new InvalidRequest({
      field: "arguments_digest",
      detail: existing.arguments_digest === null
        ? "The step was not approved with edited arguments: its tool runs with the step's own, and its outcome carries no arguments_digest."
        : "A person approved the step with edited arguments: report the outcome of the tool run with its approved_arguments, with their arguments_digest."
    })
  )

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
  readonly reportOutcome: (
    orgId: string,
    sessionId: string,
    stepId: string,
    outcome: ToolOutcome
  ) => Effect.Effect<Step, NotFound | InvalidTransition | InvalidRequest>
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
      const governStep = Effect.fn("AgentSessions.governStep")(
        function*(orgId: string, sessionId: string, step: GovernedStep) {
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
              if (answered._tag === "SentBefore") return yield* replay(answered.answer, step)
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
              const row = yield* stepStatement(sql, { orgId, sessionId, step, ruling, approval, notify: wake.notify })
              if (row === undefined || !row.found) return yield* new NotFound({ detail: "No such agent session." })
              if (row.decision !== null) {
                return yield* replay({
                  tool: row.tool!,
                  action_class: row.action_class!,
                  arguments: row.arguments,
                  decision: row.decision,
                  approval_id: row.approval_id,
                  rule: row.rule,
                  reason: row.reason
                }, step)
              }
              if (row.inserted) {
                yield* wake.local
                if (approval !== null) yield* Effect.annotateCurrentSpan({ "svc.approval_id": approval.id })
                return toAnswer({
                  decision: ruling.decision,
                  approval_id: approval?.id ?? null,
                  rule: ruling.rule,
                  reason: ruling.reason
                })
              }
              if (row.fresh) {
                // A concurrent send of this step_id committed after the statement's snapshot.
                const raced = yield* findStep(sessionId, step.step_id)
                if (raced === undefined) {
                  return yield* Effect.die(new Error("a governed step neither inserted nor found"))
                }
                return yield* replay(raced, step)
              }
              // The cached policy was out of date: read it again.
              yield* approvals.forgetRules(orgId)
              return yield* new Stale({ what: `the policy of action class ${step.action_class}` })
            })
          )
        }
      )

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
          ...(outcome.error === undefined ? {} : { error: outcome.error }),
          ...(outcome.arguments_digest === undefined ? {} : { arguments_digest: outcome.arguments_digest })
        }
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
            `),
          keepAliveMs: config.sseKeepAliveMs,
          pollMs: config.ssePollMs
        })
      })

      return AgentSessions.of({ create, get, governStep, reportOutcome, stream })
    })
  )
}
