/**
 * The bodies svc POSTs to notification endpoints, one schema per event
 * type: the catalogue of docs/events.md, the `webhooks` section of the
 * OpenAPI document, and the types the server's event builders are held to.
 *
 * `ApprovalEvent` and `EndpointEvent` are what the builders produce for any
 * type of their family; each per-type schema narrows them to what that type
 * carries (an `approval.approved` has `status: "approved"` and says who
 * decided, an `endpoint.disabled` has `active: false` and `deactivated_at`).
 * Every body may carry `"test": true`: then it was sent by
 * `POST /v1/notification-endpoints/:id/test` and describes an example.
 */
import { Schema } from "effect"
import { ApprovalEventTypes, ApprovalSnapshot } from "./Approvals.ts"
import { Timestamp, Uuid } from "./Common.ts"
import { EndpointEventTypes, type EventType, EventTypes } from "./Notifications.ts"

const TestFlag = Schema.optionalKey(
  Schema.Literal(true).annotate({
    description:
      "Present on a test delivery (`POST /v1/notification-endpoints/:id/test`) only: the content is an example; acknowledge it and act on nothing"
  })
)

const envelope = {
  id: Uuid.annotate({
    description:
      "The event id: the deduplication key, the same in every retry and replay (also `X-Svc-Event-Id` and `webhook-id`)"
  }),
  org_id: Uuid.annotate({ description: "The organization the event belongs to" }),
  occurred_at: Timestamp.annotate({ description: "When svc recorded the event (RFC 3339, UTC, milliseconds)" }),
  test: TestFlag
} as const

/** An event body: the envelope, its `type` and its subject (`approval` or `endpoint`). */
const eventBody = <T extends Schema.Top, Subject extends Schema.Struct.Fields>(type: T, subject: Subject) =>
  Schema.Struct({
    id: envelope.id,
    type,
    org_id: envelope.org_id,
    occurred_at: envelope.occurred_at,
    test: envelope.test,
    ...subject
  })

/** The body of any approval lifecycle event, as the server's builder makes it. */
export const ApprovalEvent = eventBody(Schema.Literals(ApprovalEventTypes), { approval: ApprovalSnapshot })
export type ApprovalEvent = typeof ApprovalEvent.Type

/** The endpoint an operational event is about. */
export const EndpointSnapshot = Schema.Struct({
  id: Uuid.annotate({ description: "The endpoint's id" }),
  url_hint: Schema.String.annotate({
    description: "The endpoint's masked address (scheme, host, port; `/…` for any path or query)"
  }),
  reason: Schema.String.annotate({ description: "Why, in svc's words" }),
  active: Schema.Boolean.annotate({ description: "Whether svc still sends to the endpoint" }),
  failing_since: Schema.optionalKey(
    Timestamp.annotate({ description: "`endpoint.failing`: when the failing streak began" })
  ),
  deactivated_at: Schema.optionalKey(
    Timestamp.annotate({ description: "`endpoint.disabled`: when svc deactivated the endpoint" })
  ),
  certificate_expires_at: Schema.optionalKey(
    Timestamp.annotate({
      description: "`endpoint.certificate_expiring`: when the endpoint's client certificate expires (its `not_after`)"
    })
  )
})
export type EndpointSnapshot = typeof EndpointSnapshot.Type

/** The body of any operational event, as the server's builder makes it. */
export const EndpointEvent = eventBody(Schema.Literals(EndpointEventTypes), { endpoint: EndpointSnapshot })
export type EndpointEvent = typeof EndpointEvent.Type

const {
  decided_at: _da,
  decided_by: _db,
  decided_by_person: _dp,
  decided_for: _df,
  decision_reason: _dr,
  ...undecided
} = ApprovalSnapshot.fields

/** A snapshot with `status` fixed and nobody's decision in it. */
const undecidedSnapshot = (status: "pending" | "expired") =>
  Schema.Struct({ ...undecided, status: Schema.Literal(status) })

/** A snapshot of a person's decision: `decided_at` and `decided_by` always, `decision_reason` when given. */
const decidedSnapshot = (status: "approved" | "rejected") =>
  Schema.Struct({
    ...ApprovalSnapshot.fields,
    status: Schema.Literal(status),
    decided_at: ApprovalSnapshot.fields.decided_at.schema,
    decided_by: ApprovalSnapshot.fields.decided_by.schema
  })

const event = <const Type extends EventType, Subject extends Schema.Struct.Fields>(
  type: Type,
  identifier: string,
  description: string,
  subject: Subject
) => eventBody(Schema.Literal(type), subject).annotate({ identifier, title: type, description })

const { failing_since: _fs, deactivated_at: _dat, certificate_expires_at: _cea, ...endpointBase } =
  EndpointSnapshot.fields

/** One schema per event type, in the order of `EventTypes`. */
export const EventSchemas = {
  "approval.requested": event(
    "approval.requested",
    "ApprovalRequestedEvent",
    "A governed step waits for a person: the policy of its action class requires approval (an action class without a policy does).",
    { approval: undecidedSnapshot("pending") }
  ),
  "approval.expiring": event(
    "approval.expiring",
    "ApprovalExpiringEvent",
    "A pending approval nears its final deadline: sent `expiring_notice_seconds` before `expires_at` (never when the policy's notice is 0).",
    { approval: undecidedSnapshot("pending") }
  ),
  "approval.escalated": event(
    "approval.escalated",
    "ApprovalEscalatedEvent",
    "A review window ended without a decision and the policy has `escalation_seconds` with an escalation still to come: another `escalation_seconds` window opens (`deadline_at` moves to its end, which is `expires_at` after the last escalation) and, with an `escalation_chain`, the approval is handed to the chain's next group (`assigned_group`, `escalation_level` + 1); it is still pending. One event per escalation.",
    { approval: undecidedSnapshot("pending") }
  ),
  "approval.approved": event(
    "approval.approved",
    "ApprovalApprovedEvent",
    "A person approved; the snapshot says who and when, and why when they gave a reason.",
    { approval: decidedSnapshot("approved") }
  ),
  "approval.rejected": event(
    "approval.rejected",
    "ApprovalRejectedEvent",
    "A person rejected; the snapshot says who and when, and why when they gave a reason.",
    { approval: decidedSnapshot("rejected") }
  ),
  "approval.expired": event(
    "approval.expired",
    "ApprovalExpiredEvent",
    "Nobody decided before `expires_at`: the approval closed and the policy's `timeout_action` applies to the step.",
    { approval: undecidedSnapshot("expired") }
  ),
  "endpoint.disabled": event(
    "endpoint.disabled",
    "EndpointDisabledEvent",
    "svc deactivated another endpoint of the organization: it answered 410 Gone, or it failed for `SVC_WEBHOOK_DISABLE_AFTER` without one successful delivery.",
    {
      endpoint: Schema.Struct({
        ...endpointBase,
        active: Schema.Literal(false),
        deactivated_at: EndpointSnapshot.fields.deactivated_at.schema
      })
    }
  ),
  "endpoint.failing": event(
    "endpoint.failing",
    "EndpointFailingEvent",
    "Another endpoint of the organization entered a cooldown after having been healthy (`SVC_WEBHOOK_COOLDOWN_AFTER` consecutive failed attempts); once per failing streak.",
    {
      endpoint: Schema.Struct({
        ...endpointBase,
        active: Schema.Literal(true),
        failing_since: EndpointSnapshot.fields.failing_since.schema
      })
    }
  ),
  "endpoint.certificate_expiring": event(
    "endpoint.certificate_expiring",
    "EndpointCertificateExpiringEvent",
    "The client certificate of another endpoint of the organization (`tls_client_certificate`, mutual TLS) expires within `SVC_WEBHOOK_CERTIFICATE_NOTICE` (14 days by default); once per certificate. PATCH the endpoint with a new one.",
    {
      endpoint: Schema.Struct({
        ...endpointBase,
        active: Schema.Literal(true),
        certificate_expires_at: EndpointSnapshot.fields.certificate_expires_at.schema
      })
    }
  )
} as const satisfies Record<EventType, Schema.Top>

/** Any body svc sends: narrow on `type`. */
export const WebhookEvent = Schema.Union(EventTypes.map((type) => EventSchemas[type]))
export type WebhookEvent = typeof WebhookEvent.Type

/**
 * The JSON Schema (draft 2020-12, which is also OpenAPI 3.1's dialect) of an
 * event type's body, self-contained. Objects stay open: a later version may
 * add fields, and a receiver validating with this schema keeps working.
 */
export const eventJsonSchema = (type: EventType): Record<string, unknown> => {
  const document = Schema.toJsonSchemaDocument(EventSchemas[type])
  const ref = typeof document.schema.$ref === "string" ? document.schema.$ref.replace("#/$defs/", "") : undefined
  const definitions = Object.keys(document.definitions)
  if (ref === undefined || definitions.length !== 1 || definitions[0] !== ref) {
    throw new Error(`${type}: expected one definition, the event itself`)
  }
  return document.definitions[ref] as Record<string, unknown>
}

// ---------------------------------------------------------------------------
// The OpenAPI document's `webhooks`

/** The tag of the webhook entries in the OpenAPI document. */
const WEBHOOKS_TAG = "Webhook events"

/** The headers svc sends with every event, as OpenAPI header parameters. */
export const DeliveryHeaders: ReadonlyArray<
  { readonly name: string; readonly description: string; readonly pattern?: string }
> = [
  { name: "X-Svc-Event-Id", description: "The event id (the body's `id`)." },
  { name: "X-Svc-Event-Type", description: "The event type (the body's `type`)." },
  {
    name: "X-Svc-Signature",
    description:
      "`t=<unix seconds>,v1=<hex>[,v1=<hex>…]`: per signing secret in use, the HMAC-SHA256 of `t`, `.` and the raw body, keyed with the secret string as returned (`whsec_…`), 64 lowercase hex characters (Stripe's scheme). Fresh `t` on every attempt.",
    pattern: "^t=[0-9]+(,v1=[0-9a-f]{64})+$"
  },
  { name: "webhook-id", description: "Standard Webhooks: the event id." },
  {
    name: "webhook-timestamp",
    description: "Standard Webhooks: the same unix seconds as `t` in `X-Svc-Signature`.",
    pattern: "^[0-9]+$"
  },
  {
    name: "webhook-signature",
    description:
      "Standard Webhooks: `v1,<base64>[ v1,<base64>…]`, per signing secret in use the HMAC-SHA256 of `webhook-id`, `.`, `webhook-timestamp`, `.` and the raw body, keyed with the bytes the secret's part after `whsec_` decodes to.",
    pattern: "^v1,[A-Za-z0-9+/=]+( v1,[A-Za-z0-9+/=]+)*$"
  }
]

/**
 * Adds the top-level `webhooks` of the OpenAPI document (3.1): one POST per
 * event type, its body schema in `components.schemas` and the delivery
 * headers as parameters. A document-wide transform for `apiDocumentation`.
 */
export const addWebhooks = (spec: Record<string, any>): Record<string, any> => {
  const schemas: Record<string, unknown> = spec.components.schemas
  const webhooks: Record<string, unknown> = {}
  for (const type of EventTypes) {
    const schema = EventSchemas[type]
    const identifier = String(schema.ast.annotations?.identifier)
    if (schemas[identifier] !== undefined) throw new Error(`${type}: component ${identifier} exists already`)
    schemas[identifier] = eventJsonSchema(type)
    webhooks[type] = {
      post: {
        operationId: `webhook.${type}`,
        summary: type,
        description: `${
          String(schema.ast.annotations?.description)
        }\n\nSent to each active endpoint of the organization that lists \`${type}\` in its \`events\`${
          type.startsWith("endpoint.")
            ? " (never to the endpoint it is about)"
            : " and whose `action_classes` filter, if any, matches the step's action class"
        }. Verify the signature on the raw body before parsing it; deduplicate by \`id\`.`,
        tags: [WEBHOOKS_TAG],
        security: [],
        parameters: DeliveryHeaders.map((header) => ({
          name: header.name,
          in: "header",
          required: true,
          description: header.description,
          schema: header.pattern === undefined ? { type: "string" } : { type: "string", pattern: header.pattern }
        })),
        requestBody: {
          required: true,
          content: { "application/json": { schema: { $ref: `#/components/schemas/${identifier}` } } }
        },
        responses: {
          "2XX": {
            description: "Received. Answer within 5 seconds, after saving the verified event; do the work later."
          },
          "410": {
            description:
              "Gone: svc deactivates the endpoint and sends it nothing more (`endpoint.disabled` tells the organization's other endpoints)."
          },
          "default": {
            description:
              "Anything else, a redirect included (never followed), or no answer within 5 seconds: the delivery is retried (`SVC_WEBHOOK_RETRY_SCHEDULE`; `Retry-After` of a 429 or 503 is honoured)."
          }
        }
      }
    }
  }
  return {
    ...spec,
    webhooks,
    tags: [
      ...spec.tags,
      {
        name: WEBHOOKS_TAG,
        description:
          "What svc POSTs to notification endpoints: one entry per event type, with its body and the signature headers. A body with `\"test\": true` comes from `POST /v1/notification-endpoints/:id/test` and describes an example."
      }
    ]
  }
}
