/**
 * `@svc/client`: the typed client of the `svc` HTTP API, generated from the
 * HttpApi definition. It imports no server code and runs wherever `fetch`
 * does.
 *
 * ```ts
 * import { SvcClient } from "@svc/client"
 *
 * const program = Effect.gen(function*() {
 *   const svc = yield* SvcClient
 *   const task = yield* svc.tasks.create({ payload: { name: "triage", answer_schema: { type: "object" } } })
 * }).pipe(Effect.provide(SvcClient.layer({ baseUrl: "http://127.0.0.1:8080", apiKey: process.env.SVC_API_KEY })))
 * ```
 *
 * Failures are the API's typed problems (`NotFound`, `InvalidRequest`, ...),
 * matched with `Effect.catchTag`.
 */
import { Context, Effect, Layer, Redacted } from "effect"
import { FetchHttpClient, HttpClient, HttpClientRequest } from "effect/http"
import { HttpApiClient, HttpApiMiddleware } from "effect/http-api"
import { Api } from "./api/Api.ts"
import { Idempotency, IDEMPOTENCY_HEADER } from "./api/Idempotency.ts"
import { Authentication } from "./api/Security.ts"

export { Api } from "./api/Api.ts"
export * from "./api/Errors.ts"
// The problems of one capability, beside the shared ones above: every error class the API answers is exported.
export { ArgumentsShapeMismatch, ArgumentsTooComplex } from "./api/ApprovalEdits.ts"
export {
  ApprovalLinkInvalid,
  ConfirmationLinkExpired,
  ConfirmationLinkInvalid,
  ConfirmationLinkUsed,
  ReviewerAddressReplaced
} from "./api/ApprovalLinks.ts"
export { NotAssigned } from "./api/Assignment.ts"
export { LinkExpired, LinkInvalid, LinkUsed } from "./api/Console.ts"
export { InvalidUrl, NotReplayable, QueueFull } from "./api/Deliveries.ts"
export {
  CorrectionContainsSecret,
  CorrectionShapeMismatch,
  DatasetBaseChanged,
  FeedbackChanged,
  NothingStaged
} from "./api/Feedback.ts"
export { IdempotencyAnswerUnavailable, IdempotencyKeyInUse, IdempotencyKeyReused } from "./api/Idempotency.ts"
export { UpstreamFailed } from "./api/Mcp.ts"
export { DeliveryFailed, InvalidWebhookEvents } from "./api/Notifications.ts"
export { GroupInUse } from "./api/Reviewers.ts"
export { type ScopeName, Scopes } from "./api/Security.ts"
export { DestinationExists, ExportFailed } from "./api/Telemetry.ts"
export { AlreadyVoted, PersonRequired } from "./api/Votes.ts"

export type SvcApiClient = HttpApiClient.ForApi<typeof Api>

export interface ClientOptions {
  /** e.g. `http://127.0.0.1:8080` */
  readonly baseUrl: string | URL
  /** The API key; sent as `Authorization: Bearer <key>`. */
  readonly apiKey?: string | Redacted.Redacted<string> | undefined
  /** Extra behaviour for the underlying `HttpClient` (retries, headers). */
  readonly transformClient?: ((client: HttpClient.HttpClient) => HttpClient.HttpClient) | undefined
}

const authentication = (apiKey: ClientOptions["apiKey"]) =>
  HttpApiMiddleware.layerClient(Authentication, ({ next, request }) =>
    apiKey === undefined
      ? next(request)
      : next(HttpClientRequest.bearerToken(request, typeof apiKey === "string" ? apiKey : Redacted.value(apiKey))))

/**
 * The `Idempotency-Key` the writes of an effect send (`withIdempotencyKey`);
 * unset, each write sends a new one.
 */
export const IdempotencyKey = Context.Reference<string | undefined>("svc/client/IdempotencyKey", {
  defaultValue: () => undefined
})

/**
 * Sends `key` as the `Idempotency-Key` of the writes `effect` makes, e.g. a
 * key your program stored before a call that may have to be retried after a
 * restart: `svc.feedback.submit({...}).pipe(withIdempotencyKey(key))`.
 */
export const withIdempotencyKey = (key: string) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.provideService(effect, IdempotencyKey, key)

/**
 * Every write sends an `Idempotency-Key`: the one `withIdempotencyKey`
 * gave, else a new one for this call. It is set before the `HttpClient`
 * runs, so the client's own retries (`transformClient`) resend the same key
 * and the server answers a retry of a write that took effect with its first
 * answer instead of acting twice. A header already on the request is kept.
 */
const idempotency = HttpApiMiddleware.layerClient(Idempotency, ({ next, request }) =>
  Effect.withFiber((fiber) => {
    if (request.headers[IDEMPOTENCY_HEADER.toLowerCase()] !== undefined) return next(request)
    const key: string = fiber.getRef(IdempotencyKey) ?? globalThis.crypto.randomUUID()
    return next(HttpClientRequest.setHeader(request, IDEMPOTENCY_HEADER, key))
  }))

/** Builds a client; needs an `HttpClient` (e.g. `FetchHttpClient.layer`). */
export const make = (options: ClientOptions): Effect.Effect<SvcApiClient, never, HttpClient.HttpClient> =>
  HttpApiClient.make(Api, {
    baseUrl: options.baseUrl,
    ...(options.transformClient === undefined ? {} : { transformClient: options.transformClient })
  }).pipe(Effect.provide(Layer.merge(authentication(options.apiKey), idempotency)))

export class SvcClient extends Context.Service<SvcClient, SvcApiClient>()("svc/client/SvcClient") {
  /** A client over `fetch`. */
  static readonly layer = (options: ClientOptions): Layer.Layer<SvcClient> =>
    Layer.effect(SvcClient, make(options)).pipe(Layer.provide(FetchHttpClient.layer))
}
