/**
 * `Idempotency-Key` on every authenticated write (`POST`, `PUT`, `PATCH`,
 * `DELETE`), as Stripe defines it: the first request's answer is kept per
 * organization and key, a repeat of the same request answers it again with
 * `Idempotent-Replayed: true`, and the same key on another request is
 * refused. The contract lives here: the header's rule, the problems, and the
 * middleware tag every write endpoint carries (added by `withIdempotency`,
 * once, over the whole API); the server side is `src/idempotency/`.
 */
import { Context, Option, Schema } from "effect"
import { HttpApi, type HttpApiEndpoint, HttpApiMiddleware, OpenApi } from "effect/http-api"
import { Problem, RateLimited } from "./Errors.ts"
import { Authentication, CurrentPrincipal } from "./Security.ts"

/** The request header, as HTTP names it (lower case on the wire in Node). */
export const IDEMPOTENCY_HEADER = "Idempotency-Key"

/** The answer header of a replay: `Idempotent-Replayed: true`. */
export const REPLAYED_HEADER = "Idempotent-Replayed"

/** The longest key: 255 characters, as Stripe allows. */
export const MAX_KEY_LENGTH = 255

/** Printable ASCII without spaces (`!` to `~`): what a UUID, a ULID or a request id is made of. */
const KEY_PATTERN = "^[\\x21-\\x7E]+$"

export const IdempotencyKey = Schema.String.check(
  Schema.isMinLength(1),
  Schema.isMaxLength(MAX_KEY_LENGTH),
  Schema.isPattern(new RegExp(KEY_PATTERN))
).annotate({
  description:
    `A key of 1 to ${MAX_KEY_LENGTH} printable ASCII characters without spaces, chosen by the client (a UUID, say), new for each change it means to make and the same on each retry of it`
})

const field = Schema.Literal(IDEMPOTENCY_HEADER).annotate({ description: "The header at fault" })

/** The key was used for another request (another method, path or body). */
export class IdempotencyKeyReused extends Problem<IdempotencyKeyReused>()("IdempotencyKeyReused", {
  code: "IDEMPOTENCY_KEY_REUSED",
  status: 422,
  title: "This Idempotency-Key was used for another request"
}, {
  field
}) {}

/** The first request with this key is still running: retry after it answers. */
export class IdempotencyKeyInUse extends Problem<IdempotencyKeyInUse>()("IdempotencyKeyInUse", {
  code: "IDEMPOTENCY_KEY_IN_USE",
  status: 409,
  title: "A request with this Idempotency-Key is still running"
}, {
  field
}) {}

/**
 * The first request with this key began but its answer was not kept: the
 * service stopped (or lost its database) before recording it, or the answer
 * was over `SVC_IDEMPOTENCY_MAX_ANSWER_BYTES`. It is never run again under
 * this key: read the resource to learn what happened.
 */
export class IdempotencyAnswerUnavailable
  extends Problem<IdempotencyAnswerUnavailable>()("IdempotencyAnswerUnavailable", {
    code: "IDEMPOTENCY_ANSWER_UNAVAILABLE",
    status: 409,
    title: "The first request with this Idempotency-Key began, but its answer was not kept"
  }, {
    field
  })
{}

/** What each problem says (the server's `detail`, and the document's examples). */
export const IdempotencyDetails = {
  reused: "This key was used for a request with another method, path or body. Use a new key for a new request.",
  inUse: "The first request with this key is still running; retry once it has answered.",
  interrupted:
    "The first request with this key began, but svc stopped before recording its answer: whether it took effect is unknown. Read the resource to find out; it is not run again under this key."
} as const

/** The examples of `Documentation.ts`'s `ProblemExamples`, one per code. */
export const idempotencyProblemExamples = {
  IDEMPOTENCY_KEY_REUSED: () => ({ detail: IdempotencyDetails.reused, field: IDEMPOTENCY_HEADER }),
  IDEMPOTENCY_KEY_IN_USE: () => ({ detail: IdempotencyDetails.inUse, field: IDEMPOTENCY_HEADER }),
  IDEMPOTENCY_ANSWER_UNAVAILABLE: () => ({ detail: IdempotencyDetails.interrupted, field: IDEMPOTENCY_HEADER })
}

/**
 * Keeps and replays the answers of keyed writes. Runs inside
 * `Authentication` (the key belongs to the caller's organization). A new
 * key beyond `SVC_IDEMPOTENCY_MAX_KEYS_PER_ORG` is `429 RATE_LIMITED`.
 */
export class Idempotency extends HttpApiMiddleware.Service<Idempotency, {
  requires: CurrentPrincipal
}>()("svc/api/Idempotency", {
  error: [IdempotencyKeyReused, IdempotencyKeyInUse, IdempotencyAnswerUnavailable, RateLimited]
}) {}

const WRITES: ReadonlySet<string> = new Set(["POST", "PUT", "PATCH", "DELETE"])

/** Whether `endpoint` takes an `Idempotency-Key`: an authenticated write. */
const isKeyedWrite = (endpoint: HttpApiEndpoint.Top): boolean =>
  WRITES.has(endpoint.method) && endpoint.middlewares.has(Authentication as never)

/** The header as an OpenAPI parameter (the rule of `IdempotencyKey`). */
const idempotencyParameter = {
  name: IDEMPOTENCY_HEADER,
  in: "header",
  required: false,
  description:
    `Makes the write safe to retry: the first answer (2xx and 4xx) is kept for \`SVC_IDEMPOTENCY_TTL\` (24 h) per organization and key, and a repeat with the same method, path and body answers it again with \`${REPLAYED_HEADER}: true\`. The same key on another request: \`422 IDEMPOTENCY_KEY_REUSED\`; while the first still runs: \`409 IDEMPOTENCY_KEY_IN_USE\`; when its answer was lost: \`409 IDEMPOTENCY_ANSWER_UNAVAILABLE\`. 5xx answers are not kept.`,
  schema: { type: "string", minLength: 1, maxLength: MAX_KEY_LENGTH, pattern: KEY_PATTERN },
  example: "0f6c8a52-4c1e-4d2a-9a63-2b1f0c7e5d11"
} as const

type Operation = Record<string, any>

/** The endpoint with the `Idempotency` middleware innermost (inside `Authentication`) and the header documented. */
const keyed = (endpoint: HttpApiEndpoint.Top): HttpApiEndpoint.Top => {
  const before = Option.getOrUndefined(Context.getOption(endpoint.annotations, OpenApi.Transform)) as
    | ((op: Operation) => Operation)
    | undefined
  const transform = (op: Operation): Operation => {
    const out = before === undefined ? op : before(op)
    return { ...out, parameters: [...(out.parameters ?? []), idempotencyParameter] }
  }
  // `annotate` answers a new endpoint; its own middleware set is replaced by
  // one that starts with `Idempotency`: the first middleware is the innermost,
  // inside `Authentication` and inside the endpoint's own admission to the
  // validation workers, which still refuses before the body is read (a
  // repeat it refuses is a 429 to retry, as the first would have been).
  return Object.assign(endpoint.annotate(OpenApi.Transform, transform), {
    middlewares: new Set([Idempotency, ...endpoint.middlewares])
  })
}

/**
 * The API with `Idempotency` on every authenticated write. Applied once,
 * over the whole API (`Api.ts`), so a new write endpoint takes keys without
 * a line of its own.
 */
export const withIdempotency = <A extends HttpApi.Constraint>(api: A): A => {
  const self = api as unknown as HttpApi.Top
  const groups = Object.values(self.groups).map((group) => {
    const writes = Object.values(group.endpoints).filter(isKeyedWrite).map(keyed)
    // `add` replaces the endpoints of the same name.
    const add = (group.add as (...endpoints: ReadonlyArray<unknown>) => typeof group).bind(group)
    return writes.length === 0 ? group : add(...writes)
  })
  const rebuilt = (HttpApi.make(self.identifier).add as (...groups: ReadonlyArray<unknown>) => HttpApi.Top)(...groups)
  return rebuilt.annotateMerge(self.annotations) as unknown as A
}
