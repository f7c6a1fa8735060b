/** Handlers of the API keys group: list, create (the key shown once) and revoke, under `keys.manage`. */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import type { ApiKey } from "../api/Console.ts"
import { InsufficientScope, LimitReached, NotFound } from "../api/Errors.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { SvcConfig } from "../platform/Config.ts"
import { Identity, type KeyInfo } from "./Identity.ts"

const toApiKey = (key: KeyInfo): ApiKey => ({
  id: key.id,
  name: key.name,
  key_prefix: key.key_prefix,
  scopes: key.scopes,
  created_at: key.created_at,
  revoked_at: key.revoked_at,
  created_by: key.created_by
})

export const ApiKeysHandlers = HttpApiBuilder.group(
  Api,
  "apiKeys",
  Effect.fn(function*(handlers) {
    const identity = yield* Identity
    const config = yield* SvcConfig
    const keysOf = (orgId: string) => identity.listKeys(orgId).pipe(Effect.orDie)
    return handlers.handleAll({
      list: () =>
        CurrentPrincipal.use((p) =>
          Effect.map(keysOf(p.orgId), (keys) => ({
            keys: keys.filter((key) => key.revoked_at === null).reverse().map(toApiKey)
          }))
        ),
      create: ({ payload }) =>
        CurrentPrincipal.use((p) =>
          Effect.gen(function*() {
            // No escalation: a caller grants only scopes it holds itself.
            const missing = payload.scopes.find((scope) => !p.scopes.has(scope))
            if (missing !== undefined) {
              return yield* new InsufficientScope({
                required_scope: missing,
                detail: `You cannot grant the \`${missing}\` scope: you do not hold it yourself.`
              })
            }
            // Counted under the organization's row lock, in the inserting
            // transaction: concurrent creates cannot pass the cap.
            const limit = config.maxApiKeysPerOrg
            const created = yield* identity.createKey({
              orgId: p.orgId,
              scopes: payload.scopes,
              name: payload.name,
              maxActive: limit,
              createdBy: p.actor
            }).pipe(
              Effect.catchTags({
                KeyCapReached: () =>
                  Effect.fail(
                    new LimitReached({
                      limit: "SVC_MAX_API_KEYS_PER_ORG",
                      limit_value: limit,
                      detail:
                        `The organization already has ${limit} API keys, the most allowed (SVC_MAX_API_KEYS_PER_ORG); revoke one first.`
                    })
                  ),
                OrgNotFound: Effect.die
              })
            )
            return {
              api_key: {
                id: created.id,
                name: created.name,
                key_prefix: created.key.slice(0, 12),
                scopes: created.scopes,
                created_at: created.created_at,
                revoked_at: null,
                created_by: p.actor
              },
              key: created.key
            }
          })
        ),
      revoke: ({ params }) =>
        CurrentPrincipal.use((p) =>
          Effect.gen(function*() {
            const owned = (yield* keysOf(p.orgId)).some((key) => key.id === params.key_id)
            if (!owned) return yield* new NotFound({ detail: "No such API key." })
            return toApiKey(yield* identity.revokeKey(params.key_id).pipe(Effect.orDie))
          })
        )
    })
  })
)
