/**
 * `svc/testing` (also installed as `@svc/testing`): start the whole service in-process for `@effect/vitest`
 * tests, on an in-memory PGlite database (or, when `TEST_DATABASE_URL` is
 * set, on a fresh database of that PostgreSQL server, dropped afterwards),
 * listening on an ephemeral loopback port.
 *
 * ```ts
 * import { layer } from "@effect/vitest"
 * import { SvcTest } from "@svc/testing"
 *
 * layer(SvcTest.layer(), { excludeTestServices: true })("my integration", (it) => {
 *   it.effect("creates a task", () =>
 *     Effect.gen(function*() {
 *       const org = yield* SvcTest.org({ scopes: ["tasks.write"] })
 *       const task = yield* org.client.tasks.create({ payload: { name: "t", answer_schema: { type: "object" } } })
 *     }))
 * })
 * ```
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Layer, Logger, Redacted, References } from "effect"
import { FetchHttpClient, HttpServer } from "effect/http"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import { createServer } from "node:http"
import type { ScopeName } from "./api/Security.ts"
import { Scopes } from "./api/Security.ts"
import { make as makeClient, type SvcApiClient } from "./client.ts"
import { Database, DatabaseInfo, defaultServerSessionSettings } from "./database/Database.ts"
import { Migrations } from "./database/Migrations.ts"
import { Identity } from "./identity/Identity.ts"
import { SvcConfig, type SvcConfigShape } from "./platform/Config.ts"
import { SecretBox } from "./platform/Crypto.ts"
import { makeJsonLogger } from "./platform/Logging.ts"
import { AppLive } from "./server/App.ts"
import { ListenLater } from "./server/Listener.ts"

export { type ScopeName, Scopes } from "./api/Security.ts"
export type { SvcApiClient } from "./client.ts"

/** A provisioned API key and a typed client that sends it. */
export interface TestKey {
  readonly keyId: string
  readonly key: string
  readonly scopes: ReadonlyArray<ScopeName>
  readonly client: SvcApiClient
  /** Revokes the key as the CLI does (`keys revoke`): refused at once by this service. */
  readonly revoke: Effect.Effect<void>
}

/** A provisioned organization with one key (`client`) and a way to make more. */
export interface TestOrg extends TestKey {
  readonly orgId: string
  readonly newKey: (scopes: ReadonlyArray<ScopeName>) => Effect.Effect<TestKey>
}

export interface SvcTestOptions {
  /** Configuration overrides (e.g. `allowedTargetCidrs`). */
  readonly config?: Partial<SvcConfigShape> | undefined
  /** `memory` (default unless `TEST_DATABASE_URL` is set) or `server`. */
  readonly database?: "memory" | "server" | undefined
}

export class SvcTest extends Context.Service<SvcTest, {
  /** `http://127.0.0.1:<port>` of the running service. */
  readonly baseUrl: string
  readonly database: "memory" | "server" | "embedded"
  /** A typed client with `apiKey` (or none). */
  readonly client: (apiKey?: string) => Effect.Effect<SvcApiClient>
  /** A new organization with a key holding `scopes` (default: all). */
  readonly provisionOrg: (options?: {
    readonly name?: string
    readonly scopes?: ReadonlyArray<ScopeName>
  }) => Effect.Effect<TestOrg>
  /** Every log line the service wrote so far (JSON strings). */
  readonly logLines: () => ReadonlyArray<string>
  /** Direct SQL on the service's database, for assertions on stored data. */
  readonly sql: SqlClient.SqlClient
}>()("svc/testing/SvcTest") {
  /** Shortcut: `SvcTest.provisionOrg(options)` of the current `SvcTest`. */
  static readonly org = (options?: { readonly name?: string; readonly scopes?: ReadonlyArray<ScopeName> }) =>
    SvcTest.use((svc) => svc.provisionOrg(options))

  /**
   * Writes a migrated, empty in-memory database to `path`: with
   * `TEST_DATABASE_SNAPSHOT` naming that file, every `SvcTest.layer` on
   * PGlite starts as a copy of it (about a second instead of several for
   * `initdb` and the migrations). Write it once per test run (a global
   * setup), so it always has this build's migrations.
   */
  static readonly writeSnapshot = (path: string): Effect.Effect<void, unknown> =>
    Effect.gen(function*() {
      const info = yield* DatabaseInfo
      yield* info.embedded!.request({ op: "snapshot", path, forCopies: true })
    }).pipe(
      Effect.provide(Migrations.layer.pipe(Layer.provideMerge(Layer.fresh(Database.memory)))),
      Effect.scoped
    )

  /**
   * Creates the migrated database `name` on the PostgreSQL server of
   * `adminUrl` and closes every connection to it: with
   * `TEST_DATABASE_TEMPLATE` naming it, every `SvcTest.layer` on that
   * server starts as a copy of it instead of running the migrations. Drop
   * it (`WITH (FORCE)`) when the run ends.
   */
  static readonly makeTemplate = (adminUrl: string, name: string): Effect.Effect<void, unknown> =>
    Effect.gen(function*() {
      const admin = yield* PgClient.makeClient({ url: Redacted.make(adminUrl) })
      yield* admin.unsafe(`CREATE DATABASE ${name}`)
      const url = new URL(adminUrl)
      url.pathname = `/${name}`
      yield* Layer.build(Migrations.layer.pipe(Layer.provideMerge(Database.server(Redacted.make(url.toString()), 1))))
        .pipe(Effect.scoped)
    }).pipe(Effect.provide(Reactivity.layer), Effect.scoped)

  /** The whole service, in-process, with its typed client. */
  static readonly layer = (
    options: SvcTestOptions = {}
  ): Layer.Layer<SvcTest | SqlClient.SqlClient | PgClient.PgClient | DatabaseInfo | SvcConfig | SecretBox, unknown> => {
    const serverUrl = process.env.TEST_DATABASE_URL
    const wantServer = options.database === "server" ||
      (options.database === undefined && serverUrl !== undefined && serverUrl !== "")
    // A statement timeout in the configuration bounds the test database's statements too.
    const statementTimeout = options.config?.dbStatementTimeout
    // `TEST_DATABASE_SNAPSHOT`: a migrated database's snapshot
    // (`SvcTest.writeSnapshot`) each in-memory database starts as a copy of;
    // `TEST_DATABASE_TEMPLATE`: a migrated database on the server each
    // scratch database is a copy of (`SvcTest.makeTemplate`).
    const snapshot = process.env.TEST_DATABASE_SNAPSHOT
    const memorySettings = statementTimeout === undefined
      ? undefined
      : { statementTimeout, transactionTimeout: Duration.seconds(60) }
    const DatabaseLive = wantServer
      ? Database.scratch(Redacted.make(serverUrl ?? "postgres://postgres@127.0.0.1:5432/test"), {
        settings: statementTimeout === undefined ? undefined : { ...defaultServerSessionSettings, statementTimeout },
        template: process.env.TEST_DATABASE_TEMPLATE
      })
      : snapshot !== undefined && snapshot !== ""
      ? Database.memoryFrom(snapshot, memorySettings)
      : memorySettings === undefined
      ? Database.memory
      : Database.memoryWith(memorySettings)
    const lines: Array<string> = []
    const LoggerLive = Logger.layer([makeJsonLogger((line) => lines.push(line))])

    const Harness = Layer.effect(
      SvcTest,
      Effect.gen(function*() {
        const server = yield* HttpServer.HttpServer
        const identity = yield* Identity
        const sql = yield* SqlClient.SqlClient
        const info = yield* DatabaseInfo
        const address = server.address
        const baseUrl = address._tag === "UnixPathAddress"
          ? address.path
          : `http://127.0.0.1:${address.port}`
        const client = (apiKey?: string) => makeClient({ baseUrl, apiKey }).pipe(Effect.provide(FetchHttpClient.layer))
        const newKey = (orgId: string) => (scopes: ReadonlyArray<ScopeName>) =>
          Effect.gen(function*() {
            const created = yield* identity.createKey({ orgId, scopes }).pipe(Effect.orDie)
            return {
              keyId: created.id,
              key: created.key,
              scopes,
              client: yield* client(created.key),
              revoke: Effect.asVoid(Effect.orDie(identity.revokeKey(created.id)))
            }
          })
        const provisionOrg = (opts?: { readonly name?: string; readonly scopes?: ReadonlyArray<ScopeName> }) =>
          Effect.gen(function*() {
            const org = yield* Effect.orDie(identity.createOrg(opts?.name ?? "test-org"))
            const key = yield* newKey(org.id)(opts?.scopes ?? Scopes)
            return { orgId: org.id, ...key, newKey: newKey(org.id) }
          })
        return SvcTest.of({
          baseUrl,
          database: info.kind,
          client,
          provisionOrg,
          logLines: () => lines,
          sql
        })
      })
    )

    // No warm-up unless asked (`warmStart`): a test's first request may wait for the workers.
    const ConfigLive = SvcConfig.layerWith({ warmStart: false, ...options.config })
    return Harness.pipe(
      Layer.provideMerge(Identity.layer),
      Layer.provideMerge(AppLive),
      Layer.provide(ListenLater.layer(() => createServer(), { port: 0, host: "127.0.0.1" })),
      Layer.provideMerge(DatabaseLive),
      Layer.provideMerge(SecretBox.layerEphemeral),
      Layer.provideMerge(ConfigLive),
      Layer.provide(LoggerLive),
      Layer.provide(Layer.succeed(References.MinimumLogLevel, "Info"))
    )
  }
}
