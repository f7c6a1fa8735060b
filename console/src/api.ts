/**
 * The console's only way to the service: the typed client derived from the
 * HttpApi contract (`src/api`), as atoms. The session cookie authenticates
 * (same origin); every request also carries the console header that a
 * plain HTML form cannot send, which the server requires of cookie-
 * authenticated requests that change state.
 */
import { Cause, Exit, Layer, Option } from "effect"
import { FetchHttpClient, HttpClient, HttpClientRequest } from "effect/http"
import { HttpApiMiddleware } from "effect/http-api"
import { AtomHttpApi } from "effect/reactivity"
import { Api } from "../../src/api/Api.ts"
import { Authentication } from "../../src/api/Security.ts"

export const CONSOLE_HEADER = "x-svc-console"

/** The session cookie goes with every same-origin request: no bearer token to add. */
const CookieAuthentication = HttpApiMiddleware.layerClient(Authentication, ({ next, request }) => next(request))

export class SvcApi extends AtomHttpApi.Service<SvcApi>()("console/SvcApi", {
  api: Api,
  httpClient: Layer.merge(FetchHttpClient.layer, CookieAuthentication),
  transformClient: HttpClient.mapRequest(HttpClientRequest.setHeader(CONSOLE_HEADER, "1")),
  baseUrl: globalThis.location?.origin ?? "http://localhost"
}) {}

/** A problem the API answered: its code and what it says, or a failure of our own. */
export interface Problem {
  readonly tag: string
  readonly code: string
  readonly status: number | undefined
  readonly title: string
  readonly detail: string | undefined
  readonly error: Record<string, unknown> | undefined
}

export const problemOf = (cause: Cause.Cause<unknown>): Problem => {
  const failure = Cause.findErrorOption(cause)
  if (Option.isSome(failure) && typeof failure.value === "object" && failure.value !== null) {
    const error = failure.value as Record<string, unknown>
    return {
      tag: String(error._tag ?? "Error"),
      code: String(error.code ?? error._tag ?? "ERROR"),
      status: typeof error.status === "number" ? error.status : undefined,
      title: String(error.title ?? error.message ?? "The request failed"),
      detail: typeof error.detail === "string" ? error.detail : undefined,
      error
    }
  }
  const defect = Cause.squash(cause)
  const message = defect instanceof Error ? defect.message : String(defect)
  return {
    tag: "Defect",
    code: "NETWORK",
    status: undefined,
    title: `The request failed: ${message}`,
    detail: undefined,
    error: undefined
  }
}

export const exitProblem = <A>(exit: Exit.Exit<A, unknown>): Problem | undefined =>
  Exit.isFailure(exit) ? problemOf(exit.cause) : undefined
