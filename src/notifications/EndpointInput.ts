/**
 * What a create or PATCH of a notification endpoint says, and the checks
 * of its event selection and custom headers (docs/webhooks.md,
 * "Endpoints", "Custom headers"), each a 400 naming the field at fault.
 */
import { Effect, Redacted } from "effect"
import { headersRefused } from "../api/Errors.ts"
import { DefaultEventTypes, type EndpointOrdering, type EventType, EventTypes, InvalidWebhookEvents } from "../api/Notifications.ts"
import { checkHeaders } from "../outbound/HeaderRules.ts"
import type { SecretStore } from "../secrets/SecretStore.ts"
import { endpointHeaderOwner } from "./send/SendTargets.ts"
import { OWN_HEADERS } from "./Signing.ts"

/** Most entries an events list may have (duplicates collapse; there are eight types). */
const MAX_EVENT_ENTRIES = 20

const invalidEvents = (field: string, detail: string) =>
  Effect.fail(new InvalidWebhookEvents({ field, detail, supported: [...EventTypes] }))

/** `undefined` → the six approval events; empty or unknown → `INVALID_WEBHOOK_EVENTS`; duplicates collapse. */
export const checkEvents = (
  events: ReadonlyArray<string> | undefined
): Effect.Effect<ReadonlyArray<EventType>, InvalidWebhookEvents> => {
  if (events === undefined) return Effect.succeed(DefaultEventTypes)
  if (events.length === 0) return invalidEvents("events", "events must name at least one event type")
  if (events.length > MAX_EVENT_ENTRIES) return invalidEvents("events", `events may list at most ${MAX_EVENT_ENTRIES} entries`)
  const unknown = events.findIndex((event) => !(EventTypes as ReadonlyArray<string>).includes(event))
  if (unknown >= 0) {
    return invalidEvents(`events[${unknown}]`, `unknown event type ${JSON.stringify(events[unknown]!.slice(0, 100))}`)
  }
  return Effect.succeed([...new Set(events)] as ReadonlyArray<EventType>)
}

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
