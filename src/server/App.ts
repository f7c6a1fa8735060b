/**
 * The composition of `svc`: services, HTTP routes and background workers,
 * over a database and a configuration. Each capability adds its layers to
 * the lists below and nothing else here changes.
 */
import { ByteSize, Effect, Layer } from "effect"
import { HttpRouter, HttpServerRequest } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { AgentSessionsHandlers } from "../agents/Http.ts"
import { AgentSessions } from "../agents/Sessions.ts"
import { StepRecordsLive } from "../agents/StepRecords.ts"
import { Api } from "../api/Api.ts"
import { Approvals } from "../approvals/Approvals.ts"
import { ApprovalContexts } from "../approvals/Context.ts"
import { Delegations } from "../approvals/Delegations.ts"
import { ApprovalPoliciesHandlers, ApprovalsHandlers } from "../approvals/Http.ts"
import { ApprovalLinksHandlers } from "../approvals/LinksHttp.ts"
import { ApprovalMailLinks } from "../approvals/MailLinks.ts"
import { ApprovalFeed } from "../approvals/OrgStream.ts"
import { Reviewers } from "../approvals/Reviewers.ts"
import { ReviewersHandlers } from "../approvals/ReviewersHttp.ts"
import { RuleWorkers } from "../approvals/RuleWorkers.ts"
import { ApprovalScheduler } from "../approvals/Scheduler.ts"
import { Brokers } from "../brokers/Brokers.ts"
import { ConsoleSessions } from "../console/ConsoleSessions.ts"
import { ConsoleHandlers, ConsoleSignInHandlers } from "../console/Http.ts"
import { Migrations } from "../database/Migrations.ts"
import { Wakeups } from "../database/Wakeups.ts"
import { DeliveryQueue } from "../deliveries/DeliveryQueue.ts"
import { DeliveryOperations } from "../deliveries/records/Operations.ts"
import { Feedback } from "../feedback/Feedback.ts"
import { FeedbackHandlers } from "../feedback/Http.ts"
import { IdempotencyLive } from "../idempotency/Idempotency.ts"
import { AuthenticationLive } from "../identity/Http.ts"
import { Identity } from "../identity/Identity.ts"
import { ApiKeysHandlers } from "../identity/KeysHttp.ts"
import { StreamGuard } from "../identity/StreamGuard.ts"
import { McpCalls } from "../mcp/Calls.ts"
import { McpRoute } from "../mcp/Endpoint.ts"
import { McpServersHandlers } from "../mcp/Http.ts"
import { McpProtocol } from "../mcp/Protocol.ts"
import { McpServers } from "../mcp/Servers.ts"
import { McpSessions } from "../mcp/Sessions.ts"
import { Upstream } from "../mcp/Upstream.ts"
import { CertificateNoticesLive } from "../notifications/auth/CertificateNotices.ts"
import { EndpointTokens } from "../notifications/auth/Tokens.ts"
import { Dispatcher } from "../notifications/dispatch/Dispatcher.ts"
import { EventBodies } from "../notifications/dispatch/EventBodies.ts"
import { endpointClearUrls } from "../notifications/EndpointRows.ts"
import { NotificationEndpoints } from "../notifications/Endpoints.ts"
import { NotificationsHandlers, ReviewerConfirmationHandlers } from "../notifications/Http.ts"
import { ReviewerAddresses } from "../notifications/ReviewerAddress.ts"
import { ReviewerEmail } from "../notifications/send/Email.ts"
import { WebhookSender } from "../notifications/send/Sender.ts"
import { SendTargets } from "../notifications/send/SendTargets.ts"
import { TestDeliveries } from "../notifications/TestDelivery.ts"
import { MetricsListener, MetricsRoute } from "../observability/Http.ts"
import { Metrics } from "../observability/Metrics.ts"
import { OperatorTracesLive } from "../observability/OperatorTraces.ts"
import { MetricsScrape } from "../observability/Scrape.ts"
import { OutboundHttp } from "../outbound/OutboundHttp.ts"
import { SvcConfig } from "../platform/Config.ts"
import { SecretBox } from "../platform/Crypto.ts"
import { RetentionLive } from "../retention/Retention.ts"
import { sealReceiverUrls } from "../secrets/ReceiverUrls.ts"
import { SecretStore } from "../secrets/SecretStore.ts"
import { SessionHub } from "../streams/SessionEvents.ts"
import { AnswerSchemas } from "../tasks/AnswerSchema.ts"
import { DatasetExport } from "../tasks/DatasetExport.ts"
import { DatasetsHandlers, TasksHandlers } from "../tasks/Http.ts"
import { Tasks } from "../tasks/Tasks.ts"
import { SpanBuffers } from "../telemetry/Buffers.ts"
import { TracerLive } from "../telemetry/Capture.ts"
import { TelemetryDestinations } from "../telemetry/Destinations.ts"
import { TelemetryExportLive } from "../telemetry/Export.ts"
import { TelemetryHandlers } from "../telemetry/Http.ts"
import { destinationClearUrls, DestinationsRepo } from "../telemetry/Repository.ts"
import { FeedbackQuotaLive, ValidationAdmissionLive } from "./Admission.ts"
import { AvailabilityLive } from "./Availability.ts"
import { ConsoleRoutes } from "./Console.ts"
import { DocsRoute } from "./Docs.ts"
import { ListenLater } from "./Listener.ts"
import { RequestMiddleware } from "./Middleware.ts"
import { SystemHandlers } from "./System.ts"
import { RequestValidationLive } from "./Validation.ts"
import { WarmRequestsLive } from "./WarmRequest.ts"

/** Domain services. They need a migrated database, `SvcConfig` and `SecretBox`. */
const ServicesLive = Layer.mergeAll(
  Identity.layer,
  StreamGuard.layer.pipe(Layer.provideMerge(ConsoleSessions.layer)),
  Tasks.layer,
  DatasetExport.layer,
  // The MCP gateway over the agents' services: governed calls take the same step path as REST steps.
  McpProtocol.layer.pipe(
    Layer.provideMerge(Layer.mergeAll(McpCalls.layer, McpSessions.layer)),
    Layer.provideMerge(Layer.mergeAll(McpServers.layer, Upstream.layer)),
    Layer.provideMerge(
      Layer.mergeAll(
        AgentSessions.layer,
        ApprovalFeed.layer,
        ApprovalMailLinks.layer,
        Reviewers.layer,
        Delegations.layer
      ).pipe(
        Layer.provideMerge(
          Layer.mergeAll(Approvals.layer.pipe(Layer.provide(StepRecordsLive)), ApprovalContexts.layer)
        ),
        Layer.provideMerge(SessionHub.layer)
      )
    )
  ),
  Feedback.layer.pipe(Layer.provide(Identity.layer)),
  TelemetryDestinations.layer,
  Layer.mergeAll(
    Dispatcher.layer,
    WebhookSender.layer,
    ReviewerEmail.layer,
    TestDeliveries.layer,
    ReviewerAddresses.layer
  ).pipe(
    Layer.provideMerge(
      Layer.mergeAll(NotificationEndpoints.layer, EventBodies.layer, Brokers.layer, EndpointTokens.layer)
    ),
    Layer.provideMerge(SendTargets.layer)
  )
).pipe(
  Layer.provideMerge(DestinationsRepo.layer),
  Layer.provideMerge(Layer.mergeAll(DeliveryQueue.layer, DeliveryOperations.layer)),
  // The capturing tracer: every span created on top of these services (request
  // spans included) is offered to its organization's telemetry buffer.
  Layer.provideMerge(TracerLive),
  // The service's own traces (OTEL_* variables): the tracer also hands spans to it.
  Layer.provideMerge(OperatorTracesLive),
  Layer.provideMerge(SpanBuffers.layer),
  Layer.provideMerge(
    Layer.mergeAll(AnswerSchemas.layer, RuleWorkers.layer, SecretStore.layer, Wakeups.layer, OutboundHttp.layer)
  ),
  // Operators' metrics: one registry for everything above, and its scrape.
  Layer.provideMerge(MetricsScrape.layer),
  Layer.provideMerge(Metrics.layer)
)

/** Handlers of every HttpApi group. */
const HandlersLive = Layer.mergeAll(
  SystemHandlers,
  TasksHandlers,
  DatasetsHandlers,
  AgentSessionsHandlers,
  ApprovalPoliciesHandlers,
  ApprovalsHandlers,
  ReviewersHandlers,
  ApprovalLinksHandlers,
  ReviewerConfirmationHandlers,
  FeedbackHandlers,
  TelemetryHandlers,
  NotificationsHandlers,
  McpServersHandlers,
  ConsoleSignInHandlers,
  ConsoleHandlers,
  ApiKeysHandlers
)

/** Background workers (fibers that live as long as the server). */
const WorkersLive = Layer.mergeAll(
  ApprovalScheduler.layer,
  TelemetryExportLive,
  Dispatcher.worker,
  WebhookSender.worker,
  ReviewerEmail.worker,
  RetentionLive,
  sealReceiverUrls([endpointClearUrls, destinationClearUrls]),
  CertificateNoticesLive,
  MetricsListener
)

// Per request, HttpApiBuilder provides the handlers' group context to the
// request fiber (`Effect.provideContext`: `Context.merge` copies the
// request's context twice, whatever the group's size). Requests start with
// a short context for that reason (`RequestContext.ts`). Related upstream
// work: https://github.com/Effect-TS/effect-smol/pull/1701 (HttpApi's
// request context), https://github.com/Effect-TS/effect-smol/issues/2011
// (which context and scope HttpApiBuilder's handlers run in) and
// https://github.com/Effect-TS/effect/pull/6828 (layered Context storage).
// None of them is about the copy itself; bench/notes/request-path.md
// ("Effect's own per-request cost") says what it costs and what upstream could do.
const ApiRoutes = HttpApiBuilder.layer(Api, { openapiPath: "/openapi.json" }).pipe(
  Layer.provide(HandlersLive),
  Layer.provide(AuthenticationLive),
  Layer.provide(IdempotencyLive),
  Layer.provide(RequestValidationLive),
  Layer.provide(ValidationAdmissionLive),
  Layer.provide(FeedbackQuotaLive),
  Layer.provide(AvailabilityLive)
)

const MaxBodySizeLive = Layer.effect(
  HttpServerRequest.MaxBodySize,
  Effect.map(SvcConfig, (config) => ByteSize.bytes(config.maxBodyBytes))
)

/**
 * The longest path parameter the router passes on, as sent (percent-encoded):
 * the longest documented one, a `step_id` of 200 UTF-16 code units, each up
 * to 3 UTF-8 bytes written as `%XX` (9 characters). The router's default,
 * 100, answered 404 to a documented `step_id` of 101 characters; the
 * schemas check the real maximum of each parameter.
 */
const MAX_PATH_PARAM_LENGTH = 200 * 9

/**
 * The HTTP application: routes, docs and router-wide middleware. Needs an
 * `HttpServer` (one that listens last: `ListenLater`), the services and the
 * database.
 */
const HttpLive = HttpRouter.serve(
  Layer.mergeAll(ApiRoutes, DocsRoute, ConsoleRoutes, RequestMiddleware, MetricsRoute, McpRoute),
  {
    routerConfig: { maxParamLength: MAX_PATH_PARAM_LENGTH },
    // Our RequestMiddleware writes the request log line.
    disableLogger: true,
    disableListenLog: true,
    // With no server middleware and Effect's native tracer, the server skips
    // request spans altogether; a pass-through middleware keeps them, so
    // every request has a trace id (from `traceparent` or new) for logs and
    // telemetry.
    middleware: (app) => app
  }
).pipe(Layer.provide(MaxBodySizeLive))

/**
 * The application over a server that listens last (`ListenLater`): give it
 * an `HttpServer` and its `HttpListener`, a database (`Database.*`),
 * `SvcConfig` and `SecretBox`. Migrations run before any service starts;
 * the socket opens once routes, services and workers are all up, so an
 * early client is refused (and retries) instead of hanging.
 *
 * Stopping runs the other way: open session streams end, then the server
 * stops accepting and drains in-flight requests, then the workers and
 * services stop.
 */
export const AppLive = SessionHub.closeOnShutdown.pipe(
  Layer.provideMerge(ListenLater.listen),
  // Requests through the application before the socket opens (`WarmRequest.ts`).
  Layer.provideMerge(WarmRequestsLive),
  Layer.provideMerge(Layer.mergeAll(HttpLive, WorkersLive)),
  Layer.provide(ServicesLive),
  Layer.provide(Migrations.layer)
)

/** The platform pieces every deployment needs beside the database. */
export const PlatformLive = Layer.mergeAll(SecretBox.layer).pipe(Layer.provideMerge(SvcConfig.layer))
