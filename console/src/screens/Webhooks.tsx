/**
 * "Webhooks": notification endpoints (create, edit events, rotate the
 * signing secret, delete), each one's delivery log with replay, and the
 * reviewer email address. Secrets are shown once, when the API returns
 * them, and kept nowhere.
 */
import { Exit } from "effect"
import { useMemo, useState } from "preact/hooks"
import { ApprovalEventTypes } from "../../../src/api/Approvals.ts"
import type { NotificationDelivery, NotificationEndpoint } from "../../../src/api/Notifications.ts"
import { type Problem, problemOf, SvcApi } from "../api.ts"
import { refresh, useAtomValue, useMutation } from "../atoms.ts"
import { setQuery, useLocation } from "../router.ts"
import { Confirm, describeProblem, Loaded, Notice, type NoticeValue, SecretOnce, Time, useInterval } from "../ui.tsx"

const endpointsAtom = SvcApi.query("notifications", "list", { reactivityKeys: ["endpoints"] })
const settingsAtom = SvcApi.query("notifications", "getSettings", { reactivityKeys: ["settings"] })
const createAtom = SvcApi.mutation("notifications", "create")
const updateAtom = SvcApi.mutation("notifications", "update")
const removeAtom = SvcApi.mutation("notifications", "remove")
const rotateAtom = SvcApi.mutation("notifications", "rotateSecret")
const replayAtom = SvcApi.mutation("notifications", "replay")
const saveSettingsAtom = SvcApi.mutation("notifications", "updateSettings")

const overlaps = [
  { seconds: 0, label: "None (it stops now)" },
  { seconds: 3600, label: "1 hour" },
  { seconds: 86400, label: "24 hours (default)" },
  { seconds: 604800, label: "7 days" }
]

const deliveryStatuses = ["all", "failed", "delivered", "retrying", "queued", "sending"] as const

const replayProblem = (problem: Problem): string => {
  switch (problem.code) {
    case "NOT_REPLAYABLE":
      return `This delivery cannot be replayed: only failed deliveries can be${problem.error?.delivery_status ? ` (it is ${String(problem.error.delivery_status)})` : ""}.`
    case "QUEUE_FULL":
      return "The endpoint's delivery queue is full: wait until queued deliveries are sent (or fail), then replay again."
    default:
      return `Could not replay: ${describeProblem(problem)}`
  }
}

const EventChoices = (
  { legend, selected, onChange }: { legend: string; selected: ReadonlySet<string>; onChange: (next: ReadonlySet<string>) => void }
) => (
  <fieldset>
    <legend>{legend}</legend>
    {ApprovalEventTypes.map((type) => (
      <label class="inline" key={type}>
        <input
          type="checkbox"
          checked={selected.has(type)}
          onChange={(event) => {
            const next = new Set(selected)
            if (event.currentTarget.checked) next.add(type)
            else next.delete(type)
            onChange(next)
          }}
        />
        {type}
      </label>
    ))}
  </fieldset>
)

export const Webhooks = () => {
  const endpoints = useAtomValue(endpointsAtom)
  const { query } = useLocation()
  const [notice, setNotice] = useState<NoticeValue | undefined>(undefined)
  const [secret, setSecret] = useState<{ label: string; value: string } | undefined>(undefined)
  const selected = query.get("endpoint") ?? undefined
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title" tabIndex={-1}>Webhooks</h1>
      <Notice notice={notice} onClose={() => setNotice(undefined)} />
      {secret && <SecretOnce label={secret.label} secret={secret.value} onDone={() => setSecret(undefined)} />}
      <CreateEndpoint
        onCreated={(value) => {
          setSecret({ label: "Signing secret of the new endpoint", value })
          setNotice({ tone: "success", text: "Endpoint created." })
        }}
        onProblem={(text) => setNotice({ tone: "error", text })}
      />
      <h2>Endpoints</h2>
      <Loaded result={endpoints} what="endpoints">
        {(value) =>
          value.endpoints.length === 0
            ? <p class="empty">No endpoints yet.</p>
            : (
              <ul class="cards" aria-label="Endpoints">
                {value.endpoints.map((endpoint) => (
                  <EndpointCard
                    key={endpoint.id}
                    endpoint={endpoint}
                    showDeliveries={selected === endpoint.id}
                    onNotice={setNotice}
                    onSecret={(value) => setSecret({ label: `New signing secret of ${endpoint.url_hint}`, value })}
                  />
                ))}
              </ul>
            )}
      </Loaded>
      <ReviewerEmail onNotice={setNotice} />
    </section>
  )
}

const CreateEndpoint = ({ onCreated, onProblem }: { onCreated: (secret: string) => void; onProblem: (text: string) => void }) => {
  const [url, setUrl] = useState("")
  const [events, setEvents] = useState<ReadonlySet<string>>(new Set(ApprovalEventTypes))
  const [error, setError] = useState<string | undefined>(undefined)
  const create = useMutation(createAtom)
  return (
    <form
      class="form stack card"
      aria-labelledby="create-endpoint"
      onSubmit={async (event) => {
        event.preventDefault()
        setError(undefined)
        const exit = await create.run({ payload: { url, events: ApprovalEventTypes.filter((type) => events.has(type)) }, reactivityKeys: ["endpoints"] })
        if (Exit.isSuccess(exit)) {
          setUrl("")
          setEvents(new Set(ApprovalEventTypes))
          return onCreated(exit.value.secret)
        }
        const problem = problemOf(exit.cause)
        if (problem.code === "INVALID_URL" || problem.code === "INVALID_WEBHOOK_EVENTS") setError(problem.detail ?? problem.title)
        else onProblem(`Could not create the endpoint: ${describeProblem(problem)}`)
      }}
    >
      <h2 id="create-endpoint">New endpoint</h2>
      <label>
        Receiver URL (HTTPS)
        <input
          type="url"
          required
          value={url}
          placeholder="https://hooks.example.com/svc"
          aria-invalid={error ? "true" : undefined}
          aria-describedby={error ? "create-endpoint-error" : undefined}
          onInput={(event) => setUrl(event.currentTarget.value)}
        />
      </label>
      {error && <p id="create-endpoint-error" class="field-error">{error}</p>}
      <EventChoices legend="Events to send" selected={events} onChange={setEvents} />
      <div class="actions"><button type="submit" class="primary" disabled={create.busy || events.size === 0}>Create endpoint</button></div>
    </form>
  )
}

const EndpointCard = (
  { endpoint, showDeliveries, onNotice, onSecret }: {
    endpoint: NotificationEndpoint
    showDeliveries: boolean
    onNotice: (notice: NoticeValue) => void
    onSecret: (secret: string) => void
  }
) => {
  const [editing, setEditing] = useState(false)
  const [events, setEvents] = useState<ReadonlySet<string>>(new Set(endpoint.events))
  const [overlap, setOverlap] = useState(86400)
  const [confirming, setConfirming] = useState(false)
  const update = useMutation(updateAtom)
  const remove = useMutation(removeAtom)
  const rotate = useMutation(rotateAtom)
  const titleId = `endpoint-${endpoint.id}`
  const cooling = endpoint.cooldown_until !== undefined && Date.parse(endpoint.cooldown_until) > Date.now()
  return (
    <li class="card" aria-labelledby={titleId}>
      <h3 id={titleId}>{endpoint.url_hint}</h3>
      <dl class="facts">
        <div>
          <dt>State</dt>
          <dd>
            <span class={`badge ${endpoint.active ? "active" : "inactive"}`}>{endpoint.active ? "active" : "inactive"}</span>
            {!endpoint.active && endpoint.deactivated_reason && <> — {endpoint.deactivated_reason} (saving its events reactivates it)</>}
          </dd>
        </div>
        {cooling && <div><dt>Cooling down until</dt><dd><Time iso={endpoint.cooldown_until} /> — nothing is sent before then, replays included</dd></div>}
        <div><dt>Events</dt><dd>{endpoint.events.join(", ")}</dd></div>
        <div><dt>Created</dt><dd><Time iso={endpoint.created_at} /> by {endpoint.created_by}</dd></div>
      </dl>
      {editing
        ? (
          <form
            onSubmit={async (event) => {
              event.preventDefault()
              const exit = await update.run({ params: { id: endpoint.id }, payload: { events: ApprovalEventTypes.filter((type) => events.has(type)) }, reactivityKeys: ["endpoints"] })
              if (Exit.isSuccess(exit)) {
                setEditing(false)
                onNotice({ tone: "success", text: `Events of ${endpoint.url_hint} saved.` })
              } else onNotice({ tone: "error", text: `Could not save the events: ${describeProblem(problemOf(exit.cause))}` })
            }}
          >
            <EventChoices legend={`Events for ${endpoint.url_hint}`} selected={events} onChange={setEvents} />
            <div class="actions">
              <button type="submit" class="primary" disabled={update.busy || events.size === 0}>Save events</button>
              <button type="button" onClick={() => setEditing(false)}>Cancel</button>
            </div>
          </form>
        )
        : (
          <div class="actions">
            <button type="button" onClick={() => setEditing(true)}>Edit events</button>
            <label class="inline">
              Old secret keeps working
              <select value={overlap} onChange={(event) => setOverlap(Number(event.currentTarget.value))}>
                {overlaps.map((choice) => <option key={choice.seconds} value={choice.seconds}>{choice.label}</option>)}
              </select>
            </label>
            <button
              type="button"
              disabled={rotate.busy}
              onClick={async () => {
                const exit = await rotate.run({ params: { id: endpoint.id }, payload: { overlap_seconds: overlap }, reactivityKeys: ["endpoints"] })
                if (Exit.isSuccess(exit)) {
                  onSecret(exit.value.secret)
                  onNotice({ tone: "success", text: `Secret rotated. Deliveries are signed with the previous secret too until ${new Date(exit.value.previous_secret_expires_at).toLocaleString()}.` })
                } else onNotice({ tone: "error", text: `Could not rotate the secret: ${describeProblem(problemOf(exit.cause))}` })
              }}
            >
              Rotate secret
            </button>
            <button type="button" onClick={() => setQuery({ endpoint: showDeliveries ? undefined : endpoint.id, status: undefined })} aria-expanded={showDeliveries}>
              {showDeliveries ? "Hide deliveries" : "Deliveries"}
            </button>
            <button type="button" class="danger" onClick={() => setConfirming(true)}>Delete</button>
          </div>
        )}
      <Confirm
        open={confirming}
        title="Delete this endpoint?"
        confirmLabel="Delete endpoint"
        busy={remove.busy}
        onCancel={() => setConfirming(false)}
        onConfirm={async () => {
          const exit = await remove.run({ params: { id: endpoint.id }, reactivityKeys: ["endpoints"] })
          setConfirming(false)
          if (Exit.isSuccess(exit)) onNotice({ tone: "success", text: `Endpoint ${endpoint.url_hint} deleted.` })
          else onNotice({ tone: "error", text: `Could not delete: ${describeProblem(problemOf(exit.cause))}` })
        }}
      >
        <p><strong>{endpoint.url_hint}</strong> stops receiving events at once. This cannot be undone.</p>
      </Confirm>
      {showDeliveries && <Deliveries endpoint={endpoint} onNotice={onNotice} />}
    </li>
  )
}

const Deliveries = ({ endpoint, onNotice }: { endpoint: NotificationEndpoint; onNotice: (notice: NoticeValue) => void }) => {
  const { query } = useLocation()
  const status = query.get("status") ?? "all"
  const deliveriesAtom = useMemo(() => SvcApi.query("notifications", "deliveries", { params: { id: endpoint.id }, reactivityKeys: ["deliveries"] }), [endpoint.id])
  const deliveries = useAtomValue(deliveriesAtom)
  useInterval(() => refresh(deliveriesAtom), 3000)
  const replay = useMutation(replayAtom)
  const captionId = `deliveries-${endpoint.id}`
  return (
    <div class="deliveries">
      <h4 id={captionId}>Deliveries (latest 50)</h4>
      <label>
        Status
        <select value={status} onChange={(event) => setQuery({ status: event.currentTarget.value === "all" ? undefined : event.currentTarget.value })}>
          {deliveryStatuses.map((value) => <option key={value} value={value}>{value}</option>)}
        </select>
      </label>
      <Loaded result={deliveries} what="deliveries">
        {(value) => {
          const rows = value.deliveries.filter((delivery) => status === "all" || delivery.status === status)
          return rows.length === 0
            ? <p class="empty">No deliveries{status === "all" ? " yet" : ` with status ${status}`}.</p>
            : (
              <div class="table-wrap">
                <table aria-labelledby={captionId}>
                  <thead>
                    <tr><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Replays</th><th scope="col">Last error</th><th scope="col">Created</th><th scope="col">Finished</th><th scope="col"><span class="sr-only">Action</span></th></tr>
                  </thead>
                  <tbody>
                    {rows.map((delivery: NotificationDelivery) => (
                      <tr key={delivery.id}>
                        <td>{delivery.label ?? delivery.event_id}</td>
                        <td><span class={`badge ${delivery.status}`}>{delivery.status}</span></td>
                        <td>{delivery.attempts}</td>
                        <td>{delivery.replays}</td>
                        <td>{delivery.last_error ?? "—"}</td>
                        <td><Time iso={delivery.created_at} /></td>
                        <td><Time iso={delivery.finished_at} /></td>
                        <td>
                          {delivery.status === "failed" && (
                            <button
                              type="button"
                              disabled={replay.busy}
                              aria-label={`Replay ${delivery.label ?? delivery.event_id}`}
                              onClick={async () => {
                                const exit = await replay.run({ params: { id: endpoint.id, delivery: delivery.id }, reactivityKeys: ["deliveries"] })
                                if (Exit.isSuccess(exit)) {
                                  const cooling = endpoint.cooldown_until !== undefined && Date.parse(endpoint.cooldown_until) > Date.now()
                                  onNotice({
                                    tone: "success",
                                    text: cooling
                                      ? `Replay queued. The endpoint is cooling down after failed attempts, so it is sent after ${new Date(endpoint.cooldown_until!).toLocaleTimeString()}.`
                                      : "Replay queued: it is sent with the same event id shortly."
                                  })
                                } else onNotice({ tone: "warning", text: replayProblem(problemOf(exit.cause)) })
                              }}
                            >
                              Replay
                            </button>
                          )}
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )
        }}
      </Loaded>
    </div>
  )
}

const ReviewerEmail = ({ onNotice }: { onNotice: (notice: NoticeValue) => void }) => {
  const settings = useAtomValue(settingsAtom)
  const save = useMutation(saveSettingsAtom)
  const [draft, setDraft] = useState<string | undefined>(undefined)
  return (
    <section class="card" aria-labelledby="reviewer-email">
      <h2 id="reviewer-email">Reviewer email</h2>
      <Loaded result={settings} what="the notification settings">
        {(value) => (
          <form
            class="form"
            onSubmit={async (event) => {
              event.preventDefault()
              const address = (draft ?? value.reviewer_email ?? "").trim()
              const exit = await save.run({ payload: { reviewer_email: address === "" ? null : address }, reactivityKeys: ["settings"] })
              if (Exit.isSuccess(exit)) {
                setDraft(undefined)
                onNotice({
                  tone: "success",
                  text: exit.value.reviewer_email === null
                    ? "Reviewer email cleared."
                    : `Reviewer email set to ${exit.value.reviewer_email}.${exit.value.email_notifier ? "" : " Email is not sent until the service has an SMTP server (SVC_SMTP_URL)."}`
                })
              } else onNotice({ tone: "error", text: `Could not save the reviewer email: ${describeProblem(problemOf(exit.cause))}` })
            }}
          >
            <label>
              Address that gets approval requests and deadline notices
              <input type="email" value={draft ?? value.reviewer_email ?? ""} onInput={(event) => setDraft(event.currentTarget.value)} placeholder="reviewers@example.com" />
            </label>
            <button type="submit" disabled={save.busy}>Save email</button>
            <p class="muted">{value.email_notifier ? "Email is active." : "Email is off (no address, or no SMTP server configured)."}</p>
          </form>
        )}
      </Loaded>
    </section>
  )
}
