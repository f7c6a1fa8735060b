/**
 * The whole HTTP contract of `svc`. It imports nothing from the server, so
 * the typed client (`@svc/client`) and outside tools can use it alone. Each
 * capability adds its group here.
 */
import { HttpApi, OpenApi } from "effect/http-api"
import { AgentSessionsApi } from "./Agents.ts"
import { ApprovalLinksApi, ReviewerConfirmationApi } from "./ApprovalLinks.ts"
import { ApprovalsApi } from "./Approvals.ts"
import { Availability } from "./Availability.ts"
import { ApiKeysApi, ConsoleApi, ConsoleSignInApi } from "./Console.ts"
import { addWebhooks } from "./Events.ts"
import { FeedbackApi } from "./Feedback.ts"
import { withIdempotency } from "./Idempotency.ts"
import { McpServersApi } from "./Mcp.ts"
import { NotificationsApi } from "./Notifications.ts"
import { apiDocumentation } from "./OpenApiDocument.ts"
import { ApprovalPoliciesApi } from "./Policies.ts"
import { ReviewersApi } from "./Reviewers.ts"
import { SystemApi } from "./System.ts"
import { DatasetsApi, TasksApi } from "./Tasks.ts"
import { TelemetryApi } from "./Telemetry.ts"
import { RequestValidation } from "./Validation.ts"
import { VERSION } from "./Version.ts"

export class Api extends withIdempotency(
  HttpApi.make("svc")
    .add(SystemApi)
    .add(TasksApi)
    .add(DatasetsApi)
    .add(AgentSessionsApi)
    .add(ApprovalPoliciesApi)
    .add(ApprovalsApi)
    .add(ReviewersApi)
    .add(ApprovalLinksApi)
    .add(ReviewerConfirmationApi)
    .add(FeedbackApi)
    .add(TelemetryApi)
    .add(NotificationsApi)
    .add(McpServersApi)
    .add(ConsoleSignInApi)
    .add(ConsoleApi)
    .add(ApiKeysApi)
    .middleware(RequestValidation)
    // Outermost: a database outage met anywhere inside (authentication
    // included) answers 503 with Retry-After.
    .middleware(Availability)
    // Report every problem of a request at once, and refuse unknown body and
    // query members (a misspelt optional field is a 400, not silently ignored).
    // Responses decode leniently so older clients survive new fields.
    .annotate(HttpApi.ParseOptions, { errors: "all" })
    .annotate(HttpApi.PayloadParseOptions, { errors: "all", onExcessProperty: "error" })
    .annotate(HttpApi.QueryParseOptions, { errors: "all", onExcessProperty: "error" })
    .annotate(HttpApi.HeadersParseOptions, {})
    .annotateMerge(OpenApi.annotations({
      title: "svc",
      version: VERSION,
      description: "Feedback on task answers, telemetry export and approval notifications."
    }))
    // Servers, license, tag descriptions, problem examples (src/api/Documentation.ts).
    // Other document-wide transforms go in as arguments: an API has one Transform.
    // The webhooks: what svc sends to notification endpoints (src/api/Events.ts).
    // `withIdempotency`: every authenticated write takes an `Idempotency-Key` (src/api/Idempotency.ts).
    .annotateMerge(apiDocumentation(addWebhooks))
) {}
