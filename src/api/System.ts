import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { ServiceUnavailable } from "./Errors.ts"

export const HealthStatus = Schema.Struct({ status: Schema.Literal("ok") })

/** Liveness and readiness, without authentication. */
export class SystemApi extends HttpApiGroup.make("system", { topLevel: true })
  .add(
    HttpApiEndpoint.get("health", "/health", { success: HealthStatus })
      .annotate(OpenApi.Description, "Liveness: the process answers."),
    HttpApiEndpoint.get("ready", "/ready", { success: HealthStatus, error: ServiceUnavailable })
      .annotate(OpenApi.Description, "Readiness: the database answers.")
  )
  .annotate(OpenApi.Title, "System")
{}
