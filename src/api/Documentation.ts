/**
 * How the contract documents itself: the OpenAPI document (`GET
 * /openapi.json`, rendered at `/docs`) is generated from the HttpApi
 * definition, and what it needs beyond the schemas is here: servers,
 * license, tag descriptions, and `documented(...)`, which gives an endpoint
 * its summary, description and examples; one example per problem code is
 * `ProblemExamples.ts`, and the document's completion `OpenApiDocument.ts`.
 *
 * Every operation must be `documented` and every problem code it can answer
 * must have an entry in `ProblemExamples`: `test/unit/api/openapi.test.ts`
 * fails otherwise, and `redocly lint` (recommended rules) must stay clean.
 */
import { Context, Option } from "effect"
import { type HttpApiEndpoint, OpenApi } from "effect/http-api"
import { RequiredScope } from "./Security.ts"

/** The license the document declares: MIT, as `LICENSE` and the package manifests do. */
export const ApiLicense: OpenApi.OpenAPISpecLicense = { name: "MIT", identifier: "MIT" }

/** `/` is the svc serving the document (what `/docs` sends requests to). */
export const ApiServers: ReadonlyArray<OpenApi.OpenAPISpecServer> = [
  { url: "/", description: "The svc that serves this document" },
  {
    url: "http://127.0.0.1:8080",
    description: "A local svc started with `npm start` (`HOST` and `PORT` change the address)"
  }
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
  "Reviewer groups":
    "Named groups of people who decide the approvals assigned to them (by a policy's or a rule's `group`), and delegations of a member's reviewing to another person for a time window. Each of an approval's deadlines may hand it to the next group of its chain (`escalation_chain`, up to 5 groups).",
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
  return required === undefined
    ? []
    : typeof required === "string"
    ? [required]
    : [...(required as ReadonlyArray<string>)]
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
      out.requestBody = {
        ...op.requestBody,
        content: { ...op.requestBody.content, "application/json": { ...media, example: docs.request } }
      }
    }
    out.responses = { ...op.responses }
    if (docs.response !== undefined) {
      const status = Object.keys(op.responses).find((code) =>
        code.startsWith("2") && op.responses[code].content !== undefined
      )
      if (status === undefined) throw new Error(`${op.operationId}: a response example, but no success body`)
      const response = op.responses[status]
      out.responses[status] = {
        ...response,
        content: Object.fromEntries(
          Object.entries(response.content as Record<string, object>).map((
            [type, media]
          ) => [type, { ...media, example: docs.response }])
        )
      }
    }
    for (const [status, description] of Object.entries(docs.errors ?? {})) {
      if (op.responses[status] === undefined) {
        throw new Error(`${op.operationId}: a note for ${status}, which it does not answer`)
      }
      out.responses[status] = { ...op.responses[status], description }
    }
    return out
  }
  return self
    .annotate(OpenApi.Summary, docs.summary)
    .annotate(OperationExamples, { request: docs.request, response: docs.response })
    .annotate(OpenApi.Transform, transform) as unknown as E
}
