/**
 * The admin channel: how the CLI works while a server holds the embedded
 * data directory. The server listens on a Unix socket inside the data
 * directory (`admin.sock`, mode 0600, in a directory that is 0700), so only
 * the user who owns the data can open it; it speaks HTTP/1.1 and answers
 * one request, `POST /v1/cli` with `{"argv": [...]}`, by running that CLI
 * command with the same handlers (`src/cli/Commands.ts`) against its own
 * database, and replying `{"code", "stdout", "stderr"}`.
 *
 * It never touches the database session itself: a command runs through the
 * same client as every request, one statement or transaction at a time.
 * Whatever a client sends, the channel stays bounded: at most
 * `SVC_ADMIN_MAX_CONNECTIONS` connections (more are closed at once), 8 KiB
 * of headers, `SVC_ADMIN_MAX_BODY` bytes of body, 5 s to send the headers,
 * 30 s for a whole request and 5 s idle between requests; anything that is
 * not such a request is answered 4xx or closed.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Cause, Console, Context, Effect, Exit, Layer, Option } from "effect"
import { Command } from "effect/cli"
import { HttpServer } from "effect/http"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { inspect } from "node:util"
import { VERSION } from "../api/Version.ts"
import { ConsoleSessions } from "../console/ConsoleSessions.ts"
import { DatabaseInfo } from "../database/Database.ts"
import { Identity } from "../identity/Identity.ts"
import { SvcConfig } from "../platform/Config.ts"
import { adminSocketPath, type CliAnswer } from "./Admin.ts"
import { commands } from "./Commands.ts"

// sun_path holds 108 bytes on Linux, 104 on macOS and the BSDs, the NUL included.
const MAX_SOCKET_PATH = process.platform === "linux" ? 107 : 103

/** Flags that would read the server's terminal: refused on the channel. */
const INTERACTIVE = new Set(["--wizard", "--completions"])

/** Runs one CLI command, its output captured instead of printed. */
export const runCommand = (argv: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const stdout: Array<string> = []
    const stderr: Array<string> = []
    if (argv.some((arg) => INTERACTIVE.has(arg.split("=")[0]!))) {
      return { code: 2, stdout: "", stderr: "interactive flags (--wizard, --completions) run only without a server\n" }
    }
    const format = (args: ReadonlyArray<unknown>) =>
      args.map((a) => typeof a === "string" ? a : inspect(a)).join(" ") + "\n"
    const capture = {
      ...globalThis.console,
      log: (...args: ReadonlyArray<unknown>) => void stdout.push(format(args)),
      info: (...args: ReadonlyArray<unknown>) => void stdout.push(format(args)),
      error: (...args: ReadonlyArray<unknown>) => void stderr.push(format(args)),
      warn: (...args: ReadonlyArray<unknown>) => void stderr.push(format(args)),
      debug: (...args: ReadonlyArray<unknown>) => void stderr.push(format(args))
    } as Console.Console
    const exit = yield* Command.runWith(commands, { version: VERSION, renderErrors: true })(argv).pipe(
      Effect.provideService(Console.Console, capture),
      Effect.exit
    )
    if (Exit.isFailure(exit) && stderr.length === 0) stderr.push(Cause.pretty(exit.cause) + "\n")
    return { code: Exit.isSuccess(exit) ? 0 : 1, stdout: stdout.join(""), stderr: stderr.join("") } satisfies CliAnswer
  })

export interface AdminLimits {
  readonly maxConnections: number
  readonly maxBodyBytes: number
  readonly headersTimeoutMs: number
  readonly requestTimeoutMs: number
  readonly keepAliveTimeoutMs: number
}

const json = (response: http.ServerResponse, status: number, body: unknown) => {
  const text = JSON.stringify(body)
  response.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  response.end(text)
}

const problem = (response: http.ServerResponse, status: number, code: string, detail: string) =>
  json(response, status, { code, detail })

/**
 * Serves `run` on the Unix socket `socket` for the current scope, within
 * `limits`. The socket file is replaced (only the data directory's lock
 * holder calls this) and removed when the scope closes.
 */
export const serveAdmin = (
  socket: string,
  limits: AdminLimits,
  run: (argv: ReadonlyArray<string>) => Promise<CliAnswer>
) =>
  Effect.acquireRelease(
    Effect.callback<http.Server, Error>((resume) => {
      const server = http.createServer({
        maxHeaderSize: 8 * 1024,
        headersTimeout: limits.headersTimeoutMs,
        requestTimeout: limits.requestTimeoutMs,
        keepAliveTimeout: limits.keepAliveTimeoutMs,
        // How often the timeouts above are checked (Node's default is 30 s).
        connectionsCheckingInterval: Math.min(1_000, limits.headersTimeoutMs)
      }, (request, response) => {
        if (request.method !== "POST" || request.url !== "/v1/cli") {
          request.resume()
          return problem(response, 404, "NOT_FOUND", "the admin channel answers POST /v1/cli only")
        }
        const tooLarge = () => {
          response.setHeader("connection", "close")
          problem(
            response,
            413,
            "BODY_TOO_LARGE",
            `the body may be at most SVC_ADMIN_MAX_BODY (${limits.maxBodyBytes}) bytes`
          )
          request.destroy()
        }
        const declared = Number(request.headers["content-length"] ?? Number.NaN)
        if (declared > limits.maxBodyBytes) return tooLarge()
        const chunks: Array<Buffer> = []
        let size = 0
        let refused = false
        request.on("data", (chunk: Buffer) => {
          if (refused) return
          size += chunk.length
          if (size > limits.maxBodyBytes) {
            refused = true
            return tooLarge()
          }
          chunks.push(chunk)
        })
        request.on("error", () => undefined)
        request.on("end", () => {
          if (refused) return
          let argv: unknown
          try {
            argv = (JSON.parse(Buffer.concat(chunks, size).toString("utf8")) as { argv?: unknown }).argv
          } catch {
            return problem(response, 400, "INVALID_JSON", "the body must be JSON: {\"argv\": [\"orgs\", \"list\"]}")
          }
          if (!Array.isArray(argv) || argv.length > 256 || !argv.every((arg) => typeof arg === "string")) {
            return problem(response, 400, "INVALID_ARGV", "argv must be an array of at most 256 strings")
          }
          run(argv as Array<string>).then(
            (answer) => json(response, 200, answer),
            (error) => problem(response, 500, "FAILED", String(error))
          )
        })
      })
      server.maxConnections = limits.maxConnections
      server.on("clientError", (_error, connection) => {
        // Malformed requests, oversized headers, timeouts: answered if the
        // connection can still take it, closed either way.
        if (connection.writable) {
          connection.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n")
        }
        connection.destroy()
      })
      fs.rmSync(socket, { force: true })
      server.once("error", (error) => resume(Effect.fail(error)))
      server.listen(socket, () => {
        fs.chmodSync(socket, 0o600)
        resume(Effect.succeed(server))
      })
    }),
    (server) =>
      Effect.callback<void>((resume) => {
        server.close(() => resume(Effect.void))
        server.closeAllConnections()
        fs.rmSync(socket, { force: true })
      })
  )

/** The CLI's services, as the server has them. */
type CliServices = Layer.Success<typeof CliServicesLive>
const CliServicesLive = Layer.mergeAll(Identity.layer, ConsoleSessions.layer, NodeServices.layer)

/** The admin channel of an embedded server (nothing on a PostgreSQL server: the CLI opens the server itself). */
export const AdminChannelLive = Layer.effectDiscard(Effect.gen(function*() {
  const info = yield* DatabaseInfo
  if (info.kind !== "embedded") return
  const config = yield* SvcConfig
  // Links the commands print (console sign-in) name the port the server
  // actually listens on, which differs from PORT when PORT is 0.
  const server = yield* Effect.serviceOption(HttpServer.HttpServer)
  const port = Option.flatMap(
    server,
    (s) => s.address._tag === "UnixPathAddress" ? Option.none() : Option.some(s.address.port)
  )
  const context: Context.Context<CliServices | SvcConfig | DatabaseInfo> = Context.add(
    yield* Effect.context<CliServices | SvcConfig | DatabaseInfo>(),
    SvcConfig,
    Option.match(port, { onNone: () => config, onSome: (bound) => ({ ...config, port: bound }) })
  )
  const socket = adminSocketPath(config.dataDir)
  if (Buffer.byteLength(socket) > MAX_SOCKET_PATH) {
    return yield* Effect.fail(
      new Error(
        `SVC_DATA_DIR ${
          path.dirname(socket)
        } is too long for the admin socket (${socket} must be at most ${MAX_SOCKET_PATH} bytes); choose a shorter path`
      )
    )
  }
  yield* serveAdmin(
    socket,
    {
      maxConnections: config.adminMaxConnections,
      maxBodyBytes: config.adminMaxBody,
      headersTimeoutMs: 5_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 5_000
    },
    (argv) =>
      Effect.runPromiseWith(context)(
        runCommand(argv) as Effect.Effect<CliAnswer, never, CliServices | SvcConfig | DatabaseInfo>
      )
  )
  yield* Effect.logInfo("admin channel listening").pipe(Effect.annotateLogs({ socket }))
})).pipe(Layer.provide(CliServicesLive))
