/** A header on the response of the current request, whatever the response becomes (an answer or a problem). */
import { Effect } from "effect"
import { HttpEffect, HttpServerResponse } from "effect/http"

export const responseHeader = (name: string, value: string) =>
  HttpEffect.appendPreResponseHandler((_request, response) =>
    Effect.succeed(HttpServerResponse.setHeader(response, name, value))
  )
