/**
 * How the contract documents itself: the OpenAPI document (`GET
 * /openapi.json`, rendered at `/docs`) is generated from the HttpApi
 * definition, and everything it needs beyond the schemas lives here, in one
 * place: servers, license, tag descriptions, one example per problem code,
 * and `documented(...)`, which gives an endpoint its summary, description and
 * examples.
 *
 * Every operation must be `documented` and every problem code it can answer
 * must have an entry in `ProblemExamples`: `test/unit/api/openapi.test.ts`
 * fails otherwise, and `redocly lint` (recommended rules) must stay clean.
 */
import { Context, Option } from "effect"
import { type HttpApiEndpoint, OpenApi } from "effect/http-api"
import { capabilityProblemExamples } from "./ProblemExampleParts.ts"
import { RequiredScope } from "./Security.ts"

/** The license the document declares: MIT, as `LICENSE` and the package manifests do. */
export const ApiLicense: OpenApi.OpenAPISpecLicense = { name: "MIT", identifier: "MIT" }

/** `/` is the svc serving the document (what `/docs` sends requests to). */
export const ApiServers: ReadonlyArray<OpenApi.OpenAPISpecServer> = [
  { url: "/", description: "The svc that serves this document" },
  { url: "http://127.0.0.1:8080", description: "A local svc started with `npm start` (`HOST` and `PORT` change the address)" }
]

/** One description per tag (a group's `OpenApi.Title`). */
export const TagDescriptions: Readonly<Record<string, string>> = {
  "System": "Liveness and readiness probes. No authentication.",
  "Tasks and runs":
    "A task names a kind of question and the JSON Schema of its answers; a run logs one question and the answer given. A run's `trace_id` is the `inference_log_id` that feedback refers to.",
  "Datasets":
    "Immutable dataset versions of a task: the examples it started with plus promoted corrections. Each promotion creates the next version.",
  "Agent sessions":
    "An agent works in a session and asks before each governed step; the organization's approval policy for the step's action class answers `allow`, `reject` or `pending`. The session's events can be followed as server-sent events.",
  "Approval policies":
    "Per action class: allow, reject, or require a person's approval within review windows, with an expiring notice, an optional escalation and a timeout action.",
  "Approvals":
    "Approvals that governed steps wait for: read the snapshot and what a person needs to decide (the task's name, the session's earlier steps), approve or reject with an optional reason, and read the history of closed ones. Every lifecycle change is also sent to the organization's notification endpoints.",
  "Reviewer groups": "Named groups of people who decide the approvals assigned to them (by a policy's or a rule's `group`), and delegations of a member's reviewing to another person for a time window. Each of an approval's deadlines may hand it to the next group of its chain (`escalation_chain`, up to 5 groups).",
  "Approval links":
    "The link in a reviewer mail about a pending approval (`/console/decide#<token>` under `SVC_PUBLIC_URL`): it opens that approval only, signs nobody in, and lets the person who opened it approve or reject it, recorded as `email:<reviewer address>`, while that address is still the organization's reviewer address. No authentication: the token is the credential.",
  "Reviewer address confirmation":
    "The link in the confirmation mail a new reviewer address is sent (`/console/confirm-address#<token>` under `SVC_PUBLIC_URL`): it confirms that address once, before it expires, while it is still the organization's; only then does it receive approval mail. No authentication: the token is the credential.",
  "Feedback":
    "Scores and corrections on logged runs. A correction is checked against the task's answer schema and scrubbed of secrets, then reviewed (staged or rejected) and promoted into a new dataset version.",
  "Telemetry destinations":
    "One OTLP/HTTP JSON trace collector per organization, receiving the spans of the organization's own requests, with delivery records and replay.",
  "Console sign-in":
    "Sign-in with a one-time link, sign-out, and who is signed in. These read the console cookie only.",
  "Console":
    "The web console's sessions. `npm run cli -- console login` prints a one-time link; posting its secret to sign-in sets the console cookie (`__Host-svc_console_session`, `Secure`, when the public URL is HTTPS; `svc_console_session` over plain HTTP), which authenticates the `/v1` API with the preset's scopes (reviewer, approver, admin). State-changing requests with the cookie must send `X-Svc-Console: 1` and come from the console's own origin.",
  "API keys":
    "The organization's API keys: list (never the key itself), create with chosen scopes (the key is shown once), revoke. Scope `keys.manage`.",
  "Notification endpoints":
    "Signed HTTPS webhooks for approval events and operational events about the endpoints (`X-Svc-Signature` in Stripe's form and the Standard Webhooks headers `webhook-id`, `webhook-timestamp`, `webhook-signature`, HMAC-SHA256), delivered at least once with retries, delivery records, replay (one or a time window), test events, filters by action class and delivery statistics, plus the reviewer email address."
}

// ---------------------------------------------------------------------------
// Problems

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
      ? { detail: "The request body: Expected a valid JSON body", errors: [{ field: "", message: "Expected a valid JSON body" }] }
      : { detail: `${field}: ${expected}`, field, errors: [{ field, message: expected }] },
  UNAUTHENTICATED: () => ({ detail: "Send the API key as `Authorization: Bearer <key>`." }),
  CROSS_SITE_REQUEST: () => ({
    detail: "A console request that changes state must send the `X-Svc-Console: 1` header and come from the console's own origin."
  }),
  TOO_MANY_STREAMS: () => ({
    detail: "This API key has 100 open event streams, the most allowed (SVC_MAX_STREAMS_PER_KEY); close one first.",
    limit: "SVC_MAX_STREAMS_PER_KEY",
    limit_value: 100
  }),
  LINK_INVALID: () => ({ detail: "Ask for a new link: `npm run cli -- console login`." }),
  APPROVAL_LINK_INVALID: () => ({ detail: "This link opens no approval of this service. Use the whole link of the mail, or decide in the console." }),
  REVIEWER_ADDRESS_REPLACED: () => ({ detail: "The address this mail went to is no longer the organization's reviewer address: its links open nothing." }),
  CONFIRMATION_LINK_INVALID: () => ({
    detail: "This is not the confirmation link of a reviewer address of this service. Use the whole link of the latest mail."
  }),
  CONFIRMATION_LINK_USED: () => ({ detail: "This confirmation link was used already; a link works once.", used_at: "2026-11-22T12:01:00.000Z" }),
  CONFIRMATION_LINK_EXPIRED: () => ({ detail: "This confirmation link expired before it was used. Set the address again to be sent a new one.", expired_at: "2026-11-23T12:00:00.000Z" }),
  LINK_USED: () => ({ detail: "This sign-in link was used already; ask for a new one.", used_at: "2026-11-22T12:01:00.000Z" }),
  LINK_EXPIRED: () => ({ detail: "This sign-in link expired; ask for a new one.", expired_at: "2026-11-22T12:15:00.000Z" }),
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
    detail: "The service cannot reach its database at the moment (the database cannot be reached (ECONNREFUSED)). Nothing was done; retry after 5 seconds."
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
    detail: "This endpoint was tested 6 times in the last minute, the most allowed (SVC_WEBHOOK_TESTS_PER_MINUTE); retry in 42 s.",
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
    detail: "The organization already has 50 notification endpoints, the most allowed (SVC_MAX_ENDPOINTS_PER_ORG); delete one first.",
    limit: "SVC_MAX_ENDPOINTS_PER_ORG",
    limit_value: 50
  }),
  ANSWER_SCHEMA_TOO_COMPLEX: () => ({
    detail: "answer_schema.properties.code.pattern is a pattern longer than 512 characters (SVC_ANSWER_SCHEMA_MAX_PATTERN_LENGTH).",
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
    detail: "checking the correction against the answer schema took longer than 1000 ms (SVC_ANSWER_VALIDATION_TIMEOUT); send a smaller correction or simplify the answer schema.",
    field: "correction",
    limit: "SVC_ANSWER_VALIDATION_TIMEOUT",
    limit_value: 1000
  }),
  ...capabilityProblemExamples,
  VALIDATION_BUSY: () => ({
    detail: "The validation queue holds 128 checks (SVC_ANSWER_VALIDATION_QUEUE) and this organization holds at least its share of them; retry after 1 second.",
    limit: "SVC_ANSWER_VALIDATION_QUEUE",
    limit_value: 128
  })
}

// ---------------------------------------------------------------------------
// Operations

/** The documentation of one operation. Examples are JSON as sent on the wire. */
export interface OperationDocs {
  /** A few words, shown in lists and the docs' sidebar ("Create a task"). */
  readonly summary: string
  /**
   * What the operation does. Optional when `requireScope(scope, description)`
   * already gave one; a scope line is added after it either way.
   */
  readonly description?: string
  /** An example request body. */
  readonly request?: unknown
  /** An example of the success answer. */
  readonly response?: unknown
  /** What an error status means for this operation, where its problem's title says too little. */
  readonly errors?: Readonly<Record<number, string>>
}

/** The usual note for a 404: ids of other organizations are answered as missing ones. */
export const notFound = (what: string) =>
  `No ${what} with this id in your organization (another organization's is answered the same way).`

/** The examples of an endpoint, readable by tests through `HttpApi.reflect`. */
export class OperationExamples extends Context.Service<
  OperationExamples,
  Pick<OperationDocs, "request" | "response">
>()("svc/api/Documentation/OperationExamples") {}

type Operation = Record<string, any>

/** The scopes an endpoint needs: one, or any one of several. */
const requiredScopes = (endpoint: HttpApiEndpoint.Top): ReadonlyArray<string> => {
  const required: unknown = Option.getOrUndefined(Context.getOption(endpoint.annotations, RequiredScope))
  return required === undefined ? [] : typeof required === "string" ? [required] : [...(required as ReadonlyArray<string>)]
}

/**
 * Documents an endpoint: summary, description, examples, and the scope it
 * needs as the scope of its security requirement (OpenAPI 3.1 allows role
 * names there for any scheme; several alternative scopes are alternative
 * requirements). Pipe it after `requireScope`, whose sentence about the
 * scope is kept after a `description` given here.
 */
export const documented = (docs: OperationDocs) => <E extends HttpApiEndpoint.Constraint>(endpoint: E): E => {
  const self = endpoint as unknown as HttpApiEndpoint.Top
  const scopes = requiredScopes(self)
  const scopeSentence = Option.getOrUndefined(Context.getOption(self.annotations, OpenApi.Description))
    ?.split("\n\n")
    .find((paragraph) => paragraph.startsWith("Requires "))
  const transform = (op: Operation): Operation => {
    const out: Operation = { ...op, summary: docs.summary }
    if (docs.description !== undefined) {
      out.description = scopeSentence === undefined ? docs.description : `${docs.description}\n\n${scopeSentence}`
    }
    if (scopes.length > 0) {
      out.security = (op.security as Array<Record<string, Array<string>>>).flatMap((requirement) =>
        scopes.map((scope) => Object.fromEntries(Object.keys(requirement).map((name) => [name, [scope]])))
      )
    }
    if (docs.request !== undefined) {
      const media = op.requestBody?.content?.["application/json"]
      if (media === undefined) throw new Error(`${op.operationId}: a request example, but no JSON request body`)
      out.requestBody = { ...op.requestBody, content: { ...op.requestBody.content, "application/json": { ...media, example: docs.request } } }
    }
    out.responses = { ...op.responses }
    if (docs.response !== undefined) {
      const status = Object.keys(op.responses).find((code) => code.startsWith("2") && op.responses[code].content !== undefined)
      if (status === undefined) throw new Error(`${op.operationId}: a response example, but no success body`)
      const response = op.responses[status]
      out.responses[status] = {
        ...response,
        content: Object.fromEntries(
          Object.entries(response.content as Record<string, object>).map(([type, media]) => [type, { ...media, example: docs.response }])
        )
      }
    }
    for (const [status, description] of Object.entries(docs.errors ?? {})) {
      if (op.responses[status] === undefined) throw new Error(`${op.operationId}: a note for ${status}, which it does not answer`)
      out.responses[status] = { ...op.responses[status], description }
    }
    return out
  }
  return self
    .annotate(OpenApi.Summary, docs.summary)
    .annotate(OperationExamples, { request: docs.request, response: docs.response })
    .annotate(OpenApi.Transform, transform) as unknown as E
}

// ---------------------------------------------------------------------------
// The whole document

const PROBLEM_TYPE_PREFIX = "urn:svc:problem:"
const PROBLEM_JSON = "application/problem+json"
const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"] as const

const refName = (ref: string) => ref.replace("#/components/schemas/", "")

/** The problem components an error response refers to (`$ref`, or `anyOf` of `$ref`s). */
const problemRefs = (schema: Operation | undefined): Array<string> =>
  schema === undefined
    ? []
    : typeof schema.$ref === "string"
    ? [refName(schema.$ref)]
    : Array.isArray(schema.anyOf)
    ? schema.anyOf.flatMap((member: Operation) => problemRefs(member))
    : []

const enumValue = (schema: Operation | undefined): unknown => Array.isArray(schema?.enum) ? schema.enum[0] : undefined

const isProblemSchema = (schema: Operation): boolean => {
  const type = enumValue(schema.properties?.type)
  return typeof type === "string" && type.startsWith(PROBLEM_TYPE_PREFIX)
}

const expectedOf = (schema: Operation | undefined): string =>
  schema?.format === "uuid"
    ? "Expected a UUID"
    : schema?.type === "object"
    ? "Expected an object"
    : schema?.type === "integer" || schema?.type === "number"
    ? "Expected a number"
    : "Expected a string"

const firstField = (op: Operation): Pick<ProblemContext, "field" | "expected"> => {
  const parameters = op.parameters as Array<Operation>
  const path = parameters.find((parameter) => parameter.in === "path")
  if (path !== undefined) return { field: path.name, expected: expectedOf(path.schema) }
  const body = op.requestBody?.content?.["application/json"]?.schema
  const member: string | undefined = body?.required?.[0] ?? Object.keys(body?.properties ?? {})[0]
  if (member !== undefined) return { field: member, expected: expectedOf(body.properties?.[member]) }
  const query = parameters.find((parameter) => parameter.in === "query")
  return { field: query?.name, expected: expectedOf(query?.schema) }
}

/**
 * An object schema that names no members (a JSON object of any shape, such
 * as an answer schema) says so explicitly: generators such as
 * openapi-typescript otherwise type it as an object with no members.
 */
const openObjects = (value: unknown): void => {
  if (Array.isArray(value)) {
    for (const item of value) openObjects(item)
    return
  }
  if (typeof value !== "object" || value === null) return
  const schema = value as Operation
  if (
    schema.type === "object" && schema.properties === undefined && schema.additionalProperties === undefined &&
    schema.patternProperties === undefined
  ) {
    schema.additionalProperties = true
  }
  for (const [key, inner] of Object.entries(schema)) {
    // Examples are data, not schemas.
    if (key !== "example" && key !== "examples") openObjects(inner)
  }
}

// A parameter sent as text that is a number (`IntegerFromDigits`): Effect writes `{"type": "string", "allOf": [{"type": "integer", …}]}`,
// which no value satisfies; OpenAPI describes a parameter by the value it serializes, the `integer` its check states.
const integerParameter = (schema: Operation): Operation =>
  schema.type === "string" && schema.allOf?.length === 1 && schema.allOf[0].type === "integer"
    ? (({ allOf, type: _type, ...rest }: Operation) => ({ ...allOf[0], ...rest }))(schema)
    : schema

/**
 * Completes the generated document: tag descriptions; explicit open objects; `status` and `title`
 * required in problems (always sent); 413 and 415 only where a request body
 * is read; an example per problem code on every error response, and a
 * description naming the codes.
 */
export const completeDocument = (spec: Record<string, any>): Record<string, any> => {
  const schemas: Record<string, Operation> = spec.components?.schemas ?? {}
  openObjects(schemas)
  openObjects(spec.paths)
  for (const schema of Object.values(schemas)) {
    if (isProblemSchema(schema)) {
      schema.required = [...new Set([...(schema.required ?? []), "type", "status", "title", "code"])]
    }
  }
  spec.tags = (spec.tags as Array<Operation>).map((tag) =>
    tag.description === undefined && TagDescriptions[tag.name] !== undefined
      ? { ...tag, description: TagDescriptions[tag.name] }
      : tag
  )
  for (const pathItem of Object.values(spec.paths as Record<string, Operation>)) {
    for (const method of METHODS) {
      const op: Operation | undefined = pathItem[method]
      if (op === undefined) continue
      for (const parameter of op.parameters as Array<Operation>) parameter.schema = integerParameter(parameter.schema)
      if (op.requestBody === undefined) {
        delete op.responses["413"]
        delete op.responses["415"]
      }
      const scope = (op.security as Array<Record<string, Array<string>>>)
        .flatMap((requirement) => Object.values(requirement).flat())[0]
      const context: ProblemContext = { scope, ...firstField(op) }
      for (const [status, response] of Object.entries(op.responses as Record<string, Operation>)) {
        const media = response.content?.[PROBLEM_JSON]
        if (Number(status) < 400 || media === undefined) continue
        const problems = problemRefs(media.schema).map((name) => schemas[name]).filter((schema) => schema !== undefined)
        const titles = problems.map((schema) => enumValue(schema.properties?.title))
        const examples: Record<string, { summary: string; value: unknown }> = {}
        for (const schema of problems) {
          const code = enumValue(schema.properties?.code)
          const extras = typeof code === "string" ? ProblemExamples[code] : undefined
          if (typeof code !== "string" || extras === undefined) continue
          examples[code] = {
            summary: String(enumValue(schema.properties?.title)),
            value: {
              type: enumValue(schema.properties?.type),
              status: enumValue(schema.properties?.status),
              title: enumValue(schema.properties?.title),
              code,
              ...extras(context)
            }
          }
        }
        if (Object.keys(examples).length > 0) media.examples = examples
        if (response.description === titles.join(" | ")) {
          response.description = problems
            .map((schema) => `\`${String(enumValue(schema.properties?.code))}\`: ${String(enumValue(schema.properties?.title))}`)
            .join("; ")
        }
      }
    }
  }
  return spec
}

type DocumentTransform = (spec: Record<string, any>) => Record<string, any>

/**
 * The document-wide annotations, to merge into the HttpApi with
 * `annotateMerge`. An API has one `OpenApi.Transform`: pass any other
 * document-wide transform here (it runs before `completeDocument`) rather
 * than annotating the API with it, which would replace this one.
 */
export const apiDocumentation = (...transforms: ReadonlyArray<DocumentTransform>) =>
  OpenApi.annotations({
    license: ApiLicense,
    servers: ApiServers,
    transform: (spec) => completeDocument(transforms.reduce((document, transform) => transform(document), spec))
  })
