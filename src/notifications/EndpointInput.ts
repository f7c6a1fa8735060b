/**
 * What a create or PATCH of a notification endpoint says, its event
 * selection as stored, and the checks of its custom headers against the
 * headers svc sets (docs/webhooks.md, "Endpoints", "Custom headers"), a 400
 * naming the field at fault. The event types and their count are the
 * schema's rule (`EventSelection` in src/api/Notifications.ts).
 */
import { Effect, Redacted } from "effect"
import { headersRefused } from "../api/Errors.ts"
import { DefaultEventTypes, type EndpointOrdering, type EventType } from "../api/Notifications.ts"
import { checkHeaders } from "../outbound/HeaderRules.ts"
import type { SecretStore } from "../secrets/SecretStore.ts"
import { endpointHeaderOwner } from "./send/SendTargets.ts"
import { OWN_HEADERS } from "./Signing.ts"

/** The selection to store: the six approval events when none is given; duplicates collapse (the schema has refused any other type). */
export const eventSelection = (events: ReadonlyArray<string> | undefined): ReadonlyArray<EventType> =>
  events === undefined ? DefaultEventTypes : [...new Set(events)] as ReadonlyArray<EventType>

export interface EndpointInput {
  readonly url: string
  readonly events?: ReadonlyArray<string> | undefined
  readonly action_classes?: ReadonlyArray<string> | null | undefined
  readonly ordering?: EndpointOrdering | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly rate_limit?: number | null | undefined
}

export interface EndpointChange {
  readonly events?: ReadonlyArray<string> | undefined
  /** `undefined`: unchanged; null: every action class. */
  readonly action_classes?: ReadonlyArray<string> | null | undefined
  /** `undefined`: unchanged. */
  readonly ordering?: EndpointOrdering | undefined
  /** `undefined`: unchanged; otherwise the whole new set (`{}`: none). */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** `undefined`: unchanged; null: unlimited. */
  readonly rate_limit?: number | null | undefined
}

/** The custom headers as given, or `INVALID_HEADERS` naming each refused one (never its value). */
export const checkCustomHeaders = (headers: Readonly<Record<string, string>> | undefined) => {
  if (headers === undefined) return Effect.succeed(undefined)
  const verdict = checkHeaders(headers, OWN_HEADERS)
  return verdict._tag === "Refused" ? Effect.fail(headersRefused(verdict)) : Effect.succeed(verdict.headers)
}

/** Replaces the endpoint's custom header values (sealed, one secret each); in the caller's transaction. */
export const writeHeaders = (
  secrets: SecretStore["Service"],
  orgId: string,
  id: string,
  headers: ReadonlyArray<readonly [string, string]>
) =>
  Effect.gen(function*() {
    const owner = endpointHeaderOwner(orgId, id)
    yield* secrets.removeOwner(owner)
    for (const [name, value] of headers) yield* secrets.put(owner, name, Redacted.make(value))
  })

export const headerNames = (headers: ReadonlyArray<readonly [string, string]> | undefined) => JSON.stringify((headers ?? []).map(([name]) => name))
