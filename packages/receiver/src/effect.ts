/**
 * `@svc/receiver/effect`: the receiver kit for Effect programs and Effect
 * HTTP servers. Same checks as `@svc/receiver` (which it wraps), with typed
 * failures instead of rejected promises.
 *
 * ```ts
 * const handler = Effect.gen(function*() {
 *   const event = yield* SvcWebhooks.fromRequest({ secret })   // reads the raw body of the current request
 *   yield* saveDurably(event)
 *   return HttpServerResponse.empty({ status: 202 })
 * }).pipe(Effect.catchTag("WebhookRejected", (e) => HttpServerResponse.json({ error: e.reason }, { status: 400 })))
 * ```
 */
import { ByteSize, Data, Effect } from "effect"
import { HttpServerRequest } from "effect/http"
import {
  constructEvent as constructEventPromise,
  constructEventFromHeaders as constructEventFromHeadersPromise,
  type DedupStore,
  DEFAULT_MAX_BODY_BYTES,
  type HeaderSource,
  type RawBody,
  type Secrets,
  type VerifyOptions,
  verifySignature as verifySignaturePromise,
  verifyStandardWebhook as verifyStandardWebhookPromise,
  type WebhookEvent,
  WebhookVerificationError,
  type WebhookVerificationReason
} from "./index.ts"

export * from "./index.ts"

/** A delivery refused by the checks; `reason` says why (never the secret or the body). */
export class WebhookRejected extends Data.TaggedError("WebhookRejected")<{
  readonly reason: WebhookVerificationReason
  readonly message: string
}> {}

const lift = <A>(run: () => Promise<A>): Effect.Effect<A, WebhookRejected> =>
  Effect.tryPromise({
    try: run,
    catch: (error) => error
  }).pipe(
    Effect.catch((error) =>
      error instanceof WebhookVerificationError
        ? Effect.fail(new WebhookRejected({ reason: error.reason, message: error.message }))
        : Effect.die(error)
    )
  )

export const SvcWebhooks = {
  /** Signature and timestamp only, on the raw body. */
  verifySignature: (rawBody: RawBody, header: string | null | undefined, secret: Secrets, options?: VerifyOptions) =>
    lift(() => verifySignaturePromise(rawBody, header, secret, options)),

  /** Standard Webhooks signature and timestamp only (`webhook-id`, `webhook-timestamp`, `webhook-signature`). */
  verifyStandardWebhook: (rawBody: RawBody, headers: HeaderSource, secret: Secrets, options?: VerifyOptions) =>
    lift(() => verifyStandardWebhookPromise(rawBody, headers, secret, options)),

  /** Verified and decoded event, by whichever signature scheme the headers carry. */
  constructEventFromHeaders: (rawBody: RawBody, headers: HeaderSource, secret: Secrets, options?: VerifyOptions) =>
    lift(() => constructEventFromHeadersPromise(rawBody, headers, secret, options)),

  /** Verified and decoded event. */
  constructEvent: (rawBody: RawBody, header: string | null | undefined, secret: Secrets, options?: VerifyOptions) =>
    lift(() => constructEventPromise(rawBody, header, secret, options)),

  /**
   * Reads the current request's raw body (at most `maxBodyBytes`, default
   * 1 MiB: reading stops there) and verifies `x-svc-signature` or, without
   * it, the Standard Webhooks headers (`constructEventFromHeaders`).
   */
  fromRequest: (options: VerifyOptions & { readonly secret: Secrets }) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const max = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
      const raw = yield* request.arrayBuffer.pipe(
        Effect.provideService(HttpServerRequest.MaxBodySize, ByteSize.bytes(max)),
        Effect.mapError((error) =>
          error.reason._tag === "RequestParseError" && error.reason.reason === "BodyTooLarge"
            ? new WebhookRejected({ reason: "body_too_large", message: `the body is over ${max} bytes (maxBodyBytes)` })
            : new WebhookRejected({ reason: "invalid_body", message: "the body could not be read" })
        )
      )
      return yield* lift(() => constructEventFromHeadersPromise(raw, request.headers, options.secret, options))
    }),

  /** Runs `handle` once per event id (see `deduplicate`); a duplicate answers `{ duplicate: true }`. */
  deduplicate: <A, E, R>(
    store: DedupStore,
    event: WebhookEvent,
    handle: (event: WebhookEvent) => Effect.Effect<A, E, R>
  ) =>
    Effect.gen(function*() {
      const fresh = yield* Effect.promise(() => store.add(event.id, event))
      if (!fresh) return { duplicate: true as const }
      const value = yield* handle(event).pipe(
        Effect.onError(() => store.remove === undefined ? Effect.void : Effect.promise(() => store.remove!(event.id)))
      )
      return { duplicate: false as const, value }
    })
}
