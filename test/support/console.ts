/** Helpers for console tests: sign-in links and sessions over real HTTP, as a browser would use them. */
import { Effect, Layer } from "effect"
import type { ConsolePreset } from "../../src/api/Security.ts"
import { ConsoleSessions } from "../../src/console/ConsoleSessions.ts"
import { SvcTest, type SvcTestOptions } from "../../src/testing.ts"
import { raw, type RawResponse } from "./http.ts"

/** The headers the console sends with every state-changing request. */
export const CONSOLE_HEADERS = { "content-type": "application/json", "x-svc-console": "1" } as const

/** A new sign-in link's secret (what the CLI puts after `#`). */
export const newLink = (orgId: string, preset: ConsolePreset, person = "Ada Lovelace", ttlSeconds = 900) =>
  Effect.gen(function*() {
    const sessions = yield* ConsoleSessions
    const link = yield* sessions.createLink({ orgId, preset, person, ttlSeconds }).pipe(Effect.orDie)
    return link.token
  })

/** The whole service plus `ConsoleSessions` (to issue links as the CLI does). */
export const consoleTestLayer = (options?: SvcTestOptions) =>
  ConsoleSessions.layer.pipe(Layer.provideMerge(SvcTest.layer(options)))

export const signIn = (baseUrl: string, token: string, headers: Record<string, string> = CONSOLE_HEADERS) =>
  raw(`${baseUrl}/v1/console/sign-in`, { method: "POST", headers, body: JSON.stringify({ token }) })

/** `name=value` of the console cookie a response set (either name: `__Host-svc_console_session` over HTTPS). */
export const cookieOf = (response: RawResponse): string => {
  const line = response.headers.getSetCookie().find((c) => /^(__Host-)?svc_console_session=/.test(c))
  if (line === undefined) throw new Error(`no console cookie in ${response.status} ${response.text}`)
  return line.split(";")[0]!
}

/** A signed-in console session: its cookie (`name=value`) and who it is. */
export const consoleSession = (baseUrl: string, orgId: string, preset: ConsolePreset, person = "Ada Lovelace") =>
  Effect.gen(function*() {
    const token = yield* newLink(orgId, preset, person)
    const response = yield* signIn(baseUrl, token)
    if (response.status !== 200) return yield* Effect.die(new Error(`sign-in: ${response.status} ${response.text}`))
    return { cookie: cookieOf(response), session: response.json, token }
  })

/** A request with the console cookie, as the console makes it (its header included unless `headers` says otherwise). */
export const asConsole = (
  baseUrl: string,
  cookie: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = CONSOLE_HEADERS
) =>
  raw(`${baseUrl}${path}`, {
    method,
    headers: { ...headers, cookie },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
