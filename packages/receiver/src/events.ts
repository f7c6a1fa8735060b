/** The events svc sends, the reasons a delivery is refused, and the decoding of a verified body. */

/** The six approval event types. */
export const APPROVAL_EVENT_TYPES = [
  "approval.requested",
  "approval.expiring",
  "approval.escalated",
  "approval.approved",
  "approval.rejected",
  "approval.expired"
] as const
export type ApprovalEventType = typeof APPROVAL_EVENT_TYPES[number]

/** Operational events about the organization's other endpoints (never in the default subscription). */
export const ENDPOINT_EVENT_TYPES = ["endpoint.disabled", "endpoint.failing", "endpoint.certificate_expiring"] as const
export type EndpointEventType = typeof ENDPOINT_EVENT_TYPES[number]

/** Every event type the service sends. A receiver refuses any other type. */
export const EVENT_TYPES = [...APPROVAL_EVENT_TYPES, ...ENDPOINT_EVENT_TYPES] as const
export type WebhookEventType = typeof EVENT_TYPES[number]

export const DEFAULT_TOLERANCE_SECONDS = 300

/** The largest body read and verified, unless `maxBodyBytes` says otherwise: 1 MiB. */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024

/** The longest `X-Svc-Signature` header accepted, in characters. */
export const MAX_SIGNATURE_HEADER_LENGTH = 1024

/**
 * The most `v1=` values a header may carry. The service sends one per active
 * secret: two during a rotation overlap.
 */
export const MAX_SIGNATURES = 8

/** Any JSON value. */
export type Json = null | number | boolean | string | JsonArray | JsonObject
export interface JsonArray extends ReadonlyArray<Json> {}
export interface JsonObject {
  readonly [key: string]: Json
}

/**
 * The approval as it was when the event was recorded. The fields are those
 * of the catalogue (docs/events.md); a later version may add fields, which
 * the index signature lets you read as `unknown`.
 */
export interface ApprovalSnapshot {
  readonly approval_id: string
  readonly session_id: string
  readonly step_id: string
  readonly task_id: string | null
  /** `pending` for requested, expiring and escalated; then `approved`, `rejected` or `expired`. */
  readonly status: "pending" | "approved" | "rejected" | "expired"
  /** End of the current review window. */
  readonly deadline_at: string
  /** When the approval expires if nobody decides. */
  readonly expires_at: string
  /** What applies to the step when it expires. */
  readonly timeout_action: "reject" | "allow"
  /** The name of the policy's rule on arguments that required the approval; absent when the action class's settings did. */
  readonly rule?: string
  /** When a person decided (`approval.approved` / `approval.rejected` only). */
  readonly decided_at?: string
  /** Who decided: an API key id, `console:<person>` or `email:<reviewer address>`. */
  readonly decided_by?: string
  /** The person behind `decided_by` when it is not that name itself (an API key made by a console person: `console:<name>`). */
  readonly decided_by_person?: string
  /** The person the decision counts for when it is not the decider: the group member a delegate decided in place of. */
  readonly decided_for?: string
  /** Why the person decided, when they gave a reason (`approval.approved` / `approval.rejected`). */
  readonly decision_reason?: string
  /** How many distinct people must approve; present when more than one must. */
  readonly quorum?: number
  /** With `quorum`: the votes cast, oldest first; on `approval.approved` / `approval.rejected` the last one closed the approval. */
  readonly votes?: ReadonlyArray<ApprovalVote>
  /** With `quorum`, while pending: how many more distinct people must approve. */
  readonly approvals_remaining?: number
  /** The reviewer group the approval is assigned to now; absent when anyone with `approvals.decide` may decide it. */
  readonly assigned_group?: string
  /** With `assigned_group`: 0 with the first group of its chain, 1 once the first deadline handed it to the next. */
  readonly escalation_level?: number
  /** The arguments a person approved the tool to run with when they edited the step's (`approval.approved` only). */
  readonly approved_arguments?: Json
  /** With `approved_arguments`: what the edit changed, as JSON Pointers into the arguments. */
  readonly arguments_changed?: ReadonlyArray<string>
  /** With `approved_arguments`: their SHA-256 (JSON with members sorted by name), lowercase hex. */
  readonly arguments_digest?: string
  /** A person's answer to the agent instead of running the tool (`approval.rejected` only). */
  readonly response?: Json
  readonly [field: string]: unknown
}

/** One person's vote on an approval that needs several approvals. */
export interface ApprovalVote {
  /** Who voted, as `decided_by` names deciders. */
  readonly decided_by: string
  /** The person behind `decided_by` when it is not that name itself. */
  readonly decided_by_person?: string
  /** The person the vote counts for when it is not the voter: the group member a delegate voted in place of. */
  readonly decided_for?: string
  readonly decision: "approve" | "reject"
  readonly decided_at: string
  /** Why, when the voter said. */
  readonly reason?: string
}

/** The body of an approval event. `id` is the deduplication key. */
export interface ApprovalEvent {
  readonly id: string
  readonly type: ApprovalEventType
  readonly org_id: string
  readonly occurred_at: string
  /**
   * `true` on a test delivery (`POST /v1/notification-endpoints/:id/test`):
   * its approval is an example, not a real one. Acknowledge it and act on nothing.
   */
  readonly test?: true
  readonly approval: ApprovalSnapshot
}

/** The endpoint an operational event is about. */
export interface EndpointSnapshot {
  readonly id: string
  readonly url_hint: string
  readonly reason: string
  /** `false` for `endpoint.disabled`, `true` for the others. */
  readonly active: boolean
  /** `endpoint.failing`: when the failing streak began. */
  readonly failing_since?: string
  /** `endpoint.disabled`: when svc deactivated the endpoint. */
  readonly deactivated_at?: string
  /** `endpoint.certificate_expiring`: when the endpoint's client certificate expires. */
  readonly certificate_expires_at?: string
  readonly [field: string]: unknown
}

/** The body of an operational event (`endpoint.disabled`, `endpoint.failing`, `endpoint.certificate_expiring`). */
export interface EndpointEvent {
  readonly id: string
  readonly type: EndpointEventType
  readonly org_id: string
  readonly occurred_at: string
  readonly test?: true
  readonly endpoint: EndpointSnapshot
}

/** The body of a delivery: narrow on `type` (or `isApprovalEvent`). `id` is the deduplication key. */
export type WebhookEvent = ApprovalEvent | EndpointEvent

export const isApprovalEvent = (event: WebhookEvent): event is ApprovalEvent =>
  (APPROVAL_EVENT_TYPES as ReadonlyArray<string>).includes(event.type)

/** Whether the event is a test delivery (its content is an example). */
export const isTestEvent = (event: WebhookEvent): boolean => event.test === true

export type WebhookVerificationReason =
  /**
   * The header is missing, too long, has too many `v1=` values, or is not
   * `t=<unix>,v1=<hex>...` (Standard Webhooks: `webhook-id`,
   * `webhook-timestamp` or `webhook-signature` missing or malformed).
   */
  | "malformed_header"
  /** The body is over `maxBodyBytes` (default 1 MiB); it was not read further nor verified. */
  | "body_too_large"
  /** No `v1=` value matches any of the secrets. */
  | "bad_signature"
  /** `t` is more than `toleranceSeconds` from the receiver's clock (either direction). */
  | "timestamp_outside_tolerance"
  /** Verified, but the body is not a JSON event object. */
  | "invalid_body"
  /** Verified, but the event type is not one of `EVENT_TYPES`. */
  | "unknown_event_type"
  /** Verified, but `org_id` is not `expectedOrgId`. */
  | "unexpected_org"

/** Why a delivery was refused. The message never contains the secret or the body. */
export class WebhookVerificationError extends Error {
  readonly reason: WebhookVerificationReason
  constructor(reason: WebhookVerificationReason, message: string) {
    super(message)
    this.name = "WebhookVerificationError"
    this.reason = reason
  }
}

export interface VerifyOptions {
  /**
   * Largest accepted distance between `t` and now, in seconds (default 300).
   * 0 or less turns the timestamp check off (as Stripe's `tolerance` does):
   * replayed deliveries are then accepted at any age.
   */
  readonly toleranceSeconds?: number
  /** The receiver's clock: a `Date`, milliseconds, or a function returning milliseconds (default `Date.now()`). */
  readonly now?: Date | number | (() => number)
  /** When set, an event of another organization is refused (`unexpected_org`). */
  readonly expectedOrgId?: string
  /**
   * The largest body read and verified, in bytes (default 1 MiB). A larger
   * body is refused with `body_too_large` before any HMAC; `readRawBody` and
   * `handleRequest` stop reading a stream at this size.
   */
  readonly maxBodyBytes?: number
  /** The Web Crypto implementation (default `globalThis.crypto.subtle`), e.g. `webcrypto.subtle` of `node:crypto` on Node 18. */
  readonly subtle?: SubtleCrypto
}

export type RawBody = string | Uint8Array | ArrayBuffer

/** One secret, or several while you roll a secret on your side. */
export type Secrets = string | ReadonlyArray<string>

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * Decodes and validates an already verified body: a JSON object with `id`,
 * a known `type`, `org_id` (equal to `expectedOrgId` when given),
 * `occurred_at` and an `approval` object.
 */
export const decodeEvent = (rawBody: RawBody, options: Pick<VerifyOptions, "expectedOrgId"> = {}): WebhookEvent => {
  let value: unknown
  try {
    value = JSON.parse(typeof rawBody === "string" ? rawBody : new TextDecoder().decode(rawBody))
  } catch {
    throw new WebhookVerificationError("invalid_body", "the body is not JSON")
  }
  if (
    !isObject(value) || typeof value.id !== "string" || typeof value.type !== "string" ||
    typeof value.org_id !== "string" || typeof value.occurred_at !== "string"
  ) {
    throw new WebhookVerificationError("invalid_body", "the body is not an svc event (id, type, org_id, occurred_at)")
  }
  if (!(EVENT_TYPES as ReadonlyArray<string>).includes(value.type)) {
    throw new WebhookVerificationError(
      "unknown_event_type",
      `unknown event type ${JSON.stringify(value.type.slice(0, 64))}`
    )
  }
  if ((ENDPOINT_EVENT_TYPES as ReadonlyArray<string>).includes(value.type)) {
    if (!isObject(value.endpoint) || typeof value.endpoint.id !== "string") {
      throw new WebhookVerificationError("invalid_body", "the body is not an svc endpoint event (no endpoint object)")
    }
  } else if (!isObject(value.approval) || typeof value.approval.approval_id !== "string") {
    throw new WebhookVerificationError("invalid_body", "the body is not an svc approval event (no approval object)")
  }
  if (options.expectedOrgId !== undefined && value.org_id !== options.expectedOrgId) {
    throw new WebhookVerificationError("unexpected_org", "the event belongs to another organization")
  }
  return value as unknown as WebhookEvent
}
