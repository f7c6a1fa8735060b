/**
 * An endpoint's delivery health over the last 24 hours, a test event and a
 * bulk replay of failed deliveries counted before anything is queued. The
 * success rate is over finished deliveries only (delivered and failed for
 * good), said with its counts; pending deliveries (queued, sending,
 * retrying) are counted apart, so "100 %" never stands alone beside an
 * endpoint whose latest attempts fail.
 */
import { Exit } from "effect"
import { useMemo, useState } from "preact/hooks"
import type { NotificationEndpoint } from "../../../src/api/Notifications.ts"
import { problemOf, SvcApi } from "../api.ts"
import { refresh, useAtomValue, useMutation } from "../atoms.ts"
import { Loaded, type NoticeValue, type RefusalValue, refusalOf, useInterval } from "../ui.tsx"

const testAtom = SvcApi.mutation("notifications", "test")
const replayFailedAtom = SvcApi.mutation("notifications", "replayFailed")

const replayWindows = [
  { hours: 1, label: "the last hour" },
  { hours: 6, label: "the last 6 hours" },
  { hours: 24, label: "the last 24 hours" },
  { hours: 72, label: "the last 3 days" }
]

const percent = (rate: number | null) => rate === null ? "—" : `${(rate * 100).toFixed(rate === 1 || rate === 0 ? 0 : 1)} %`
const millis = (value: number | null) => value === null ? "—" : `${value} ms`

/** Delivery statistics of the last 24 hours, a test event, and a bulk replay counted before it queues. */
export const EndpointHealth = (
  { endpoint, onNotice, onRefusal }: {
    endpoint: NotificationEndpoint
    onNotice: (notice: NoticeValue) => void
    /** A refused control of this endpoint, said in its card. */
    onRefusal: (refusal: RefusalValue) => void
  }
) => {
  const statsAtom = useMemo(() => SvcApi.query("notifications", "stats", { params: { id: endpoint.id }, reactivityKeys: ["stats"] }), [endpoint.id])
  const stats = useAtomValue(statsAtom)
  useInterval(() => refresh(statsAtom), 5000)
  const test = useMutation(testAtom)
  const replayFailed = useMutation(replayFailedAtom)
  const [hours, setHours] = useState(24)
  const [counted, setCounted] = useState<{ since: string; matched: number; fits: number } | undefined>(undefined)
  const statsId = `stats-${endpoint.id}`
  return (
    <div class="health">
      <h4 id={statsId}>Last 24 hours</h4>
      <Loaded result={stats} what="the delivery statistics">
        {(value) => {
          const finished = value.delivered + value.failed
          const failing = endpoint.failing_since !== undefined || !endpoint.active
          return (
            <>
              <dl class="facts" aria-labelledby={statsId}>
                <div><dt>Delivered</dt><dd>{value.delivered}</dd></div>
                <div><dt>Failed for good</dt><dd>{value.failed}</dd></div>
                <div>
                  <dt>Success rate of finished</dt>
                  <dd>{finished === 0 ? "— (none finished)" : `${percent(value.success_rate)} (${value.delivered} of ${finished})`}</dd>
                </div>
                <div><dt>Pending, not in the rate</dt><dd>{value.pending}</dd></div>
                <div><dt>Duration p50</dt><dd>{millis(value.duration_ms_p50)}</dd></div>
                <div><dt>Duration p95</dt><dd>{millis(value.duration_ms_p95)}</dd></div>
              </dl>
              {value.pending > 0 && (
                <p class={failing ? "pending-note warning-text" : "pending-note muted"}>
                  {value.pending} {value.pending === 1 ? "delivery is" : "deliveries are"} not finished yet
                  {failing ? ": the latest attempts failed, so they wait for a retry" : " (queued, sending or waiting for a retry)"}; the rate counts
                  them once they are delivered or fail for good.
                </p>
              )}
            </>
          )
        }}
      </Loaded>
      <div class="actions">
        <button
          type="button"
          disabled={test.busy}
          onClick={async () => {
            const exit = await test.run({ params: { id: endpoint.id }, payload: {}, reactivityKeys: ["deliveries"] })
            if (Exit.isSuccess(exit)) {
              onNotice({
                tone: "success",
                text: exit.value.status === undefined
                  ? `Test event delivered to ${endpoint.url_hint}: the broker acknowledged it in ${exit.value.duration_ms} ms.`
                  : `Test event delivered to ${endpoint.url_hint}: the receiver answered ${exit.value.status} in ${exit.value.duration_ms} ms.`
              })
              return
            }
            const problem = problemOf(exit.cause)
            const error = problem.error ?? {}
            const what = `The test event to ${endpoint.url_hint}`
            onRefusal(
              problem.code === "DELIVERY_FAILED"
                ? { what, why: `Test event not accepted by ${endpoint.url_hint}: ${String(error.error ?? problem.detail)}.` }
                : problem.code === "RATE_LIMITED"
                ? { what, why: `Too many test events for this endpoint; try again in ${String(error.retry_after_seconds)} s.` }
                : refusalOf(what, problem)
            )
          }}
        >
          Send test event
        </button>
        <label class="inline">
          Replay failed since
          <select value={hours} onChange={(event) => {
            setHours(Number(event.currentTarget.value))
            setCounted(undefined)
          }}>
            {replayWindows.map((choice) => <option key={choice.hours} value={choice.hours}>{choice.label}</option>)}
          </select>
        </label>
        <button
          type="button"
          disabled={replayFailed.busy}
          onClick={async () => {
            const since = new Date(Date.now() - hours * 3600_000).toISOString()
            const exit = await replayFailed.run({ params: { id: endpoint.id }, payload: { since, dry_run: true } })
            if (Exit.isSuccess(exit)) setCounted({ since, matched: exit.value.matched, fits: exit.value.queued })
            else onRefusal(refusalOf(`Counting the failed deliveries of ${endpoint.url_hint}`, problemOf(exit.cause)))
          }}
        >
          Count failed
        </button>
      </div>
      {counted && (
        <div class="notice info" role="status">
          <p>
            {counted.matched === 0
              ? "No failed deliveries in that window."
              : `${counted.matched} failed ${counted.matched === 1 ? "delivery" : "deliveries"} since ${new Date(counted.since).toLocaleString()}; ${counted.fits} fit the queue now.`}
          </p>
          {counted.matched > 0 && (
            <div class="actions">
              <button
                type="button"
                class="primary"
                disabled={replayFailed.busy || counted.fits === 0}
                onClick={async () => {
                  const exit = await replayFailed.run({ params: { id: endpoint.id }, payload: { since: counted.since }, reactivityKeys: ["deliveries", "stats"] })
                  setCounted(undefined)
                  if (Exit.isSuccess(exit)) {
                    const { queued, not_queued } = exit.value
                    onNotice({
                      tone: not_queued > 0 ? "warning" : "success",
                      text: `${queued} failed ${queued === 1 ? "delivery" : "deliveries"} queued again${not_queued > 0 ? `; ${not_queued} did not fit the queue and stay failed (replay again once it drains)` : ""}.`
                    })
                  } else onRefusal(refusalOf(`Replaying the failed deliveries of ${endpoint.url_hint}`, problemOf(exit.cause)))
                }}
              >
                Replay these {counted.fits}
              </button>
              <button type="button" onClick={() => setCounted(undefined)}>Cancel</button>
            </div>
          )}
        </div>
      )}
    </div>
  )
}

