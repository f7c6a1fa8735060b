/** Raw HTTP helpers for tests that must see the wire (status, headers, exact body). */
import { Effect } from "effect"
import { contractViolation } from "./contract.ts"

export interface RawResponse {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  readonly json: any
}

/**
 * One request, and its answer as text and JSON. An answer of svc (it carries
 * `x-request-id`) to a documented operation must be what `/openapi.json`
 * says for its status (`./contract.ts`): otherwise the test fails here.
 */
export const raw = (url: string, init?: RequestInit) =>
  Effect.promise(async (): Promise<RawResponse> => {
    const response = await fetch(url, init)
    const text = await response.text()
    let json: unknown = undefined
    try {
      json = JSON.parse(text)
    } catch {
      json = undefined
    }
    const method = (init?.method ?? "GET").toUpperCase()
    if (response.headers.has("x-request-id") && method !== "HEAD") {
      const violation = contractViolation(method, url, response.status, response.headers.get("content-type"), json)
      if (violation !== undefined) throw new Error(`The answer is not what /openapi.json says: ${violation}`)
    }
    return { status: response.status, headers: response.headers, text, json }
  })

/** Polls `check` (on the real clock) until it returns a value or `timeoutMs` passes (never a fixed sleep). */
export const eventually = <A, E, R>(
  check: Effect.Effect<A | undefined, E, R>,
  options: { readonly timeoutMs?: number; readonly intervalMs?: number; readonly what?: string } = {}
): Effect.Effect<A, E | Error, R> =>
  Effect.gen(function*() {
    const deadline = Date.now() + (options.timeoutMs ?? 15_000)
    for (;;) {
      const value = yield* check
      if (value !== undefined) return value
      if (Date.now() > deadline) {
        return yield* Effect.fail(new Error(`timed out waiting for ${options.what ?? "condition"}`))
      }
      yield* Effect.sleep(options.intervalMs ?? 50)
    }
  })
