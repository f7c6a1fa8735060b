/**
 * One example per problem code, for the OpenAPI document (`OpenApiDocument.ts`
 * puts each in the error responses of the operations that answer it): every
 * problem code an operation can answer must have an entry here,
 * `test/unit/api/openapi.test.ts` fails otherwise.
 */
import { decisionProblemExamples } from "./ApprovalEdits.ts"
import { idempotencyProblemExamples } from "./Idempotency.ts"
import { mcpProblemExamples } from "./McpProblems.ts"

/** What an example of a problem may depend on: the operation it documents. */
export interface ProblemContext {
  /** The scope the operation needs, when it needs one. */
  readonly scope: string | undefined
  /** A request field of the operation (first path parameter, body member or query parameter). */
  readonly field: string | undefined
  /** What a decode issue of that field would say. */
  readonly expected: string
}

/**
 * The members of an example problem beyond `type`, `status`, `title` and
 * `code` (which come from its schema), by code. A problem code without an
 * entry here is an undocumented error.
 */
export const ProblemExamples: Readonly<Record<string, (context: ProblemContext) => Record<string, unknown>>> = {
  INVALID_REQUEST: ({ expected, field }) =>
    field === undefined
      ? {
        detail: "The request body: Expected a valid JSON body",
        errors: [{ field: "", message: "Expected a valid JSON body" }]
      }
      : { detail: `${field}: ${expected}`, field, errors: [{ field, message: expected }] },
  UNAUTHENTICATED: () => ({ detail: "Send the API key as `Authorization: Bearer <key>`." }),
  CROSS_SITE_REQUEST: () => ({
    detail:
      "A console request that changes state must send the `X-Svc-Console: 1` header and come from the console's own origin."
  }),
  TOO_MANY_STREAMS: () => ({
    detail: "This API key has 100 open event streams, the most allowed (SVC_MAX_STREAMS_PER_KEY); close one first.",
    limit: "SVC_MAX_STREAMS_PER_KEY",
    limit_value: 100
  }),
  LINK_INVALID: () => ({ detail: "Ask for a new link: `npm run cli -- console login`." }),
  APPROVAL_LINK_INVALID: () => ({
    detail: "This link opens no approval of this service. Use the whole link of the mail, or decide in the console."
  }),
  REVIEWER_ADDRESS_REPLACED: () => ({
    detail: "The address this mail went to is no longer the organization's reviewer address: its links open nothing."
  }),
  CONFIRMATION_LINK_INVALID: () => ({
    detail:
      "This is not the confirmation link of a reviewer address of this service. Use the whole link of the latest mail."
  }),
  CONFIRMATION_LINK_USED: () => ({
    detail: "This confirmation link was used already; a link works once.",
    used_at: "2026-11-22T12:01:00.000Z"
  }),
  CONFIRMATION_LINK_EXPIRED: () => ({
    detail: "This confirmation link expired before it was used. Set the address again to be sent a new one.",
    expired_at: "2026-11-23T12:00:00.000Z"
  }),
  LINK_USED: () => ({
    detail: "This sign-in link was used already; ask for a new one.",
    used_at: "2026-11-22T12:01:00.000Z"
  }),
  LINK_EXPIRED: () => ({
    detail: "This sign-in link expired; ask for a new one.",
    expired_at: "2026-11-22T12:15:00.000Z"
  }),
  INSUFFICIENT_SCOPE: ({ scope }) => ({
    detail: `This operation needs the \`${scope ?? "tasks.write"}\` scope.`,
    required_scope: scope ?? "tasks.write"
  }),
  NOT_FOUND: () => ({ detail: "No such resource in this organization." }),
  INVALID_TRANSITION: () => ({ detail: "Only a pending item can change.", status_now: "staged" }),
  PAYLOAD_TOO_LARGE: () => ({
    detail: "The request body is larger than SVC_MAX_BODY_BYTES (1048576 bytes).",
    limit: "SVC_MAX_BODY_BYTES",
    limit_value: 1_048_576,
    limit_bytes: 1_048_576,
    request_id: "0193a0a0-0000-7000-8000-0000000000ff"
  }),
  UNSUPPORTED_MEDIA_TYPE: () => ({ request_id: "0193a0a0-0000-7000-8000-0000000000ff" }),
  INTERNAL: () => ({ request_id: "0193a0a0-0000-7000-8000-0000000000ff" }),
  SERVICE_UNAVAILABLE: () => ({
    detail:
      "The service cannot reach its database at the moment (the database cannot be reached (ECONNREFUSED)). Nothing was done; retry after 5 seconds."
  }),
  INVALID_URL: () => ({ detail: "The URL must use https.", field: "url" }),
  INVALID_WEBHOOK_EVENTS: () => ({
    detail: "Unknown event type \"approval.deleted\".",
    field: "events[0]",
    supported: [
      "approval.requested",
      "approval.expiring",
      "approval.escalated",
      "approval.approved",
      "approval.rejected",
      "approval.expired"
    ]
  }),
  INVALID_HEADERS: () => ({
    detail: "2 headers are refused: headers.Host, headers.Cookie.",
    field: "headers.Host",
    errors: [
      { field: "headers.Host", message: "transport, hop-by-hop, trace-context and cookie headers are not accepted" },
      { field: "headers.Cookie", message: "transport, hop-by-hop, trace-context and cookie headers are not accepted" }
    ]
  }),
  DELIVERY_FAILED: () => ({
    detail: "The receiver answered 500.",
    receiver_status: 500,
    error: "HTTP 500",
    duration_ms: 84
  }),
  RATE_LIMITED: () => ({
    detail:
      "This endpoint was tested 6 times in the last minute, the most allowed (SVC_WEBHOOK_TESTS_PER_MINUTE); retry in 42 s.",
    limit: "SVC_WEBHOOK_TESTS_PER_MINUTE",
    limit_value: 6,
    retry_after_seconds: 42
  }),
  NOT_REPLAYABLE: () => ({ detail: "Only a failed delivery can be replayed.", delivery_status: "delivered" }),
  QUEUE_FULL: () => ({ detail: "The endpoint has 10000 undelivered deliveries." }),
  DESTINATION_EXISTS: () => ({ detail: "Delete the existing destination first." }),
  EXPORT_FAILED: () => ({ detail: "The collector answered 401.", collector_status: 401 }),
  CORRECTION_SHAPE_MISMATCH: () => ({
    detail: "correction.label: Expected a string",
    field: "correction.label",
    errors: [{ field: "correction.label", message: "Expected a string" }]
  }),
  CORRECTION_CONTAINS_SECRET: () => ({
    detail: "correction.token: the value was removed as a secret, and the answer schema requires it",
    field: "correction.token",
    errors: [{ field: "correction.token", message: "Required" }]
  }),
  DATASET_BASE_CHANGED: () => ({
    detail: "A newer dataset version exists.",
    current_base_dataset_id: "0193a0a0-0000-7000-8000-0000000000d2"
  }),
  FEEDBACK_CHANGED: () => ({ detail: "Corrections were staged or rejected since the preview." }),
  NOTHING_STAGED: () => ({ detail: "Stage corrections before promoting." }),
  LIMIT_REACHED: () => ({
    detail:
      "The organization already has 50 notification endpoints, the most allowed (SVC_MAX_ENDPOINTS_PER_ORG); delete one first.",
    limit: "SVC_MAX_ENDPOINTS_PER_ORG",
    limit_value: 50
  }),
  ANSWER_SCHEMA_TOO_COMPLEX: () => ({
    detail:
      "answer_schema.properties.code.pattern is a pattern longer than 512 characters (SVC_ANSWER_SCHEMA_MAX_PATTERN_LENGTH).",
    field: "answer_schema.properties.code.pattern",
    limit: "SVC_ANSWER_SCHEMA_MAX_PATTERN_LENGTH",
    limit_value: 512
  }),
  POLICY_RULES_TOO_COMPLEX: () => ({
    detail: "Rule \"huge\": the condition nests deeper than 12 (SVC_APPROVAL_RULE_MAX_DEPTH).",
    field: "rules[1].condition",
    limit: "SVC_APPROVAL_RULE_MAX_DEPTH",
    limit_value: 12
  }),
  CORRECTION_TOO_COMPLEX: () => ({
    detail:
      "checking the correction against the answer schema took longer than 1000 ms (SVC_ANSWER_VALIDATION_TIMEOUT); send a smaller correction or simplify the answer schema.",
    field: "correction",
    limit: "SVC_ANSWER_VALIDATION_TIMEOUT",
    limit_value: 1000
  }),
  ...idempotencyProblemExamples,
  ...decisionProblemExamples,
  ...mcpProblemExamples,
  VALIDATION_BUSY: () => ({
    detail:
      "The validation queue holds 128 checks (SVC_ANSWER_VALIDATION_QUEUE) and this organization holds at least its share of them; retry after 1 second.",
    limit: "SVC_ANSWER_VALIDATION_QUEUE",
    limit_value: 128
  })
}

// ---------------------------------------------------------------------------
// Operations
