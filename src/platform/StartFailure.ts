/**
 * Why svc could not start, as the entry points report it: the server as
 * one JSON log line (`reason`, the `setting` at fault when one is, and the
 * `exit_code`), the CLI as one line on stderr; each reason exits with a
 * code of its own (docs/operations.md, "Exit codes"), so a supervisor or a
 * script can tell them apart without reading the text. Never a stack
 * trace, never a setting's value, never a URL's credentials.
 */
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Option from "effect/Option"
import * as SqlError from "effect/sql/SqlError"
import { databaseUnavailable, sqlState } from "./DatabaseUnavailable.ts"
import { maskSettingText } from "./SettingText.ts"

/** A listener could not take its address (in use, not allowed, not on this host). */
export class ListenFailed extends Data.TaggedError("ListenFailed")<{
  readonly setting: string
  readonly address: string
  readonly code: string
}> {
  override get message() {
    const why = this.code === "EADDRINUSE"
      ? "another process listens there"
      : this.code === "EACCES"
      ? "this user may not listen there"
      : this.code === "EADDRNOTAVAIL"
      ? "this host has no such address"
      : HOST_NAME_CODES.has(this.code)
      ? "no address has that host name"
      : this.code
    return `cannot listen on ${this.address} (${this.setting}): ${why}`
  }
}

/** Codes of a host that is not an address of this machine or a name that resolves to none: the host's setting is at fault. */
const HOST_CODES = new Set(["EADDRNOTAVAIL", "EINVAL"])
/** Codes of a host name the resolver does not know. */
const HOST_NAME_CODES = new Set(["ENOTFOUND", "EAI_AGAIN", "EAI_NONAME", "EAI_FAIL"])

/**
 * Maps a listener's failure to take `port` on `host` to `ListenFailed`,
 * naming the setting at fault: the host's (`settings.host`) when the
 * address is not one of this machine's or the name resolves to none, else
 * the port's (in use, not allowed).
 */
export const listenFailed = (
  settings: { readonly port: string; readonly host: string },
  options: { readonly port?: number | undefined; readonly host?: string | undefined }
) =>
(error: { readonly cause?: unknown }): ListenFailed => {
  const code = (error.cause as { code?: unknown } | undefined)?.code
  const host = options.host ?? "0.0.0.0"
  const setting = typeof code === "string" && (HOST_CODES.has(code) || HOST_NAME_CODES.has(code))
    ? settings.host
    : settings.port
  return new ListenFailed({
    setting,
    address: `${host.includes(":") ? `[${host}]` : host}:${options.port ?? 0}`,
    code: typeof code === "string" ? code : rootMessage(error)
  })
}

/**
 * Whether `error` means the database could not be reached or would not
 * let svc in: unavailable (`DatabaseUnavailable.ts`), or a connection the
 * server refused for its credentials (SQLSTATE class 28) or for a
 * database that does not exist (3D000).
 */
export const cannotConnect = (error: SqlError.SqlError): boolean =>
  Option.isSome(databaseUnavailable(Cause.fail(error))) || /^(28|3D000)/.test(sqlState(error) ?? "")

/** A migration the database refused (connection failures are `database` instead). */
export class MigrationFailed extends Data.TaggedError("MigrationFailed")<{ readonly message: string }> {}

/** The reasons, each with its exit code. 1 is anything else, as a lost database session while running is. */
const EXIT_CODES = {
  setting: 2,
  master_key: 3,
  database: 4,
  data_dir_held: 5,
  port: 6,
  schema_too_new: 7,
  migration: 8,
  unexpected: 1
} as const

export type StartFailureReason = keyof typeof EXIT_CODES

export interface StartFailure {
  readonly reason: StartFailureReason
  readonly message: string
  /** The environment variable at fault, when one is. */
  readonly setting?: string
  readonly exitCode: number
}

const tagOf = (value: unknown): string | undefined =>
  typeof value === "object" && value !== null && typeof (value as { _tag?: unknown })._tag === "string"
    ? (value as { _tag: string })._tag
    : undefined

const messageOf = (value: unknown): string =>
  value instanceof Error ||
    (typeof value === "object" && value !== null && typeof (value as { message?: unknown }).message === "string")
    ? (value as { message: string }).message
    : String(value)

/** The innermost `cause` of an error chain: a driver's own words (`connect ECONNREFUSED 127.0.0.1:5432`). */
const rootMessage = (value: unknown): string => {
  let current = value
  for (let depth = 0; depth < 10; depth++) {
    const next = typeof current === "object" && current !== null ? (current as { cause?: unknown }).cause : undefined
    if (next === undefined || next === null) break
    current = next
  }
  return messageOf(current)
}

const SETTING = /^[A-Z][A-Z0-9_]*[A-Z0-9]$/

// Whatever a message quotes (a setting svc could not use, a driver's or a
// library's words about a URL it was given), a URL's user name and
// password never leave in it.
const failure = (reason: StartFailureReason, message: string, setting?: string): StartFailure => ({
  reason,
  message: maskSettingText(message),
  exitCode: EXIT_CODES[reason],
  ...(setting === undefined ? {} : { setting })
})

/**
 * A configuration error's failure, naming its variable: either a message
 * of svc's that begins with the variable's name, or a schema error that
 * names it in its path (`at ["PORT"]`).
 */
const settingError = (error: { readonly message: string }): StartFailure => {
  const text = error.message.startsWith("SchemaError(")
    ? error.message.slice(12, -1)
    : error.message.replace(/^SourceError: /, "")
  const path = /\n\s*at \["([A-Za-z0-9_]+)"\]/.exec(text)
  if (path !== null) return failure("setting", `${path[1]}: ${text.slice(0, path.index).trim()}`, path[1]!)
  const first = /^[A-Za-z0-9_]+/.exec(text)?.[0]
  return failure("setting", text.split("\n")[0]!, first !== undefined && SETTING.test(first) ? first : undefined)
}

/** Why `cause` stopped a start. */
export const startFailure = (cause: Cause.Cause<unknown>): StartFailure => {
  const values = cause.reasons.flatMap((reason) =>
    Cause.isFailReason(reason) ? [reason.error] : Cause.isDieReason(reason) ? [reason.defect] : []
  )
  for (const value of values) {
    switch (tagOf(value) ?? (value instanceof Error ? value.name : undefined)) {
      // Both begin with the variable's name (OTEL_*: `src/observability/OtelEnv.ts`).
      case "ConfigError":
      case "OtelEnvError":
        return settingError(value as { message: string })
      case "MasterKeyError":
        return failure("master_key", messageOf(value), "SVC_MASTER_KEY")
      case "DatabaseUnavailable":
        return (value as { held?: boolean }).held === true
          ? failure("data_dir_held", messageOf(value), "SVC_DATA_DIR")
          : (value as { setting?: string }).setting !== undefined
          ? failure("setting", messageOf(value), (value as { setting: string }).setting)
          : failure("database", messageOf(value))
      case "ListenFailed":
        return failure("port", messageOf(value), (value as ListenFailed).setting)
      case "SchemaTooNew":
        return failure("schema_too_new", messageOf(value))
      case "MigrationFailed":
        return failure("migration", `a migration failed: ${messageOf(value)}`)
    }
    if (SqlError.isSqlError(value) && cannotConnect(value)) {
      return failure(
        "database",
        `the database at DATABASE_URL cannot be reached: ${rootMessage(value)}`,
        "DATABASE_URL"
      )
    }
  }
  const first = values[0]
  return failure("unexpected", first === undefined ? "svc stopped" : messageOf(first))
}
