/**
 * A signing secret's rotation (`POST /v1/notification-endpoints/:id/rotate-secret`):
 * the new secret put in use and the earlier ones ended within the overlap,
 * under the endpoint's row lock.
 */
import type { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { LimitReached, NotFound } from "../api/Errors.ts"
import { databaseNow, iso } from "../platform/Time.ts"
import type { SecretStore } from "../secrets/SecretStore.ts"
import { endpointOwner } from "./send/SendTargets.ts"
import { newSigningSecret } from "./send/Signing.ts"

/** How long the secret signing until now keeps signing beside the new one, unless the call says. */
const DEFAULT_OVERLAP_SECONDS = 24 * 3600

/** Answers the new secret and the end of the overlap. */
export const rotateSigningSecret = Effect.fnUntraced(function*(
  sql: PgClient.PgClient,
  secrets: SecretStore["Service"],
  maxSecrets: number,
  request: {
    readonly orgId: string
    readonly id: string
    readonly overlapSeconds: number | undefined
    readonly expirePrevious: "latest" | "all" | undefined
  }
) {
  const { orgId, id, overlapSeconds, expirePrevious } = request
  const owner = endpointOwner(orgId, id)
  const secret = newSigningSecret()
  const expire = expirePrevious ?? "latest"
  // Puts `secret` in use and ends the earlier ones within the overlap,
  // never later than they were to end; `overlapEnd` is the overlap's
  // end, in the database's time: that is what `list` compares with.
  //
  // `latest` ends only the secret signing until now: an older one still
  // in the overlap of an earlier rotation keeps the end that rotation
  // announced (a receiver may still verify with it alone), so a rotation
  // after which more than `maxSecrets` would sign at once is refused;
  // with overlap 0 the one signing until now ends at once, so it never
  // adds one. `all` ends every earlier one within the overlap, and the
  // oldest beyond `maxSecrets` at once: the caller asked for it (with
  // overlap 0, every earlier secret ends now, at the cap too).
  //
  // The endpoint's row is locked first: concurrent rotations of one
  // endpoint (on a PostgreSQL server, from any process) take turns, and
  // each counts the secrets the one before it left.
  const overlapEnd = yield* sql.withTransaction(Effect.gen(function*() {
    const locked = yield* sql`SELECT id FROM notification_endpoints WHERE id = ${id} AND org_id = ${orgId} FOR UPDATE`
    if (locked.length === 0) return yield* new NotFound({ detail: "No such notification endpoint." })
    const now = new Date(yield* databaseNow(sql))
    const overlap = overlapSeconds ?? DEFAULT_OVERLAP_SECONDS
    const until = new Date(now.getTime() + overlap * 1000)
    // Those in use, newest first.
    const current = yield* secrets.list(owner)
    const signingAfter = 1 + current.length - (overlap === 0 && current.length > 0 ? 1 : 0)
    if (expire === "latest" && signingAfter > maxSecrets) {
      const oldest = current.at(-1)!
      return yield* new LimitReached({
        limit: "SVC_WEBHOOK_MAX_SIGNING_SECRETS",
        limit_value: maxSecrets,
        detail:
          `${current.length} secrets sign this endpoint's deliveries until the oldest ends at ${
            iso(oldest.expires_at ?? now)
          }; rotate after that, with overlap_seconds: 0 (the secret signing until now ends at once), ` +
          `or pass expire_previous: "all" to end the earlier secrets within this overlap.`
      })
    }
    for (const [index, old] of current.entries()) {
      if (expire === "all" && index >= maxSecrets - 1) yield* secrets.expire(owner, old.id, now)
      // Shorten, never lengthen, the life of a secret already expiring.
      else if ((index === 0 || expire === "all") && (old.expires_at === null || new Date(old.expires_at) > until)) {
        yield* secrets.expire(owner, old.id, until)
      }
    }
    yield* secrets.put(owner, "signing", Redacted.make(secret))
    return until
  })).pipe(Effect.catchTag("SqlError", Effect.die))
  return { secret, overlapEnd }
})
