/**
 * What an approval changes of its governed step, and the folder that
 * writes it: `agents/` owns the steps and their session's stream
 * (`agents/StepRecords.ts` provides this service), approvals decide. A
 * decision or an expiry settles the step and records the session's event
 * through it, inside the approval's transaction.
 */
import { Context, type Effect } from "effect"
import type { SqlError } from "effect/sql"
import type { SessionEventName } from "../streams/SessionEvents.ts"
import type { settledValues } from "./Edits.ts"

export class StepRecords extends Context.Service<StepRecords, {
  /** Settles a step: the resolution of its approval, and what a decision settled (edited arguments, a response). */
  readonly settle: (
    step: { readonly sessionId: string; readonly stepId: string },
    resolution: "allow" | "reject",
    settled?: ReturnType<typeof settledValues>
  ) => Effect.Effect<void, SqlError.SqlError>
  /** Records an event on the session's stream (then `SessionHub.notify` after commit). */
  readonly append: (
    event: {
      readonly sessionId: string
      readonly orgId: string
      readonly name: SessionEventName
      readonly data: unknown
    }
  ) => Effect.Effect<void, SqlError.SqlError>
}>()("svc/approvals/StepRecords") {}
