/**
 * The web console's files, served on the API port at `/console/`: the
 * bundle `scripts/build-console.ts` writes into `console/dist/` (built by
 * `npm install` and again by `npm start` when stale). Every console route
 * answers the same page (the console routes in the browser); assets carry
 * a content hash in their name and are cached for good. The console is a
 * client of `/v1` like any other: nothing here authenticates or reads data.
 */
import { Effect, Layer, Option } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const consoleDist = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../console/dist")

/**
 * Nothing from elsewhere, nothing inline, never framed. `form-action` and
 * `base-uri` are not covered by `default-src`, so they are named too.
 */
export const CONSOLE_CSP =
  "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"

const securityHeaders = {
  "content-security-policy": CONSOLE_CSP,
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin"
}

const contentTypes: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".map": "application/json"
}

/** One file name of `console/dist/assets` (never a dot file, so never `..`). */
const ASSET = /^\/console\/assets\/([A-Za-z0-9_-][A-Za-z0-9._-]*)$/

const readFile = (file: string) => Effect.tryPromise(() => fs.readFile(file)).pipe(Effect.option)

const notBuilt = HttpServerResponse.text(
  "The console is not built: run `npm install` (or `node scripts/build-console.ts`), then reload.\n",
  { status: 503, headers: { ...securityHeaders, "cache-control": "no-store", "retry-after": "5" } }
)

const toConsole: HttpServerResponse.HttpServerResponse = HttpServerResponse.empty({
  status: 302,
  headers: { location: "/console/", "cache-control": "no-store" }
})

const page = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const pathname = request.url.split("?")[0]!.split("#")[0]!
  if (pathname === "/console") return toConsole
  if (pathname.startsWith("/console/assets/")) {
    const asset = ASSET.exec(pathname)
    const body = asset === null ? Option.none() : yield* readFile(path.join(consoleDist, "assets", asset[1]!))
    if (asset === null || body._tag === "None") {
      return HttpServerResponse.text("Not found\n", {
        status: 404,
        headers: { ...securityHeaders, "cache-control": "no-store" }
      })
    }
    return HttpServerResponse.uint8Array(body.value, {
      contentType: contentTypes[path.extname(asset[1]!)] ?? "application/octet-stream",
      headers: { ...securityHeaders, "cache-control": "public, max-age=31536000, immutable" }
    })
  }
  const index = yield* readFile(path.join(consoleDist, "index.html"))
  if (index._tag === "None") return notBuilt
  return HttpServerResponse.uint8Array(index.value, {
    contentType: "text/html; charset=utf-8",
    headers: { ...securityHeaders, "cache-control": "no-cache" }
  })
})

/** `GET /` and `GET /console` redirect to `/console/`; every other `GET /console/...` answers the console. */
export const ConsoleRoutes = Layer.effectDiscard(Effect.gen(function*() {
  const router = yield* HttpRouter.HttpRouter
  yield* router.add("GET", "/", Effect.succeed(toConsole))
  yield* router.add("GET", "/console/*", page)
}))
