/**
 * What `Feedback` and its correction workers (`correction-worker.ts`) say to
 * each other, and the phases of a request, each with its own deadline
 * (the index into the pool's `phaseTimeoutsMs`).
 */
import type { SchemaViolation } from "../tasks/SchemaCompiler.ts"
import type { Json, ScrubResult } from "./Scrubber.ts"

/** The phases of a request, the index of their deadline. */
export const PHASE_CHECK = 0
export const PHASE_SCRUB = 1
export const PHASE_RECHECK = 2

export interface Known {
  readonly keyHashes: ReadonlyArray<string>
  readonly values: ReadonlyArray<string>
}

export type CorrectionRequest =
  | {
    readonly id: number
    readonly startedAt: number
    readonly op: "correct"
    /** The task id: its validator is kept under it. */
    readonly key: string
    /** Sent only after a `Missing` answer. */
    readonly schema?: unknown
    /** The correction as JSON text: a string crosses to the worker as one copy, an object member by member. */
    readonly text: string
    readonly known: Known
    readonly root: string
  }
  | { readonly id: number; readonly startedAt: number; readonly op: "scrub"; readonly document: Json; readonly known: Known; readonly root: string }
  | { readonly id: number; readonly startedAt: number; readonly op: "stats" }

export type CorrectionReply =
  | { readonly id: number; readonly _tag: "Missing" }
  /** The correction does not fit the schema (nothing was scrubbed). */
  | { readonly id: number; readonly _tag: "Mismatch"; readonly violations: ReadonlyArray<SchemaViolation> }
  /**
   * Scrubbed; `after` holds the violations of the scrubbed value when
   * scrubbing changed it. `value` is only sent back when scrubbing changed
   * something (`fields` or `collisions` not empty): otherwise it is the
   * correction as sent.
   */
  | ({
    readonly id: number
    readonly _tag: "Corrected"
    readonly after: ReadonlyArray<SchemaViolation>
    readonly value?: Json | undefined
  } & Omit<ScrubResult, "value">)
  | ({ readonly id: number; readonly _tag: "Scrubbed" } & ScrubResult)
  | { readonly id: number; readonly _tag: "Failed"; readonly message: string }
  | { readonly id: number; readonly _tag: "Stats"; readonly cached: number }

