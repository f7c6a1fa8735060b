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

/** An event for a session's stream. */
export interface SessionEvent {
  readonly sessionId: string
  readonly orgId: string
  readonly name: SessionEventName
  readonly data: unknown
  /** Puts back what `data` holds as marks (`Edits.ts`, `markedEdit`). */
  readonly splice?: ((json: string) => string) | undefined
}

export class StepRecords extends Context.Service<StepRecords, {
  /**
   * Settles a step: the resolution of its approval, and with `decided` what
   * the decision settled (edited arguments, a response), copied from its
   * approval's row as written earlier in the transaction.
   */
  readonly settle: (
    step: { readonly sessionId: string; readonly stepId: string },
    resolution: "allow" | "reject",
    decided?: boolean
  ) => Effect.Effect<void, SqlError.SqlError>
  /** Records an event on the session's stream (then `SessionHub.notify` after commit). */
  readonly append: (event: SessionEvent) => Effect.Effect<void, SqlError.SqlError>
}>()("svc/approvals/StepRecords") {}
