/**
 * `endpoint.certificate_expiring`: an active endpoint's client certificate
 * (`tls_client_certificate`) expires within `SVC_WEBHOOK_CERTIFICATE_NOTICE`.
 * One notice per certificate: the statement that writes the event marks
 * the endpoint (`certificate_notice_at`), so whichever process claims the
 * row writes it, once; a new certificate clears the mark.
 *
 * Checked for one endpoint right after a certificate is set (one already
 * near its end is told at once), and for every endpoint every
 * `CHECK_EVERY` by a background loop in each process (an inactive endpoint
 * is told once it is reactivated and the loop runs).
 */
import { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Layer, Schedule } from "effect"
import { Topics, Wakeups } from "../../database/Wakeups.ts"
import { endpointEventInsert } from "../../outbox/Outbox.ts"
import { SvcConfig } from "../../platform/Config.ts"
import { forkSupervised } from "../../platform/Supervised.ts"

/** How often each process looks for certificates near their expiry. */
const CHECK_EVERY = Duration.minutes(10)

/** Writes the notices due (of endpoint `id` only, when given); answers how many. */
export const writeCertificateNotices = (sql: PgClient.PgClient, notice: Duration.Duration, id?: string) => {
  const seconds = Duration.toMillis(notice) / 1000
  const reason = `the client certificate (tls_client_certificate) expires within ${Duration.format(notice)}; ` +
    "PATCH the endpoint with a new one"
  return sql`
    WITH changed AS (
      UPDATE notification_endpoints SET certificate_notice_at = now()
      WHERE certificate_notice_at IS NULL AND active
        AND certificate_expires_at <= now() + make_interval(secs => ${seconds})
        ${id === undefined ? sql`` : sql`AND id = ${id}`}
      RETURNING id, org_id, url_hint, certificate_expires_at
    )
    ${
    endpointEventInsert(sql, {
      type: "endpoint.certificate_expiring",
      stamp: "certificate_expires_at",
      active: true,
      reason
    })
  }
  `.pipe(Effect.map((rows) => rows.length), Effect.orDie)
}

/** The loop of every process: notices due, every `CHECK_EVERY`; the dispatcher is woken when it wrote some. */
export const CertificateNoticesLive = Layer.effectDiscard(Effect.gen(function*() {
  const sql = yield* PgClient.PgClient
  const config = yield* SvcConfig
  const wakeups = yield* Wakeups
  const round = writeCertificateNotices(sql, config.webhookCertificateNotice).pipe(
    Effect.tap((written) => written > 0 ? wakeups.signal(Topics.events) : Effect.void),
    Effect.andThen(Effect.sleep(CHECK_EVERY)),
    Effect.withTracerEnabled(false)
  )
  yield* forkSupervised({ name: "certificate notices", round, retry: Schedule.spaced(CHECK_EVERY) })
}))
