/**
 * One-time sign-in links, server-side console
 * sessions, the cookie, and the cross-site rules for state-changing
 * requests made with it. Real HTTP against the real service.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import {
  asConsole,
  CONSOLE_HEADERS,
  consoleSession,
  consoleTestLayer,
  cookieOf,
  newLink,
  signIn
} from "../../support/console.ts"
import { raw } from "../../support/http.ts"

layer(consoleTestLayer(), { excludeTestServices: true })("console sessions", (it) => {
  describe("a sign-in link works once, within its time", () => {
    it.effect("signing in sets an HttpOnly, SameSite=Strict cookie and answers who is signed in", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const token = yield* newLink(org.orgId, "reviewer", "Grace Hopper")
        const response = yield* signIn(svc.baseUrl, token)
        assert.strictEqual(response.status, 200, response.text)
        const setCookie = response.headers.getSetCookie().find((c) => c.startsWith("svc_console_session="))!
        assert.match(setCookie, /HttpOnly/i)
        assert.match(setCookie, /SameSite=Strict/i)
        assert.match(setCookie, /Path=\//)
        assert.notMatch(setCookie, /Secure/i, "plain HTTP: no Secure flag")
        assert.include(response.json, {
          org_id: org.orgId,
          person: "Grace Hopper",
          preset: "reviewer",
          actor: "console:Grace Hopper"
        })
        assert.sameMembers(response.json.scopes, ["feedback.read", "feedback.review", "tasks.read", "datasets.read"])
        const who = yield* asConsole(svc.baseUrl, cookieOf(response), "GET", "/v1/console/session")
        assert.strictEqual(who.status, 200)
        assert.strictEqual(who.json.session_id, response.json.session_id)
        // The cookie never holds the link's secret, and the database holds neither.
        const stored = yield* svc.sql<
          { token_hash: string }
        >`SELECT token_hash FROM console_sessions WHERE id = ${response.json.session_id}`
        assert.notInclude(stored[0]!.token_hash, cookieOf(response).split("=")[1]!)
      }))

    it.effect("over HTTPS (as a proxy in front says) the cookie is __Host-svc_console_session, Secure", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const token = yield* newLink(org.orgId, "approver")
        const response = yield* signIn(svc.baseUrl, token, { ...CONSOLE_HEADERS, "x-forwarded-proto": "https" })
        assert.strictEqual(response.status, 200)
        assert.match(response.headers.getSetCookie().join("\n"), /^__Host-svc_console_session=[^;]+;.*Secure/i)
      }))

    it.effect("a used link is refused with LINK_USED, an expired one with LINK_EXPIRED, anything else LINK_INVALID", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const token = yield* newLink(org.orgId, "admin")
        assert.strictEqual((yield* signIn(svc.baseUrl, token)).status, 200)
        const again = yield* signIn(svc.baseUrl, token)
        assert.strictEqual(again.status, 410)
        assert.strictEqual(again.json.code, "LINK_USED")
        assert.isString(again.json.used_at)

        const expiring = yield* newLink(org.orgId, "admin")
        yield* svc
          .sql`UPDATE console_links SET expires_at = now() - interval '1 second' WHERE org_id = ${org.orgId} AND used_at IS NULL`
        const late = yield* signIn(svc.baseUrl, expiring)
        assert.strictEqual(late.status, 410)
        assert.strictEqual(late.json.code, "LINK_EXPIRED")

        const unknown = yield* signIn(svc.baseUrl, "svl_" + "x".repeat(43))
        assert.strictEqual(unknown.status, 400)
        assert.strictEqual(unknown.json.code, "LINK_INVALID")
      }))

    it.effect("of two simultaneous sign-ins with one link, exactly one gets a session", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const token = yield* newLink(org.orgId, "reviewer")
        const answers = yield* Effect.all(Array.from({ length: 6 }, () => signIn(svc.baseUrl, token)), {
          concurrency: "unbounded"
        })
        assert.deepStrictEqual(answers.map((a) => a.status).sort(), [200, 410, 410, 410, 410, 410])
      }))

    it.effect("the link's secret never appears in the service's logs", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const { cookie, token } = yield* consoleSession(svc.baseUrl, org.orgId, "reviewer")
        const logs = svc.logLines().join("\n")
        assert.notInclude(logs, token)
        assert.notInclude(logs, cookie.split("=")[1]!)
      }))
  })

  describe("the session authenticates /v1 with its preset's scopes, and ends at once", () => {
    it.effect("a reviewer session reads feedback but gets 403 on promote and on approvals", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const { cookie } = yield* consoleSession(svc.baseUrl, org.orgId, "reviewer")
        assert.strictEqual((yield* asConsole(svc.baseUrl, cookie, "GET", "/v1/feedback")).status, 200)
        const task = yield* org.client.tasks.create({ payload: { name: "t", answer_schema: { type: "object" } } })
        const promote = yield* asConsole(svc.baseUrl, cookie, "POST", `/v1/tasks/${task.id}/feedback/promote`, {
          base_dataset_id: task.id,
          expected_feedback_revision: "0"
        })
        assert.strictEqual(promote.status, 403)
        assert.strictEqual(promote.json.code, "INSUFFICIENT_SCOPE")
        assert.strictEqual(promote.json.required_scope, "datasets.write")
        const approvals = yield* asConsole(svc.baseUrl, cookie, "GET", "/v1/agent-approvals?status=pending")
        assert.strictEqual(approvals.status, 403)
      }))

    it.effect("a decision made in the console names the person as decided_by", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const { cookie } = yield* consoleSession(svc.baseUrl, org.orgId, "approver", "Katherine Johnson")
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const step = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: { step_id: "s1", tool: "t", action_class: "payments.refund", arguments: {} }
        })
        const decided = yield* asConsole(
          svc.baseUrl,
          cookie,
          "POST",
          `/v1/agent-approvals/${step.approval_id}/decision`,
          {
            decision: "approve"
          }
        )
        assert.strictEqual(decided.status, 200, decided.text)
        assert.strictEqual(decided.json.decided_by, "console:Katherine Johnson")
        const read = yield* org.client.approvals.get({ params: { approval_id: step.approval_id! } })
        assert.strictEqual(read.decided_by, "console:Katherine Johnson")
      }))

    it.effect("sign-out, revocation and the idle and absolute limits end a session at once", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const signedOut = yield* consoleSession(svc.baseUrl, org.orgId, "reviewer")
        const out = yield* asConsole(svc.baseUrl, signedOut.cookie, "POST", "/v1/console/sign-out")
        assert.strictEqual(out.status, 204)
        assert.match(
          out.headers.getSetCookie().join("\n"),
          /svc_console_session=;.*(Expires=Thu, 01 Jan 1970|Max-Age=0)/i
        )
        const after = yield* asConsole(svc.baseUrl, signedOut.cookie, "GET", "/v1/feedback")
        assert.strictEqual(after.status, 401)
        assert.strictEqual((yield* asConsole(svc.baseUrl, signedOut.cookie, "GET", "/v1/console/session")).status, 401)

        const admin = yield* consoleSession(svc.baseUrl, org.orgId, "admin")
        const revoked = yield* consoleSession(svc.baseUrl, org.orgId, "reviewer", "Revoked")
        const listed = yield* org.client.console.listSessions()
        assert.includeMembers(listed.sessions.map((s) => s.id), [admin.session.session_id, revoked.session.session_id])
        const del = yield* asConsole(
          svc.baseUrl,
          admin.cookie,
          "DELETE",
          `/v1/console/sessions/${revoked.session.session_id}`
        )
        assert.strictEqual(del.status, 204)
        assert.strictEqual((yield* asConsole(svc.baseUrl, revoked.cookie, "GET", "/v1/feedback")).status, 401)

        const idle = yield* consoleSession(svc.baseUrl, org.orgId, "reviewer", "Idle")
        yield* svc
          .sql`UPDATE console_sessions SET last_seen_at = now() - interval '8 hours 1 second' WHERE id = ${idle.session.session_id}`
        assert.strictEqual((yield* asConsole(svc.baseUrl, idle.cookie, "GET", "/v1/feedback")).status, 401)

        const old = yield* consoleSession(svc.baseUrl, org.orgId, "reviewer", "Old")
        yield* svc
          .sql`UPDATE console_sessions SET absolute_expires_at = now() - interval '1 second' WHERE id = ${old.session.session_id}`
        assert.strictEqual((yield* asConsole(svc.baseUrl, old.cookie, "GET", "/v1/feedback")).status, 401)
      }))

    it.effect("another organization's session cannot be revoked (404)", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const other = yield* SvcTest.org()
        const theirs = yield* consoleSession(svc.baseUrl, other.orgId, "reviewer")
        const del = yield* raw(`${svc.baseUrl}/v1/console/sessions/${theirs.session.session_id}`, {
          method: "DELETE",
          headers: { authorization: `Bearer ${org.key}` }
        })
        assert.strictEqual(del.status, 404)
        assert.strictEqual((yield* asConsole(svc.baseUrl, theirs.cookie, "GET", "/v1/feedback")).status, 200)
      }))
  })

  describe("a state-changing request with the cookie must come from the console", () => {
    it.effect("without X-Svc-Console, or from another site, it is 403 CROSS_SITE_REQUEST and changes nothing", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const { cookie } = yield* consoleSession(svc.baseUrl, org.orgId, "admin")
        const body = { name: "csrf", answer_schema: { type: "object" } }
        const cases: Array<Record<string, string>> = [
          { "content-type": "application/json" },
          { ...CONSOLE_HEADERS, origin: "https://evil.example" },
          { ...CONSOLE_HEADERS, "sec-fetch-site": "cross-site" },
          { ...CONSOLE_HEADERS, origin: "null" }
        ]
        for (const headers of cases) {
          const response = yield* asConsole(svc.baseUrl, cookie, "POST", "/v1/tasks", body, headers)
          assert.strictEqual(response.status, 403, JSON.stringify(headers))
          assert.strictEqual(response.json.code, "CROSS_SITE_REQUEST")
        }
        const tasks = yield* org.client.tasks.list({ query: {} })
        assert.notInclude(tasks.tasks.map((t) => t.name), "csrf")
        // Sign-out and sign-in follow the same rule.
        const out = yield* asConsole(svc.baseUrl, cookie, "POST", "/v1/console/sign-out", undefined, {
          origin: "https://evil.example"
        })
        assert.strictEqual(out.status, 403)
        assert.strictEqual((yield* asConsole(svc.baseUrl, cookie, "GET", "/v1/console/session")).status, 200)
        // From the console itself (same origin, with the header) it works; reads need no header.
        const host = new URL(svc.baseUrl).host
        const ok = yield* asConsole(svc.baseUrl, cookie, "POST", "/v1/tasks", body, {
          ...CONSOLE_HEADERS,
          origin: `http://${host}`,
          "sec-fetch-site": "same-origin"
        })
        assert.strictEqual(ok.status, 201, ok.text)
        assert.strictEqual(ok.json.name, "csrf")
        assert.strictEqual((yield* asConsole(svc.baseUrl, cookie, "GET", "/v1/tasks", undefined, {})).status, 200)
        // Behind a proxy that rewrites Host, the public host comes as X-Forwarded-Host.
        const proxied = yield* asConsole(svc.baseUrl, cookie, "POST", "/v1/tasks", { ...body, name: "proxied" }, {
          ...CONSOLE_HEADERS,
          origin: "https://console.example.com",
          "x-forwarded-host": "console.example.com"
        })
        assert.strictEqual(proxied.status, 201, proxied.text)
      }))

    it.effect("bearer-key requests are unaffected by the console rules", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const response = yield* raw(`${svc.baseUrl}/v1/tasks`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${org.key}`,
            "content-type": "application/json",
            origin: "https://elsewhere.example"
          },
          body: JSON.stringify({ name: "from-ci", answer_schema: { type: "object" } })
        })
        assert.strictEqual(response.status, 201)
        // A wrong key never falls back to a cookie.
        const { cookie } = yield* consoleSession(svc.baseUrl, org.orgId, "admin")
        const wrong = yield* raw(`${svc.baseUrl}/v1/tasks`, { headers: { authorization: "Bearer svc_nope", cookie } })
        assert.strictEqual(wrong.status, 401)
      }))
  })
})
