/**
 * What `Feedback` and its correction workers (`correction-worker.ts`) say to
 * each other, and the phases of a request, each with its own deadline.
 */
import type { SchemaViolation } from "../tasks/SchemaCompiler.ts"
import type { Json, ScrubResult } from "./Scrubber.ts"

/** The phases of a request, in order: the pool and the worker know a phase by its place here. */
export const PHASES = ["check", "scrub", "recheck"] as const
export type Phase = typeof PHASES[number]
/** A phase's place in `PHASES`, as the pool's deadlines (`phaseTimeoutsMs`) and the worker's phase cell hold it. */
export const phaseIndex = (phase: Phase) => PHASES.indexOf(phase)

export interface Known {
  readonly keyHashes: ReadonlyArray<string>
  readonly values: ReadonlyArray<string>
}

/**
 * Whose known credentials a request is scrubbed with: the organization and
 * the fingerprint of its credentials (`orgs.credentials_version`). Each
 * worker keeps the credentials it was last sent per organization under
 * their fingerprint; `known` is sent only after a worker answers `Missing`
 * with `known: true`, so a request carries a short string, not a copy of
 * every key hash of the organization.
 */
export interface KnownRef {
  readonly org: string
  readonly fingerprint: string
  readonly known?: Known | undefined
}

/** Organizations whose known credentials each worker keeps (least recently used dropped). */
export const KNOWN_KEPT_PER_WORKER = 1000

export type CorrectionRequest =
  | {
    readonly id: number
    readonly op: "correct"
    /** The task id: its validator is kept under it. */
    readonly key: string
    /** Sent only after a `Missing` answer. */
    readonly schema?: unknown
    /** The correction as JSON text: a string crosses to the worker as one copy, an object member by member. */
    readonly text: string
    readonly known: KnownRef
    readonly root: string
  }
  | {
    readonly id: number
    readonly op: "scrub"
    readonly document: Json
    readonly known: KnownRef
    readonly root: string
  }
  | { readonly id: number; readonly op: "stats" }

export type CorrectionReply =
  /** The worker needs the task's schema, the organization's known credentials, or both, sent with the request again. */
  | { readonly id: number; readonly _tag: "Missing"; readonly schema: boolean; readonly known: boolean }
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
