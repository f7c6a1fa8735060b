/**
 * `@svc/receiver`: verify and decode `svc` webhook deliveries.
 *
 * No dependency on the server and nothing at run time beyond the platform's
 * Web Crypto (`crypto.subtle`), so it runs on Node, Deno, Bun and edge
 * runtimes. Named after Stripe's verifier:
 *
 * ```ts
 * import { constructEvent, WebhookVerificationError } from "@svc/receiver"
 * const raw = await request.text()                      // the raw body, before any JSON parsing
 * const event = await constructEvent(raw, request.headers.get("x-svc-signature"), secret, {
 *   expectedOrgId: "0193..."                            // optional
 * })
 * ```
 *
 * The signature is checked on the raw bytes before anything is parsed:
 * HMAC-SHA256 over `${t}.${rawBody}` keyed with the secret string as
 * returned, one HMAC per secret compared in constant time with each of the
 * `v1=` values (secret rotation), timestamp within `toleranceSeconds` (300)
 * of the receiver's clock in both directions.
 *
 * What an unauthenticated sender can make it do is bounded: the body is read
 * and hashed only up to `maxBodyBytes` (1 MiB), the header is at most
 * `MAX_SIGNATURE_HEADER_LENGTH` characters with at most `MAX_SIGNATURES`
 * `v1=` values, and each secret costs one HMAC whatever the header holds.
 * Never log the secret or full payloads.
 */

export * from "./events.ts"
export {
  constructEvent,
  constructEventFromHeaders,
  type HeaderSource,
  type ParsedSignatureHeader,
  parseSignatureHeader,
  readRawBody,
  standardKeyBytes,
  type StandardWebhookHeaders,
  verifySignature,
  verifyStandardWebhook
} from "./verify.ts"
import { type Secrets, type VerifyOptions, type WebhookEvent, WebhookVerificationError } from "./events.ts"
import { checkHeadersBeforeBody, constructEventFromHeaders, readRawBody } from "./verify.ts"

// ---------------------------------------------------------------------------
// Deduplication

/**
 * Where a receiver remembers the event ids it has accepted. Deliveries are
 * at least once and may be duplicated or delayed: `add` must be atomic and
 * durable (a unique key in your database, `SETNX` in Redis, a KV put with a
 * precondition...).
 */
export interface DedupStore {
  /** Records `eventId`; resolves `true` when it was not recorded before, `false` for a duplicate. */
  readonly add: (eventId: string, event: WebhookEvent) => Promise<boolean>
  /** Forgets `eventId` (e.g. when saving the event failed after `add`). Optional. */
  readonly remove?: (eventId: string) => Promise<void>
}

/** An in-memory store, for tests and single-process demos only: it forgets on restart. */
export const memoryDedupStore = (maxEntries = 100_000): DedupStore & { readonly size: () => number } => {
  const seen = new Set<string>()
  return {
    size: () => seen.size,
    add: async (eventId) => {
      if (seen.has(eventId)) return false
      seen.add(eventId)
      if (seen.size > maxEntries) seen.delete(seen.values().next().value as string)
      return true
    },
    remove: async (eventId) => {
      seen.delete(eventId)
    }
  }
}

/**
 * Runs `handle` once per event id: a duplicate resolves `{ duplicate: true }`
 * without calling it. When `handle` throws, the id is forgotten (if the
 * store can) so the sender's retry is processed.
 */
export const deduplicate = async <A>(
  store: DedupStore,
  event: WebhookEvent,
  handle: (event: WebhookEvent) => Promise<A>
): Promise<{ readonly duplicate: true } | { readonly duplicate: false; readonly value: A }> => {
  if (!(await store.add(event.id, event))) return { duplicate: true }
  try {
    return { duplicate: false, value: await handle(event) }
  } catch (error) {
    await store.remove?.(event.id)
    throw error
  }
}

// ---------------------------------------------------------------------------
// Fetch-style handler (Deno, Bun, Cloudflare Workers, Node's Request)

export interface HandlerOptions extends VerifyOptions {
  readonly secret: Secrets
  /** Remembers accepted event ids; duplicates are acknowledged without calling `onEvent`. */
  readonly dedup?: DedupStore
  /** Save the event durably and queue the work; answer quickly (the sender waits at most 5 s). */
  readonly onEvent: (event: WebhookEvent) => Promise<void>
}

/**
 * A complete `(Request) => Response` receiver, verifying `X-Svc-Signature`
 * or, without it, the Standard Webhooks headers: 400 for an unverifiable
 * delivery and 413 for a body over `maxBodyBytes` (saying why, never
 * echoing the body), 2xx once `onEvent` saved it, 200 `{"duplicate":true}`
 * for a repeat. A malformed signature header is refused before the body is
 * read.
 */
export const handleRequest = async (request: Request, options: HandlerOptions): Promise<Response> => {
  if (request.method !== "POST") return new Response(null, { status: 405, headers: { allow: "POST" } })
  let event: WebhookEvent
  try {
    checkHeadersBeforeBody(request.headers)
    const raw = await readRawBody(request, options)
    event = await constructEventFromHeaders(raw, request.headers, options.secret, options)
  } catch (error) {
    if (error instanceof WebhookVerificationError) {
      const status = error.reason === "body_too_large" ? 413 : 400
      return Response.json({ error: error.reason, message: error.message }, { status })
    }
    throw error
  }
  if (options.dedup === undefined) {
    await options.onEvent(event)
    return Response.json({ received: true }, { status: 202 })
  }
  const outcome = await deduplicate(options.dedup, event, options.onEvent)
  return Response.json({ received: true, duplicate: outcome.duplicate }, { status: outcome.duplicate ? 200 : 202 })
}
