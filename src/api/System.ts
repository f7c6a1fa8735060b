import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { documented } from "./Documentation.ts"
import { ServiceUnavailable } from "./Errors.ts"
import * as Examples from "./Examples.ts"

const HealthStatus = Schema.Struct({ status: Schema.Literal("ok") })

/** Liveness also says which svc answers (`src/api/Version.ts`). */
const Liveness = Schema.Struct({ status: Schema.Literal("ok"), version: Schema.String })

/** Liveness and readiness, without authentication. */
export class SystemApi extends HttpApiGroup.make("system", { topLevel: true })
  .add(
    HttpApiEndpoint.get("health", "/health", { success: Liveness })
      .annotate(OpenApi.Description, "Liveness: the process answers, with the version of svc it runs.")
      .pipe(documented({ summary: "Check liveness", response: Examples.alive })),
    HttpApiEndpoint.get("ready", "/ready", { success: HealthStatus, error: ServiceUnavailable })
      .annotate(OpenApi.Description, "Readiness: the database answers.")
      .pipe(documented({
        summary: "Check readiness",
        response: Examples.healthy,
        errors: {
          503:
            "Not ready: `detail` says why (the database cannot be reached, or did not answer within 2 s); retry later."
        }
      }))
  )
  .annotate(OpenApi.Title, "System")
{}
