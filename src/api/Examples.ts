/**
 * Example requests and answers for the OpenAPI document, as JSON on the
 * wire, checked by decoding each with its endpoint's own schemas (strict:
 * no unknown members) in `test/unit/api/openapi.test.ts`. They import
 * nothing: the declarations that use them import this file.
 */
import { VERSION } from "./Version.ts"

const ids = {
  org: "0193a0a0-0000-7000-8000-00000000000a",
  key: "0193a0a0-0000-7000-8000-0000000000b1",
  task: "0193a0a0-0000-7000-8000-0000000000c1",
  dataset: "0193a0a0-0000-7000-8000-0000000000d1",
  dataset2: "0193a0a0-0000-7000-8000-0000000000d2",
  feedback: "0193a0a0-0000-7000-8000-0000000000f1",
  session: "0193a0a0-0000-7000-8000-0000000000e1",
  approval: "0193a0a0-0000-7000-8000-0000000000a1",
  endpoint: "0193a0a0-0000-7000-8000-000000000e01",
  event: "0193a0a0-0000-7000-8000-000000000e71",
  delivery: "0193a0a0-0000-7000-8000-000000000de1",
  destination: "0193a0a0-0000-7000-8000-000000000071",
  batch: "0193a0a0-0000-7000-8000-000000000b71",
  consoleSession: "0193a0a0-0000-7000-8000-000000000c51",
  newKey: "0193a0a0-0000-7000-8000-0000000000b2"
} as const

const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
const at = "2026-11-22T12:00:00.000Z"

export const healthy = { status: "ok" }
export const alive = { status: "ok", version: VERSION }

// Tasks, runs, datasets

export const createTask = {
  name: "triage",
  answer_schema: { type: "object", properties: { label: { type: "string" } }, required: ["label"] }
}
export const task = { id: ids.task, ...createTask, created_at: at }
export const taskList = { tasks: [task], next_cursor: null }
export const logRun = { input: { ticket: "printer on fire" }, answer: { label: "hardware" } }
export const run = { trace_id: traceId, task_id: ids.task, ...logRun, created_at: at }
export const runList = { runs: [run], next_cursor: null }
const datasetSummary = {
  id: ids.dataset,
  task_id: ids.task,
  version: 1,
  created_at: at,
  example_count: 1
}
export const datasetList = { datasets: [datasetSummary], next_cursor: null }
export const dataset = {
  ...datasetSummary,
  examples: [{ input: { ticket: "printer on fire" }, answer: { label: "facilities" }, feedback_id: ids.feedback }],
  next_cursor: null
}

/** One line of a version's JSON Lines export. */
export const exportLine = {
  input: { ticket: "printer on fire" },
  answer: { label: "facilities" },
  feedback_id: ids.feedback
}

// Agent sessions and approvals

export const createSession = { task_id: ids.task }
export const session = { id: ids.session, task_id: ids.task, created_at: at }
export const governedStep = {
  step_id: "refund-1",
  tool: "stripe.refunds.create",
  action_class: "payments.refund",
  arguments: { charge: "ch_123", amount: 1200 }
}
export const stepAnswer = { decision: "pending", approval_id: ids.approval }
export const toolOutcome = { status: "succeeded", result: { refund: "re_123" } }
export const step = {
  ...governedStep,
  decision: "pending",
  approval_id: ids.approval,
  resolution: "allow",
  outcome: { ...toolOutcome, reported_at: at },
  created_at: at
}
export const sessionDetail = { ...session, steps: [step], next_cursor: null }
export const sessionEvent = {
  id: "3",
  event: "approval:decided",
  data: JSON.stringify({ approval_id: ids.approval, step_id: "refund-1", status: "approved" })
}
export const policyInput = {
  mode: "require_approval",
  review_seconds: 900,
  expiring_notice_seconds: 300,
  escalation_seconds: 1800,
  timeout_action: "reject",
  group: "support-leads",
  escalation_chain: ["finance-reviewers", "finance-directors"],
  rules: [
    { name: "small-refunds", condition: "arguments.amount <= 100.0", result: { decision: "allow" } },
    {
      name: "huge-refunds",
      condition: "arguments.amount > 5000.0",
      result: { decision: "reject", reason: "Refunds above 5 000 go through finance." }
    }
  ]
}
export const policy = { action_class: "payments.refund", ...policyInput, updated_at: at }
export const dryRunInput = { tool: "stripe.refund", arguments: { amount: 6200, currency: "EUR" } }
export const dryRunAnswer = {
  decision: "reject",
  rule: "huge-refunds",
  reason: "Refunds above 5 000 go through finance.",
  policy: "stored"
}
export const policyList = { policies: [policy] }
export const approval = {
  approval_id: ids.approval,
  session_id: ids.session,
  step_id: "refund-1",
  task_id: ids.task,
  status: "pending",
  deadline_at: "2026-11-22T12:15:00.000Z",
  expires_at: "2026-11-22T13:15:00.000Z",
  timeout_action: "reject",
  assigned_group: "support-leads",
  escalation_level: 0
}
export const decision = { decision: "approve", reason: "Refund matches the customer's ticket." }
export const decidedApproval = {
  ...approval,
  status: "approved",
  decided_at: "2026-11-22T12:03:00.000Z",
  decided_by: ids.key,
  decision_reason: "Refund matches the customer's ticket."
}

const approvalListItem = {
  ...approval,
  tool: "stripe.refunds.create",
  action_class: "payments.refund",
  arguments: { charge: "ch_123", amount: 1200 },
  escalation: "pending",
  requested_at: at
}
export const approvalList = { approvals: [approvalListItem], next_cursor: null }
export const approvalContext = {
  approval: approvalListItem,
  task_name: "Support refunds",
  earlier_steps: [
    {
      step_id: "lookup-1",
      tool: "stripe.charges.retrieve",
      action_class: "payments.read",
      resolution: "allow",
      outcome: "succeeded",
      created_at: "2026-11-22T11:59:00.000Z"
    }
  ],
  earlier_steps_total: 1
}
export const approvalHistory = {
  approvals: [{
    ...approvalListItem,
    status: "rejected",
    decided_at: "2026-11-22T12:03:00.000Z",
    decided_by: "console:Alex Approver",
    decision_reason: "Wrong customer account.",
    task_name: "Support refunds"
  }],
  next_cursor: null
}
export const openApprovalLink = { token: "sva_Qm9vb0JhYmFHYW5vdXNoLWV4YW1wbGUtdG9rZW4tMDAx" }
export const decideByLink = { ...openApprovalLink, decision: "reject", reason: "Wrong customer account." }
export const approvalLinkView = { ...approvalContext, decider: "email:reviewers@example.com" }
export const approvalLinkDecided = {
  ...approvalLinkView,
  approval: {
    ...approvalListItem,
    status: "rejected",
    decided_at: "2026-11-22T12:03:00.000Z",
    decided_by: "email:reviewers@example.com",
    decision_reason: "Wrong customer account."
  }
}
export const approvalStreamEvent = {
  id: "7",
  event: "approval.requested",
  data: JSON.stringify(approvalListItem)
}

// Feedback

export const submitFeedback = {
  inference_log_id: traceId,
  score: -1,
  correction: { label: "facilities" }
}
export const feedbackItem = {
  id: ids.feedback,
  inference_log_id: traceId,
  task_id: ids.task,
  score: -1,
  correction: { label: "facilities" },
  status: "pending",
  created_at: at
}
export const feedbackList = { feedback: [feedbackItem], next_cursor: null }
export const stagedFeedback = { ...feedbackItem, status: "staged" }
export const rejectedFeedback = { ...feedbackItem, status: "rejected" }
export const promotePreview = {
  base_dataset_id: ids.dataset,
  expected_feedback_revision: "3:0193a0a0-0000-7000-8000-0000000000f1",
  staged: [stagedFeedback],
  staged_count: 1,
  next_cursor: null
}
export const promote = {
  base_dataset_id: ids.dataset,
  expected_feedback_revision: "3:0193a0a0-0000-7000-8000-0000000000f1"
}
export const promoted = { dataset_id: ids.dataset2, version: 2, promoted_count: 1 }

// Notification endpoints

export const createEndpoint = {
  url: "https://hooks.acme.test/svc",
  events: ["approval.requested", "approval.approved", "approval.rejected"],
  action_classes: ["payments.*", "email.send"],
  headers: { "X-Routing-Key": "payments-eu" },
  rate_limit: 20,
  auth: {
    type: "oauth2_client_credentials",
    token_url: "https://login.acme.test/oauth/token",
    client_id: "svc-webhooks",
    client_secret: "cs_5Jq2w8RkT1vYb7Lm",
    scope: "webhooks.write"
  }
}
const notificationEndpoint = {
  id: ids.endpoint,
  url_hint: "https://hooks.acme.test/…",
  events: ["approval.requested", "approval.approved", "approval.rejected"],
  ordering: "concurrent",
  active: true,
  created_at: at,
  created_by: ids.key,
  action_classes: null,
  headers: ["X-Routing-Key"],
  rate_limit: 20,
  auth: {
    type: "oauth2_client_credentials",
    token_url_hint: "https://login.acme.test/…",
    client_id: "svc-webhooks",
    scope: "webhooks.write",
    auth_method: "client_secret_basic"
  },
  tls_client_certificate: null
}
const secret = "whsec_JdGwaHfZnRRQKgXhf8YyUeo++QLve9wkg3u27aco3jA="
export const createdEndpoint = { endpoint: notificationEndpoint, secret }
export const endpointList = { endpoints: [notificationEndpoint], email_notifier: true }
export const updateEndpoint = {
  events: ["approval.requested", "approval.expired"],
  ordering: "strict" as const,
  rate_limit: 5
}
export const updatedEndpoint = {
  ...notificationEndpoint,
  events: updateEndpoint.events,
  ordering: updateEndpoint.ordering,
  rate_limit: updateEndpoint.rate_limit
}
export const rotateSecret = { overlap_seconds: 86400 }
export const rotatedSecret = {
  endpoint: notificationEndpoint,
  secret: "whsec_I72mHP1bALnLascR/s6zXQu6pFsMh0CKncmIrr5rdd4=",
  previous_secret_expires_at: "2026-11-23T12:00:00.000Z"
}
const notificationDelivery = {
  id: ids.delivery,
  endpoint_id: ids.endpoint,
  event_id: ids.event,
  label: `approval.requested ${ids.approval}`,
  status: "failed",
  status_code: 503,
  attempts: 8,
  replays: 0,
  last_error: "HTTP 503 from the receiver",
  created_at: at,
  finished_at: "2026-11-23T04:10:00.000Z"
}
export const notificationDeliveries = { deliveries: [notificationDelivery], next_cursor: null }
export const replayed = { queued: true, id: ids.delivery }
export const testDelivery = { event_type: "approval.requested" }
export const testDeliveredAnswer = { delivered: true, status: 204, duration_ms: 84 }
export const bulkReplay = { since: "2026-11-23T08:00:00Z", until: "2026-11-23T10:00:00Z", dry_run: true }
export const bulkReplayed = { matched: 120, queued: 0, not_queued: 0 }
export const endpointStats = {
  since: "2026-11-22T12:00:00.000Z",
  delivered: 1180,
  failed: 4,
  pending: 2,
  success_rate: 0.9966,
  duration_ms_p50: 41,
  duration_ms_p95: 230
}
export const notificationSettings = {
  reviewer_email: "reviewers@acme.test",
  reviewer_email_status: "confirmed",
  email_notifier: true
}
export const confirmReviewerAddress = { token: "svr_Q29uZmlybS1leGFtcGxlLXRva2VuLW5vdC1yZWFsLTAwMQ" }
export const reviewerAddressConfirmed = {
  reviewer_email: "reviewers@acme.test",
  reviewer_email_status: "confirmed",
  confirmed_at: "2026-05-04T09:12:44.000Z"
}
export const updateNotificationSettings = { reviewer_email: "reviewers@acme.test" }

// Telemetry destinations

export const createDestination = {
  url: "https://collector.acme.test/v1/traces",
  headers: { Authorization: "Bearer collector-token" },
  protocol: "http/protobuf",
  compression: "gzip"
}
export const createdDestination = {
  id: ids.destination,
  url_hint: "https://collector.acme.test/…/traces",
  protocol: "http/protobuf",
  compression: "gzip"
}
const destination = {
  ...createdDestination,
  created_at: at,
  last_delivered_at: "2026-11-22T12:05:00.000Z",
  last_error: null,
  pending_spans: 12,
  dropped_spans: 0
}
export const destinationList = { destinations: [destination] }
const telemetryDelivery = {
  id: ids.batch,
  status: "failed",
  span_count: 512,
  rejected_spans: 0,
  attempts: 8,
  last_error: "HTTP 503 from the collector",
  created_at: at,
  finished_at: "2026-11-23T04:10:00.000Z"
}
export const telemetryDeliveries = { deliveries: [telemetryDelivery], next_cursor: null }
export const testDelivered = { delivered: true }

// Console and API keys

export const signIn = { token: "svl_Jx4tQ0b8cN2mV6pL1sR7wY3zA5dF9gH0kE2iU4oT6qM" }
export const consoleSession = {
  session_id: ids.consoleSession,
  org_id: ids.org,
  person: "Ada Lovelace",
  preset: "reviewer",
  scopes: ["feedback.read", "feedback.review", "tasks.read", "datasets.read"],
  actor: "console:Ada Lovelace",
  created_at: at,
  expires_at: "2026-11-22T20:00:00.000Z",
  absolute_expires_at: "2026-11-29T12:00:00.000Z"
}
const consoleSessionSummary = {
  id: ids.consoleSession,
  person: "Ada Lovelace",
  preset: "reviewer",
  created_at: at,
  last_seen_at: at,
  expires_at: "2026-11-22T20:00:00.000Z",
  absolute_expires_at: "2026-11-29T12:00:00.000Z",
  current: false
}
export const consoleSessionList = { sessions: [consoleSessionSummary] }
const apiKey = {
  id: ids.newKey,
  name: "ci",
  key_prefix: "svc_q1mR3v1x",
  scopes: ["tasks.read", "datasets.read"],
  created_at: at,
  revoked_at: null,
  created_by: "console:Ada Lovelace"
}
export const apiKeyList = { keys: [apiKey] }
export const createApiKey = { name: "ci", scopes: ["tasks.read", "datasets.read"] }
export const createdApiKey = { api_key: apiKey, key: "svc_q1mR3v1xZx0l7YkzK1m7h2m4bVqJ8d4n2s6t9u0w3yA" }
export const revokedApiKey = { ...apiKey, revoked_at: "2026-11-22T13:00:00.000Z" }
