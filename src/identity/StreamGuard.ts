/**
 * Limits of open event streams. A stream is admitted
 * only within the caps of its API key or console session, its organization
 * and the whole process (429 `TOO_MANY_STREAMS` naming the setting), and
 * its credential is re-checked in the database every
 * `SVC_STREAM_AUTH_RECHECK` while it is open: once the key or session is
 * revoked (or the session has expired), the stream ends.
 *
 * The counts are this process's: each process protects its own memory,
 * file descriptors and database pool, and several processes serve together
 * at most their sum.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, type Scope, Stream } from "effect"
import { TooManyStreams } from "../api/Errors.ts"
import type { Principal } from "../api/Security.ts"
import { ConsoleSessions } from "../console/ConsoleSessions.ts"
import { SvcConfig } from "../platform/Config.ts"

export class StreamGuard extends Context.Service<StreamGuard, {
  /**
   * Admits a stream of `principal`, or fails with `TOO_MANY_STREAMS`. The
   * returned stream counts until it ends and ends when the credential is
   * revoked.
   */
  readonly guard: <A>(principal: Principal, stream: Stream.Stream<A>) => Effect.Effect<Stream.Stream<A>, TooManyStreams>
  /**
   * Counts a stream of `principal` from now until the scope closes, or
   * fails with `TOO_MANY_STREAMS`: in a handler, the request's scope, which
   * closes once the response is written, so work done before the body
   * starts (an export's measuring pass) counts too. Pair it with `watch`.
   */
  readonly admit: (principal: Principal) => Effect.Effect<void, TooManyStreams, Scope.Scope>
  /** `stream`, ended when `principal`'s credential is revoked (counted by `admit`, not here). */
  readonly watch: <A>(principal: Principal, stream: Stream.Stream<A>) => Stream.Stream<A>
  /** Open streams of this process, in all. */
  readonly open: Effect.Effect<number>
}>()("svc/identity/StreamGuard") {
  static readonly layer = Layer.effect(
    StreamGuard,
    Effect.gen(function*() {
      const config = yield* SvcConfig
      const sql = yield* PgClient.PgClient
      const sessions = yield* ConsoleSessions
      const perKey = new Map<string, number>()
      const perOrg = new Map<string, number>()
      let total = 0

      const bump = (map: Map<string, number>, key: string, by: number) => {
        const next = (map.get(key) ?? 0) + by
        if (next <= 0) map.delete(key)
        else map.set(key, next)
      }

      /** The first cap `principal` has reached, if any. */
      const overCap = (principal: Principal): TooManyStreams | undefined => {
        const refuse = (limit: string, value: number, what: string) =>
          new TooManyStreams({
            limit,
            limit_value: value,
            detail: `${what} has ${value} open event streams, the most allowed (${limit}); close one first.`
          })
        const who = principal.consoleSessionId === undefined ? "This API key" : "This console session"
        if ((perKey.get(principal.keyId) ?? 0) >= config.maxStreamsPerKey) {
          return refuse("SVC_MAX_STREAMS_PER_KEY", config.maxStreamsPerKey, who)
        }
        if ((perOrg.get(principal.orgId) ?? 0) >= config.maxStreamsPerOrg) {
          return refuse("SVC_MAX_STREAMS_PER_ORG", config.maxStreamsPerOrg, "The organization")
        }
        if (total >= config.maxStreams) return refuse("SVC_MAX_STREAMS", config.maxStreams, "The server")
        return undefined
      }

      /**
       * Counts the stream for the life of the scope (the stream's own, so
       * the count can never outlive it); the refusal, counting nothing, when
       * a cap was reached meanwhile (streams opened at the same instant).
       */
      const hold = (principal: Principal) =>
        Effect.acquireRelease(
          Effect.sync(() => {
            const refused = overCap(principal)
            if (refused !== undefined) return refused
            bump(perKey, principal.keyId, 1)
            bump(perOrg, principal.orgId, 1)
            total++
            return undefined
          }),
          (refused) =>
            Effect.sync(() => {
              if (refused !== undefined) return
              bump(perKey, principal.keyId, -1)
              bump(perOrg, principal.orgId, -1)
              total--
            })
        )

      const admit = (principal: Principal) =>
        Effect.flatMap(hold(principal), (refused) => refused === undefined ? Effect.void : Effect.fail(refused))

      /** Whether the credential still holds (a database error counts as yes: the next check decides). */
      const stillValid = (principal: Principal): Effect.Effect<boolean> =>
        (principal.consoleSessionId !== undefined
          ? sessions.isLive(principal.consoleSessionId)
          : sql`SELECT 1 FROM api_keys WHERE id = ${principal.keyId} AND revoked_at IS NULL`.pipe(
            Effect.map((rows) => rows.length > 0),
            Effect.orDie
          )).pipe(Effect.catchDefect(() => Effect.succeed(true)))

      /** Completes once the credential is no longer valid. */
      const revoked = (principal: Principal) =>
        Effect.sleep(config.streamAuthRecheckMs).pipe(
          Effect.andThen(stillValid(principal)),
          Effect.repeat({ while: (valid) => valid }),
          Effect.asVoid
        )

      const guard = <A>(principal: Principal, stream: Stream.Stream<A>) =>
        Effect.suspend(() => {
          // Checked here to answer 429 before the response starts; counted
          // inside the stream, whose scope releases it however it ends.
          const refused = overCap(principal)
          if (refused !== undefined) return Effect.fail(refused)
          return Effect.succeed(
            Stream.unwrap(Effect.map(hold(principal), (refused) => refused === undefined ? stream : Stream.empty)).pipe(
              Stream.interruptWhen(revoked(principal))
            )
          )
        })

      const watch = <A>(principal: Principal, stream: Stream.Stream<A>) =>
        Stream.interruptWhen(stream, revoked(principal))

      return StreamGuard.of({ guard, admit, watch, open: Effect.sync(() => total) })
    })
  )
}
