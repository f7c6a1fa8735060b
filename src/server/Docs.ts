/**
 * `GET /docs`: the API reference (Effect's Scalar page, which inlines a
 * third-party bundle of about 3.4 MB and the OpenAPI document) under a
 * Content-Security-Policy of its own.
 *
 * The page shares the console's origin, so a script running in it could
 * act with a signed-in person's console cookie. Its policy therefore:
 * - runs only the page's own inline scripts, by hash (computed once from
 *   the page the server answers; nothing else, no `eval`, nothing loaded);
 * - `sandbox allow-scripts allow-popups`: the page runs in an opaque origin
 *   of its own, not the console's: it cannot read the console's storage, its
 *   requests are cross-site (no console cookie, and the console's
 *   same-origin check refuses them) and it cannot read an API answer;
 * - is never framed (`frame-ancestors 'none'`, `X-Frame-Options: DENY`),
 *   submits no form, and sets no base URL.
 * Styles stay inline (Scalar writes its own), images and fonts come only
 * from `data:` URLs, and the page connects nowhere: so it does not offer
 * Scalar's API client ("Test Request", "Open API Client"), which could not
 * send (each operation shows its request as code to run instead). In the sandbox the
 * browser refuses web storage, which Scalar reads as it starts: a small
 * script before the bundle gives it storage that lasts as long as the page.
 */
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { HttpApiScalar } from "effect/http-api"
import crypto from "node:crypto"
import { Api } from "../api/Api.ts"

/** The policy for a page whose inline scripts have these texts. */
const docsCsp = (scripts: ReadonlyArray<string>) =>
  [
    "default-src 'none'",
    `script-src ${
      scripts.map((text) => `'sha256-${crypto.createHash("sha256").update(text, "utf8").digest("base64")}'`).join(" ")
    }`,
    "style-src 'unsafe-inline'",
    "img-src data:",
    "font-src data:",
    "connect-src 'none'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    "object-src 'none'",
    "sandbox allow-scripts allow-popups"
  ].join("; ")

/** The texts of a page's inline `<script>` elements, as an HTML parser ends them. */
export const inlineScripts = (html: string): ReadonlyArray<string> =>
  [...html.matchAll(/<script(?:\s[^>]*)?>([\s\S]*?)<\/script[\s/>]/gi)].map((match) => match[1]!)

const bodyText = (response: HttpServerResponse.HttpServerResponse) =>
  response.body._tag === "Uint8Array" ? new TextDecoder().decode(response.body.body) : ""

/** Web storage for a sandboxed page (where the browser's throws), kept in memory. */
const STORAGE_SHIM = `(() => {
  const memory = () => {
    const items = new Map()
    return {
      get length() { return items.size },
      key: (i) => [...items.keys()][i] ?? null,
      getItem: (k) => items.has(String(k)) ? items.get(String(k)) : null,
      setItem: (k, v) => { items.set(String(k), String(v)) },
      removeItem: (k) => { items.delete(String(k)) },
      clear: () => { items.clear() }
    }
  }
  for (const name of ["localStorage", "sessionStorage"]) {
    try { window[name] } catch { Object.defineProperty(window, name, { value: memory(), configurable: true }) }
  }
})()`

const CONTAINER = `<div id="api-reference-container"></div>`

/** The page with the storage shim before Scalar's bundle, and its policy. */
const securePage = (html: string) => {
  const page = html.includes(CONTAINER)
    ? html.replace(CONTAINER, `${CONTAINER}\n    <script>${STORAGE_SHIM}</script>`)
    : html
  return { page, csp: docsCsp(inlineScripts(page)) }
}

const docsHeaders = (csp: string) => ({
  "content-security-policy": csp,
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin"
})

/**
 * The page connects nowhere: no "Test Request" per operation, no "Open API
 * Client", and no developer toolbar (whose "Share" uploads the document to
 * Scalar) when opened on localhost. Scalar reads the last two, which
 * Effect's type omits.
 */
const SCALAR: HttpApiScalar.ScalarConfig & {
  readonly hideClientButton: boolean
  readonly showDeveloperTools: "never"
} = {
  withDefaultFonts: false,
  hideTestRequestButton: true,
  hideClientButton: true,
  showDeveloperTools: "never"
}

/**
 * Scalar's route, registered through a router that secures its answer. The
 * page never changes while the server runs (Scalar memoizes it), so it is
 * rewritten and its policy computed once, from the first answer.
 */
export const DocsRoute = HttpRouter.use(Effect.fnUntraced(function*(router) {
  let secured: { readonly body: Uint8Array; readonly csp: string } | undefined
  const withHeaders = (response: HttpServerResponse.HttpServerResponse) => {
    if (secured === undefined) {
      const { page, csp } = securePage(bodyText(response))
      secured = { body: new TextEncoder().encode(page), csp }
    }
    return HttpServerResponse.uint8Array(secured.body, {
      status: response.status,
      contentType: "text/html; charset=utf-8",
      headers: { ...response.headers, ...docsHeaders(secured.csp) }
    })
  }
  const wrapping: HttpRouter.HttpRouter = Object.create(router, {
    add: {
      value: ((method, path, handler, options) =>
        router.add(
          method,
          path,
          Effect.isEffect(handler)
            ? Effect.map(handler, withHeaders)
            : typeof handler === "function"
            ? (request) => Effect.map(handler(request), withHeaders)
            : Effect.sync(() => withHeaders(handler)),
          options
        )) satisfies HttpRouter.HttpRouter["add"]
    }
  })
  yield* Layer.build(HttpApiScalar.layer(Api, { path: "/docs", scalar: SCALAR })).pipe(
    Effect.provideService(HttpRouter.HttpRouter, wrapping)
  )
}))
