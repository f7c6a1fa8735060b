/**
 * A send to an endpoint that wants an OAuth 2.0 bearer token: the token
 * (cached, or fetched: `Tokens.ts`) goes in `Authorization` beside the
 * signature headers, and a 401 from the receiver fetches a new token and
 * sends once more. Token request, send and resend share the attempt's one
 * deadline (`SVC_WEBHOOK_TIMEOUT`), so an attempt never outlives its lease.
 * A token endpoint that fails fails the attempt as a network failure does,
 * with a message that says so (never the secret or the token).
 */
import { Clock, Duration, Effect } from "effect"
import type { OutboundFailure, OutboundHttp, OutboundRequest, OutboundResponse } from "../../outbound/OutboundHttp.ts"
import type { EndpointTokens, OAuthTarget } from "./Tokens.ts"

export const makeAuthorizedSend = (outbound: OutboundHttp["Service"], tokens: EndpointTokens["Service"]) =>
(
  request: OutboundRequest,
  oauth: OAuthTarget | undefined,
  orgId: string
): Effect.Effect<OutboundResponse, OutboundFailure> =>
  oauth === undefined ? outbound.send(request) : Effect.gen(function*() {
    const started = yield* Clock.currentTimeMillis
    const totalMs = Duration.toMillis(request.timeout)
    const left = Effect.map(Clock.currentTimeMillis, (now) => Math.max(0, totalMs - (now - started)))
    const sendWith = (token: string) =>
      Effect.flatMap(left, (ms) =>
        outbound.send({
          ...request,
          headers: { ...request.headers, authorization: `Bearer ${token}` },
          timeout: Duration.millis(ms)
        }))
    const token = yield* tokens.token(oauth, orgId, totalMs)
    const answer = yield* sendWith(token)
    if (answer.status !== 401) return answer
    // The receiver refused the token (revoked, or expired before its
    // `expires_in`): one new token, one more try.
    return yield* sendWith(yield* tokens.token(oauth, orgId, yield* left, token))
  })
