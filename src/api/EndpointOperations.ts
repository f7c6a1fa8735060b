/**
 * What is asked of a notification endpoint besides its settings: a test
 * delivery, a bulk replay of its failed deliveries, its delivery
 * statistics, a signing secret's rotation; and the organization's reviewer
 * address (docs/webhooks.md). The routes are in `Notifications.ts`.
 */
import { Schema } from "effect"
import { EmailAddress, Instant, Timestamp } from "./Common.ts"
import { Problem } from "./Errors.ts"
import { EventTypeName } from "./WebhookDeliveries.ts"

export const TestDelivery = Schema.Struct({
  event_type: Schema.optionalKey(EventTypeName.annotate({
    description: "One of the endpoint's event types; default: its first"
  }))
})

export const TestDelivered = Schema.Struct({
  delivered: Schema.Literal(true),
  status: Schema.optionalKey(Schema.Int.annotate({
    description: "The receiver's HTTP status (2xx); absent for a broker destination, which acknowledged the message"
  })),
  duration_ms: Schema.Int
})

/** A test delivery the receiver did not accept: its status or the network error, never its body. */
export class DeliveryFailed extends Problem<DeliveryFailed>()("DeliveryFailed", {
  code: "DELIVERY_FAILED",
  status: 502,
  title: "The receiver did not accept the test delivery"
}, {
  receiver_status: Schema.optionalKey(
    Schema.Int.annotate({ description: "The receiver's HTTP status, when it answered" })
  ),
  error: Schema.String.annotate({ description: "What went wrong: the status, or the network or TLS error" }),
  duration_ms: Schema.Int
}) {}

export const BulkReplay = Schema.Struct({
  since: Instant.annotate({ description: "Failed deliveries created at or after this instant" }),
  until: Schema.optionalKey(Instant.annotate({ description: "… and before this one (default: now)" })),
  dry_run: Schema.optionalKey(Schema.Boolean.annotate({ description: "Count only; queue nothing" }))
})

export const BulkReplayed = Schema.Struct({
  matched: Schema.Int.annotate({ description: "Failed deliveries of the endpoint created in [since, until)" }),
  queued: Schema.Int.annotate({ description: "Queued again (0 on a dry run)" }),
  not_queued: Schema.Int.annotate({
    description:
      "Matched but not queued: over the queue's capacity (`SVC_WEBHOOK_QUEUE_CAPACITY`) or over the most one call takes (`SVC_WEBHOOK_REPLAY_MAX`); on a dry run, those that would not fit"
  }),
  next_since: Schema.optionalKey(Timestamp.annotate({
    description: "Present when the window matched more than one call takes: call again with this `since` for the rest"
  }))
})

export const EndpointStats = Schema.Struct({
  since: Timestamp.annotate({ description: "Start of the window (24 hours before now)" }),
  delivered: Schema.Int,
  failed: Schema.Int,
  pending: Schema.Int.annotate({ description: "Queued, sending or retrying" }),
  success_rate: Schema.NullOr(Schema.Number).annotate({
    description: "delivered / (delivered + failed), 0 to 1; null when none finished"
  }),
  duration_ms_p50: Schema.NullOr(Schema.Number).annotate({
    description: "Median duration of the window's attempts; null without attempts"
  }),
  duration_ms_p95: Schema.NullOr(Schema.Number)
})

export const RotateSecret = Schema.Struct({
  overlap_seconds: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 7 * 24 * 3600 })).annotate({
      description: "How long the secret signing until now keeps signing beside the new one (0 to 604800, default 86400)"
    })
  ),
  expire_previous: Schema.optionalKey(
    Schema.Literals(["latest", "all"]).annotate({
      description: "Which earlier secrets the overlap ends. `latest` (default): only the one signing until now; " +
        "older ones still in the overlap of an earlier rotation keep the end that rotation announced, and a rotation " +
        "after which more than `SVC_WEBHOOK_MAX_SIGNING_SECRETS` secrets would sign is refused (409 `LIMIT_REACHED`; " +
        "with `overlap_seconds: 0` the one signing until now ends at once, so it is taken at the cap). " +
        "`all`: every earlier secret ends within the overlap (none is lengthened), and the oldest beyond " +
        "`SVC_WEBHOOK_MAX_SIGNING_SECRETS` end at once; with `overlap_seconds: 0` every earlier secret ends now " +
        "(a leaked secret), whatever signs."
    })
  )
})

export const NotificationSettings = Schema.Struct({
  reviewer_email: Schema.NullOr(Schema.String).annotate({
    description: "The reviewer address that receives approval requests and deadline notices; null: none"
  }),
  reviewer_email_status: Schema.NullOr(Schema.Literals(["pending", "confirmed"])).annotate({
    description:
      "`pending`: a confirmation mail went to the address and it receives no approval mail until its link is opened and confirmed; `confirmed`: it receives them. Null without an address."
  }),
  email_notifier: Schema.Boolean.annotate({
    description: "Whether reviewer email is active: `SVC_SMTP_URL` is set and the reviewer address is confirmed"
  })
})

export const UpdateNotificationSettings = Schema.Struct({
  reviewer_email: Schema.NullOr(EmailAddress)
})
