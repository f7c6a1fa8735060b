/**
 * The services a request fiber starts with: the application's, without
 * svc's own domain services and database clients.
 *
 * Speeds up: HttpApiBuilder provides each handler group's services to
 * every request of the group (`Effect.provideContext`), and `Context.merge`
 * copies the request's context twice to do it (flattened, then copied
 * again before the group's services are added). The domain services are
 * in the group's services already (handlers are built over the whole
 * application), so they need not be in the request's context as well: a
 * request context of 14 services instead of 49 is a shorter copy, twice
 * per request. Measured with `AB_ALLOC=1 sh bench/ab-request-path.sh`
 * (bench/notes/request-path.md, "Fourth round").
 *
 * Kept: Effect's services (the server, the platform, the tracer, loggers,
 * the router) and svc's `Context.Reference`s, which read as their default
 * where they are missing instead of failing: a request that reads one
 * outside a handler must see the value the application set.
 * `test/unit/server/request-context.test.ts` checks that every reference
 * in `src/` is listed here.
 */
import { Context } from "effect"

/** svc's references (`Context.Reference`): kept, whatever their prefix. */
export const KEPT_REFERENCES: ReadonlySet<string> = new Set([
  "svc/platform/RequestFacts",
  "svc/observability/Metrics",
  "svc/observability/OperatorSpans",
  "svc/outbound/Resolver",
  "svc/platform/EmbeddedSession/StatementAllowance",
  // The typed client's (`src/client.ts`); a request never holds it, listed so the rule has no exception.
  "svc/client/IdempotencyKey"
])

const DATABASE_CLIENTS: ReadonlySet<string> = new Set(["@effect/sql-pg/PgClient", "effect/sql/SqlClient"])

/** Whether a request fiber starts with the service of `key`. */
export const keptForRequests = (key: string): boolean =>
  key.startsWith("svc/") ? KEPT_REFERENCES.has(key) : !DATABASE_CLIENTS.has(key)

/** `context` without the services requests do not start with (once, when the server starts). */
export const requestContext = <R>(context: Context.Context<R>): Context.Context<R> => {
  const kept = new Map<string, unknown>()
  context.mapUnsafe.forEach((service, key) => {
    if (keptForRequests(key)) kept.set(key, service)
  })
  return Context.makeUnsafe(kept)
}
