/**
 * An endpoint's delivery log on the "Webhooks" screen: searched by the
 * API's filters (status, event type, HTTP status, approval, creation time;
 * kept in the URL, so a search can be shared as a link), newest first, a
 * page at a time, with replay of a failed delivery.
 */
import { Exit } from "effect"
import { useMemo, useState } from "preact/hooks"
import { EventTypes, type NotificationDelivery, type NotificationEndpoint } from "../../../src/api/Notifications.ts"
import { type Problem, problemOf, SvcApi } from "../api.ts"
import { refresh, useAtomValue, useMutation } from "../atoms.ts"
import { setQuery, useLocation } from "../router.ts"
import { Loaded, type NoticeValue, Refusal, refusalOf, type RefusalValue, Time, useInterval } from "../ui.tsx"

const replayAtom = SvcApi.mutation("notifications", "replay")

const deliveryStatuses = ["all", "failed", "delivered", "retrying", "queued", "sending"] as const

const replayProblem = (what: string, problem: Problem): RefusalValue => {
  switch (problem.code) {
    case "NOT_REPLAYABLE":
      return { what, why: `Only failed deliveries can be replayed${problem.error?.delivery_status ? `, and this one is ${String(problem.error.delivery_status)}` : ""}.` }
    case "QUEUE_FULL":
      return { what, why: "The endpoint's delivery queue is full: wait until queued deliveries are sent (or fail), then replay again." }
    default:
      return refusalOf(what, problem)
  }
}

/** The delivery filters the URL holds (`?status=failed&status_code=5xx…`), as the API's query. */
const deliveryFilterKeys = ["status", "status_code", "event_type", "approval_id", "created_from", "created_until"] as const

/** The query changes that drop every delivery filter (another endpoint's log starts unfiltered). */
export const noDeliveryFilters: Readonly<Record<string, undefined>> = Object.fromEntries(deliveryFilterKeys.map((key) => [key, undefined]))

/** `2026-11-23T08:00` (a `datetime-local` value, the browser's zone) → RFC 3339 in UTC; the reverse for display. */
const toInstant = (local: string) => (local === "" ? undefined : new Date(local).toISOString())
const toLocal = (iso: string | null) => {
  if (iso === null) return ""
  const at = new Date(iso)
  return Number.isNaN(at.getTime()) ? "" : new Date(at.getTime() - at.getTimezoneOffset() * 60_000).toISOString().slice(0, 16)
}

export const Deliveries = ({ endpoint, onNotice }: { endpoint: NotificationEndpoint; onNotice: (notice: NoticeValue) => void }) => {
  const { query } = useLocation()
  const status = query.get("status") ?? "all"
  const filters = Object.fromEntries(
    deliveryFilterKeys.flatMap((key) => (query.get(key) ? [[key, query.get(key)!]] : []))
  ) as Record<(typeof deliveryFilterKeys)[number], string>
  const filtersKey = JSON.stringify(filters)
  // Older pages: the cursors of the pages shown before this one (empty: the newest page).
  const [cursors, setCursors] = useState<ReadonlyArray<string>>([])
  const [shownFor, setShownFor] = useState(filtersKey)
  if (shownFor !== filtersKey) {
    setShownFor(filtersKey)
    setCursors([])
  }
  const cursor = cursors.at(-1)
  const deliveriesAtom = useMemo(
    () =>
      SvcApi.query("notifications", "deliveries", {
        params: { id: endpoint.id },
        query: { ...(filters as any), ...(cursor === undefined ? {} : { cursor }) },
        reactivityKeys: ["deliveries"]
      }),
    [endpoint.id, filtersKey, cursor]
  )
  const deliveries = useAtomValue(deliveriesAtom)
  useInterval(() => refresh(deliveriesAtom), 3000)
  const replay = useMutation(replayAtom)
  /** The latest refused Replay, said in the row of the delivery it names. */
  const [refused, setRefused] = useState<{ readonly id: string; readonly refusal: RefusalValue } | undefined>(undefined)
  const captionId = `deliveries-${endpoint.id}`
  const filtered = Object.keys(filters).length > 0
  return (
    <div class="deliveries">
      <h4 id={captionId}>Deliveries{cursors.length === 0 ? " (newest first)" : ` (page ${cursors.length + 1})`}</h4>
      <form
        class="filters"
        aria-label="Delivery filters"
        onSubmit={(event) => {
          event.preventDefault()
          const form = new FormData(event.currentTarget)
          const text = (name: string) => String(form.get(name) ?? "").trim()
          setQuery({
            status_code: text("status_code"),
            approval_id: text("approval_id"),
            created_from: toInstant(text("created_from")),
            created_until: toInstant(text("created_until"))
          })
        }}
      >
        <label>
          Status
          <select value={status} onChange={(event) => setQuery({ status: event.currentTarget.value === "all" ? undefined : event.currentTarget.value })}>
            {deliveryStatuses.map((value) => <option key={value} value={value}>{value}</option>)}
          </select>
        </label>
        <label>
          Event type
          <select
            value={filters.event_type ?? "all"}
            onChange={(event) => setQuery({ event_type: event.currentTarget.value === "all" ? undefined : event.currentTarget.value })}
          >
            {["all", ...EventTypes].map((value) => <option key={value} value={value}>{value}</option>)}
          </select>
        </label>
        <label>
          HTTP status
          <input name="status_code" key={`code-${filters.status_code ?? ""}`} defaultValue={filters.status_code ?? ""} placeholder="5xx or 503" size={8} />
        </label>
        <label>
          Approval id
          <input name="approval_id" key={`approval-${filters.approval_id ?? ""}`} defaultValue={filters.approval_id ?? ""} size={20} />
        </label>
        <label>
          Created from
          <input type="datetime-local" name="created_from" key={`from-${filters.created_from ?? ""}`} defaultValue={toLocal(filters.created_from ?? null)} />
        </label>
        <label>
          Created before
          <input type="datetime-local" name="created_until" key={`until-${filters.created_until ?? ""}`} defaultValue={toLocal(filters.created_until ?? null)} />
        </label>
        <div class="actions">
          <button type="submit">Search</button>
          {filtered && (
            <button type="button" onClick={() => setQuery(noDeliveryFilters)}>
              Clear filters
            </button>
          )}
        </div>
      </form>
      <Loaded result={deliveries} what="deliveries">
        {(value) => {
          const rows = value.deliveries
          const pages = (
            <div class="actions pages">
              {cursors.length > 0 && <button type="button" onClick={() => setCursors([])}>Newest</button>}
              {value.next_cursor !== null && (
                <button type="button" onClick={() => setCursors([...cursors, value.next_cursor!])}>Older</button>
              )}
            </div>
          )
          return rows.length === 0
            ? (
              <>
                <p class="empty">
                  {value.next_cursor !== null
                    ? "None among the deliveries searched so far; older ones may match."
                    : `No deliveries${filtered ? " match these filters" : cursors.length > 0 ? " older than these" : " yet"}.`}
                </p>
                {pages}
              </>
            )
            : (
              <>
              <div class="table-wrap">
                <table aria-labelledby={captionId}>
                  <thead>
                    <tr><th scope="col">Event</th><th scope="col">Status</th><th scope="col">HTTP</th><th scope="col">Attempts</th><th scope="col">Replays</th><th scope="col">Last error</th><th scope="col">Created</th><th scope="col">Finished</th><th scope="col"><span class="sr-only">Action</span></th></tr>
                  </thead>
                  <tbody>
                    {rows.map((delivery: NotificationDelivery) => (
                      <tr key={delivery.id}>
                        <td data-label="Event">{delivery.label ?? delivery.event_id}</td>
                        <td data-label="Status"><span class={`badge ${delivery.status}`}>{delivery.status}</span></td>
                        <td data-label="HTTP">{delivery.status_code ?? "—"}</td>
                        <td data-label="Attempts">{delivery.attempts}</td>
                        <td data-label="Replays">{delivery.replays}</td>
                        <td data-label="Last error">{delivery.last_error ?? "—"}</td>
                        <td data-label="Created"><Time iso={delivery.created_at} /></td>
                        <td data-label="Finished"><Time iso={delivery.finished_at} /></td>
                        <td class="row-action">
                          {delivery.status === "failed" && !(delivery.label ?? "").startsWith("test ") && (
                            <button
                              type="button"
                              disabled={replay.busy}
                              aria-label={`Replay ${delivery.label ?? delivery.event_id}`}
                              onClick={async () => {
                                setRefused(undefined)
                                const exit = await replay.run({ params: { id: endpoint.id, delivery: delivery.id }, reactivityKeys: ["deliveries"] })
                                if (Exit.isSuccess(exit)) {
                                  const cooling = endpoint.cooldown_until !== undefined && Date.parse(endpoint.cooldown_until) > Date.now()
                                  onNotice({
                                    tone: "success",
                                    text: cooling
                                      ? `Replay queued. The endpoint is cooling down after failed attempts, so it is sent after ${new Date(endpoint.cooldown_until!).toLocaleTimeString()}.`
                                      : "Replay queued: it is sent with the same event id shortly."
                                  })
                                } else {
                                  const what = `Replay of ${delivery.label ?? delivery.event_id}`
                                  setRefused({ id: delivery.id, refusal: replayProblem(what, problemOf(exit.cause)) })
                                }
                              }}
                            >
                              Replay
                            </button>
                          )}
                          <Refusal
                            id={`refusal-${delivery.id}`}
                            refusal={refused?.id === delivery.id ? refused.refusal : undefined}
                            onDismiss={() => setRefused(undefined)}
                          />
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
              {pages}
              </>
            )
        }}
      </Loaded>
    </div>
  )
}

