/**
 * The statements of a session's stream and of a step's settlement, for the
 * other folders that change them: approvals settle the step they decide
 * (`approvals/StepRecords.ts`, provided here), and every change appends
 * its event to the session's stream. Each session numbers its events
 * 1, 2, 3, ... (the SSE `id:`): appending bumps the session's counter,
 * which holds the session row lock to commit, so a session's events become
 * visible in id order (`streams/SessionEvents.ts` reads them).
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Schema } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import { type SessionEvent, StepRecords } from "../approvals/StepRecords.ts"
import { BigIntText, rowsOf } from "../platform/Rows.ts"

const SeqRows = rowsOf("agent_sessions", Schema.Struct({ event_seq: BigIntText }))

/** Records a session event. Call inside the transaction of the change it reports, then `SessionHub.notify(sessionId)` after commit. */
export const appendSessionEvent = (sql: SqlClient.SqlClient, event: SessionEvent) =>
  Effect.gen(function*() {
    const [bumped] = yield* SeqRows.decoded(sql`
      UPDATE agent_sessions SET event_seq = event_seq + 1 WHERE id = ${event.sessionId} RETURNING event_seq
    `)
    yield* sql`
      INSERT INTO session_events (session_id, seq, org_id, name, data)
      VALUES (${event.sessionId}, ${bumped!.event_seq}, ${event.orgId}, ${event.name}, ${
      event.splice === undefined ? JSON.stringify(event.data) : event.splice(JSON.stringify(event.data))
    })
    `
  })

export const StepRecordsLive = Layer.effect(
  StepRecords,
  Effect.gen(function*() {
    const sql = yield* PgClient.PgClient
    return StepRecords.of({
      // What a decision settled is copied as stored: edited arguments of up to 256 KiB are not parsed again.
      settle: (step, resolution, decided) =>
        Effect.asVoid(
          decided !== true
            ? sql`UPDATE agent_steps SET resolution = ${resolution} WHERE session_id = ${step.sessionId} AND step_id = ${step.stepId}`
            : sql`
              UPDATE agent_steps s SET resolution = ${resolution}, approved_arguments = a.approved_arguments,
                arguments_digest = a.arguments_digest, response = a.response
              FROM approvals a
              WHERE s.session_id = ${step.sessionId} AND s.step_id = ${step.stepId} AND a.id = s.approval_id
            `
        ),
      append: (event) => appendSessionEvent(sql, event)
    })
  })
)

/** Deletes session events written before `before`, the oldest first (`retention/Retention.ts`): at most `batch`, skipping rows another statement holds; answers the rows. */
export const pruneSessionEvents = (sql: SqlClient.SqlClient, before: Statement.Fragment, batch: number) =>
  sql`
    DELETE FROM session_events WHERE ctid IN (
      SELECT ctid FROM session_events WHERE created_at < ${before} ORDER BY created_at LIMIT ${batch} FOR UPDATE SKIP LOCKED
    )
    RETURNING 1 AS deleted
  `
