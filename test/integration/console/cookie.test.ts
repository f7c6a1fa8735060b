/**
 * The console cookie's name and flags follow the service's public URL:
 * `__Host-svc_console_session`, `Secure`, whenever `SVC_PUBLIC_URL` is
 * HTTPS (the browser then keeps it only from a secure origin, with `Path=/`
 * and no `Domain`, so no sibling host can set or shadow it); over plain HTTP
 * (loopback, development) `svc_console_session` without `Secure`, so
 * signing in keeps working there.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Option } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { asConsole, CONSOLE_HEADERS, consoleTestLayer, cookieOf, newLink, signIn } from "../../support/console.ts"

layer(consoleTestLayer({ config: { publicUrl: Option.some("https://svc.example.com") } }), {
  excludeTestServices: true
})(
  "console cookie with an HTTPS public URL",
  (it) => {
    describe("SVC_PUBLIC_URL is https://…", () => {
      it.effect("sign-in sets __Host-svc_console_session: Secure, HttpOnly, SameSite=Strict, Path=/, no Domain; that cookie is the session", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const response = yield* signIn(svc.baseUrl, yield* newLink(org.orgId, "reviewer", "Grace Hopper"))
          assert.strictEqual(response.status, 200, response.text)
          const lines = response.headers.getSetCookie()
          assert.lengthOf(lines, 1)
          const line = lines[0]!
          assert.match(line, /^__Host-svc_console_session=[^;]+;/)
          assert.match(line, /;\s*Secure/i)
          assert.match(line, /HttpOnly/i)
          assert.match(line, /SameSite=Strict/i)
          assert.match(line, /Path=\/(;|$)/)
          assert.notMatch(line, /Domain=/i)
          const who = yield* asConsole(svc.baseUrl, cookieOf(response), "GET", "/v1/console/session")
          assert.strictEqual(who.status, 200)
          assert.strictEqual(who.json.person, "Grace Hopper")
          const api = yield* asConsole(svc.baseUrl, cookieOf(response), "GET", "/v1/feedback")
          assert.strictEqual(api.status, 200)
        }))

      it.effect("the plain-named cookie (which a sibling host could set) is not read; sign-out clears the __Host- cookie", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const response = yield* signIn(svc.baseUrl, yield* newLink(org.orgId, "reviewer"))
          const value = cookieOf(response).split("=").slice(1).join("=")
          const plain = yield* asConsole(svc.baseUrl, `svc_console_session=${value}`, "GET", "/v1/feedback")
          assert.strictEqual(plain.status, 401)
          assert.strictEqual(
            (yield* asConsole(svc.baseUrl, `svc_console_session=${value}`, "GET", "/v1/console/session")).status,
            401
          )
          const out = yield* asConsole(
            svc.baseUrl,
            cookieOf(response),
            "POST",
            "/v1/console/sign-out",
            undefined,
            CONSOLE_HEADERS
          )
          assert.strictEqual(out.status, 204)
          assert.match(out.headers.getSetCookie().join("\n"), /^__Host-svc_console_session=;[^\n]*Secure/i)
          assert.match(out.headers.getSetCookie().join("\n"), /(Expires=Thu, 01 Jan 1970|Max-Age=0)/i)
          assert.strictEqual(
            (yield* asConsole(svc.baseUrl, cookieOf(response), "GET", "/v1/console/session")).status,
            401
          )
        }))
    })
  }
)

layer(consoleTestLayer({ config: { publicUrl: Option.some("http://127.0.0.1:8080") } }), { excludeTestServices: true })(
  "console cookie with a plain HTTP public URL",
  (it) => {
    it.effect("over plain HTTP sign-in sets svc_console_session without Secure (a browser would drop a Secure or __Host- cookie there) and it works", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const response = yield* signIn(svc.baseUrl, yield* newLink(org.orgId, "reviewer"))
        const line = response.headers.getSetCookie()[0]!
        assert.match(line, /^svc_console_session=[^;]+;/)
        assert.notMatch(line, /Secure/i)
        assert.strictEqual(
          (yield* asConsole(svc.baseUrl, cookieOf(response), "GET", "/v1/console/session")).status,
          200
        )
        const value = cookieOf(response).split("=").slice(1).join("=")
        // A __Host- cookie over plain HTTP is not this deployment's cookie.
        assert.strictEqual(
          (yield* asConsole(svc.baseUrl, `__Host-svc_console_session=${value}`, "GET", "/v1/console/session")).status,
          401
        )
      }))
  }
)
