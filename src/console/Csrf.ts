/**
 * The console's request rules: a request that changes
 * state with the console cookie must carry `X-Svc-Console` (a plain HTML
 * form cannot send a custom header, and a cross-origin script cannot send
 * one without a CORS preflight that we never answer) and must not come from
 * another site (`Origin` of another host, `Sec-Fetch-Site` other than
 * `same-origin`/`none`). `SameSite=Strict` already keeps the cookie off
 * cross-site requests in current browsers; these checks hold without it.
 */
import { Effect, Option } from "effect"
import { HttpServerRequest } from "effect/http"
import { CrossSiteRequest } from "../api/Errors.ts"
import { CONSOLE_COOKIE, CONSOLE_COOKIE_SECURE, CONSOLE_HEADER } from "../api/Security.ts"

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"])

/**
 * Why `request` may not change state with the console cookie, or
 * `undefined` when it may. The console's own origin is the request's `Host`,
 * the `X-Forwarded-Host` a proxy in front sets, or the host of
 * `SVC_PUBLIC_URL` (`publicHost`): behind a proxy that rewrites `Host`, the
 * browser's `Origin` names the public host. (A page of another site can set
 * neither header without a CORS preflight, which is never answered.)
 */
export const crossSiteReason = (
  request: HttpServerRequest.HttpServerRequest,
  publicHost?: string
): string | undefined => {
  if (SAFE_METHODS.has(request.method.toUpperCase())) return undefined
  const header = request.headers[CONSOLE_HEADER]
  if (header === undefined || header.trim() === "") {
    return "A console request that changes state must send the `X-Svc-Console: 1` header."
  }
  const site = request.headers["sec-fetch-site"]
  if (site !== undefined && site !== "same-origin" && site !== "none") {
    return `The request came from another site (Sec-Fetch-Site: ${site}); the console's requests come from its own origin.`
  }
  const origin = request.headers["origin"]
  if (origin !== undefined) {
    let host: string | undefined
    try {
      host = origin === "null" ? undefined : new URL(origin).host
    } catch {
      host = undefined
    }
    const own = [request.headers["host"], request.headers["x-forwarded-host"]?.split(",")[0]?.trim(), publicHost]
    if (host === undefined || !own.includes(host)) {
      return "The request came from another origin; the console's requests come from its own origin."
    }
  }
  return undefined
}

/** Fails with `CROSS_SITE_REQUEST` when the current request may not change state with the console cookie. */
export const requireConsoleOrigin = (publicHost?: string) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const reason = crossSiteReason(request, publicHost)
    if (reason !== undefined) return yield* new CrossSiteRequest({ detail: reason })
  })

/** Whether `SVC_PUBLIC_URL` is an HTTPS URL. */
export const httpsPublicUrl = (publicUrl: Option.Option<string>): boolean =>
  Option.exists(publicUrl, (url) => url.toLowerCase().startsWith("https:"))

/**
 * The name of the console cookie for this request: `__Host-svc_console_session`
 * (set `Secure`) whenever the public URL is HTTPS or the request came over
 * HTTPS; `svc_console_session` over plain HTTP (a `__Host-` cookie must be
 * `Secure`, which a browser does not keep from plain HTTP). Setting,
 * clearing and reading all use this name: on an HTTPS deployment a cookie
 * of the plain name (which a sibling host could have set) is never read.
 */
export const consoleCookieName = (request: HttpServerRequest.HttpServerRequest, httpsPublic: boolean): string =>
  httpsPublic || overHttps(request) ? CONSOLE_COOKIE_SECURE : CONSOLE_COOKIE

/** The console cookie of the current request, or `""`. */
export const consoleCookieOf = (request: HttpServerRequest.HttpServerRequest, httpsPublic: boolean): string =>
  request.cookies[consoleCookieName(request, httpsPublic)] ?? ""

/** Whether the request reached us over HTTPS (directly, or as a proxy in front of us says). */
const overHttps = (request: HttpServerRequest.HttpServerRequest): boolean =>
  request.headers["x-forwarded-proto"]?.split(",")[0]?.trim().toLowerCase() === "https" ||
  request.url.startsWith("https:")

/** The host (`name:port`) of `SVC_PUBLIC_URL`, if set. */
export const publicHostOf = (publicUrl: Option.Option<string>): string | undefined =>
  Option.getOrUndefined(Option.map(publicUrl, (url) => new URL(url).host))
