/**
 * "Webhooks": notification endpoints (create, edit events, action class
 * filters, custom headers and rate limit, rotate the signing secret, delete), each one's health over the
 * last 24 hours with a banner while it is disabled or failing, a test
 * event, a bulk replay of failed deliveries (counted before anything is
 * queued), its delivery log with replay, and the reviewer email address.
 * Secrets are shown once, when the API returns them, and kept nowhere.
 */
import { Exit } from "effect"
import { useState } from "preact/hooks"
import { ApprovalEventTypes } from "../../../src/api/Approvals.ts"
import { CreateEndpoint as CreateEndpointPayload, EndpointEventTypes, type NotificationEndpoint, UpdateEndpoint } from "../../../src/api/Notifications.ts"
import { problemOf, SvcApi } from "../api.ts"
import { useAtomValue, useMutation } from "../atoms.ts"
import { setQuery, useLocation } from "../router.ts"
import { refusedHeaders } from "../header-rules.ts"
import { actorName, useKeyNames } from "../key-names.ts"
import { Confirm, Loaded, Notice, type NoticeValue, Refusal, refusalOf, type RefusalValue, SecretOnce, Time } from "../ui.tsx"
import { EndpointHealth } from "./EndpointHealth.tsx"
import { ReviewerEmail } from "./ReviewerEmail.tsx"
import { Deliveries, noDeliveryFilters } from "./Deliveries.tsx"
import { type HeaderRow, HeaderRows, headersPayload, RateLimitField, ratePayload, rateText } from "./EndpointLimits.tsx"
import { type AuthDraft, AuthenticationFields, authPayload, authText, emptyAuth } from "./EndpointAuthentication.tsx"

const endpointsAtom = SvcApi.query("notifications", "list", { reactivityKeys: ["endpoints"] })
const createAtom = SvcApi.mutation("notifications", "create")
const updateAtom = SvcApi.mutation("notifications", "update")
const removeAtom = SvcApi.mutation("notifications", "remove")
const rotateAtom = SvcApi.mutation("notifications", "rotateSecret")

/** Every event type an endpoint can subscribe to, approval events first. */
const allEventTypes: ReadonlyArray<string> = [...ApprovalEventTypes, ...EndpointEventTypes]

/** `payments.*, email.send` → the API's list; empty → null (every action class). */
const parseActionClasses = (text: string): ReadonlyArray<string> | null => {
  const entries = text.split(/[\s,]+/).map((entry) => entry.trim()).filter((entry) => entry.length > 0)
  return entries.length === 0 ? null : entries
}

const overlaps = [
  { seconds: 0, label: "None (it stops now; older ones keep their end)" },
  { seconds: 3600, label: "1 hour" },
  { seconds: 86400, label: "24 hours (default)" },
  { seconds: 604800, label: "7 days" }
]

const EventChoices = (
  { legend, selected, onChange, types = ApprovalEventTypes }: {
    legend: string
    selected: ReadonlySet<string>
    onChange: (next: ReadonlySet<string>) => void
    types?: ReadonlyArray<string>
  }
) => (
  <fieldset>
    <legend>{legend}</legend>
    {types.map((type) => (
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
      <h2 id="endpoints-title">Endpoints</h2>
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
      <CreateEndpoint
        onCreated={(value) => {
          setSecret({ label: "Signing secret of the new endpoint", value })
          setNotice({ tone: "success", text: "Endpoint created." })
        }}
      />
      <ReviewerEmail />
    </section>
  )
}

/** The contract's rules for a new endpoint's headers, checked at each row before sending. */
const createHeaderRules = CreateEndpointPayload.fields.headers.schema
const updateHeaderRules = UpdateEndpoint.fields.headers.schema

const CreateEndpoint = ({ onCreated }: { onCreated: (secret: string) => void }) => {
  const [url, setUrl] = useState("")
  const [events, setEvents] = useState<ReadonlySet<string>>(new Set(ApprovalEventTypes))
  const [classes, setClasses] = useState("")
  const [headers, setHeaders] = useState<ReadonlyArray<HeaderRow>>([])
  const [rate, setRate] = useState("")
  const [auth, setAuth] = useState<AuthDraft>(emptyAuth)
  const [error, setError] = useState<string | undefined>(undefined)
  const [refused, setRefused] = useState<ReadonlyMap<string, string>>(new Map())
  const [refusal, setRefusal] = useState<RefusalValue | undefined>(undefined)
  const create = useMutation(createAtom)
  return (
    <form
      class="form stack card"
      aria-labelledby="create-endpoint"
      onSubmit={async (event) => {
        event.preventDefault()
        setError(undefined)
        setRefusal(undefined)
        const headerMap = headersPayload(headers)
        const refusedNow = refusedHeaders(createHeaderRules, headerMap)
        setRefused(refusedNow)
        if (refusedNow.size > 0) return
        const exit = await create.run({
          payload: {
            url,
            events: allEventTypes.filter((type) => events.has(type)),
            action_classes: parseActionClasses(classes),
            headers: headerMap,
            rate_limit: ratePayload(rate),
            ...authPayload(auth)
          },
          reactivityKeys: ["endpoints"]
        })
        if (Exit.isSuccess(exit)) {
          setUrl("")
          setAuth(emptyAuth)
          setEvents(new Set(ApprovalEventTypes))
          setClasses("")
          setHeaders([])
          setRate("")
          return onCreated(exit.value.secret)
        }
        const problem = problemOf(exit.cause)
        if (problem.code === "INVALID_URL") setError(problem.detail ?? problem.title)
        setRefusal(refusalOf(`Creating the endpoint ${url.trim() || "(no URL)"}`, problem))
      }}
    >
      <h2 id="create-endpoint">New endpoint</h2>
      <label>
        Destination URL
        <input
          type="url"
          required
          value={url}
          placeholder="https://hooks.example.com/svc"
          aria-invalid={error ? "true" : undefined}
          aria-describedby={error ? "create-endpoint-error create-endpoint-kinds" : "create-endpoint-kinds"}
          onInput={(event) => setUrl(event.currentTarget.value)}
        />
      </label>
      <p id="create-endpoint-kinds" class="muted">
        An HTTPS receiver, or a broker: <code>amqp://</code> or <code>amqps://</code> for RabbitMQ (<code>?exchange=</code>), <code>nats://</code> or <code>tls://</code> for NATS JetStream (<code>?subject=</code>).
        {url.trim() !== "" && <>This one: {destinationKind(url)}.</>}
      </p>
      {error && <p id="create-endpoint-error" class="field-error">{error}</p>}
      <EventChoices legend="Events to send" selected={events} onChange={setEvents} />
      <EventChoices legend="Operational events (about the organization's other endpoints)" selected={events} onChange={setEvents} types={EndpointEventTypes} />
      <label>
        Only these action classes (comma-separated, e.g. payments.*, email.send; empty for all)
        <input type="text" value={classes} placeholder="payments.*, email.send" onInput={(event) => setClasses(event.currentTarget.value)} />
      </label>
      <HeaderRows legend="Custom headers" rows={headers} onChange={setHeaders} refused={refused} idPrefix="create-endpoint" />
      <RateLimitField value={rate} onChange={setRate} />
      <AuthenticationFields legend="Authentication" draft={auth} onChange={setAuth} />
      <div class="actions"><button type="submit" class="primary" disabled={create.busy || events.size === 0}>Create endpoint</button></div>
      <Refusal id="create-endpoint-refusal" refusal={refusal} onDismiss={() => setRefusal(undefined)} />
    </form>
  )
}

/** What kind of destination an endpoint is, from its hint's scheme (the API's `url` forms). */
export const destinationKind = (urlHint: string): string => {
  const scheme = urlHint.slice(0, urlHint.indexOf(":")).toLowerCase()
  return scheme === "amqp" || scheme === "amqps"
    ? "RabbitMQ"
    : scheme === "nats" || scheme === "tls"
    ? "NATS JetStream"
    : "HTTPS"
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
  const [classes, setClasses] = useState((endpoint.action_classes ?? []).join(", "))
  // `undefined`: the headers stay as they are; rows: the whole new set (values must be typed again).
  const [headers, setHeaders] = useState<ReadonlyArray<HeaderRow> | undefined>(undefined)
  const [rate, setRate] = useState(endpoint.rate_limit === null ? "" : String(endpoint.rate_limit))
  // `undefined`: the authentication stays as it is; a draft: the whole new one (secrets typed again).
  const [auth, setAuth] = useState<AuthDraft | undefined>(undefined)
  const [overlap, setOverlap] = useState(86400)
  // A leaked secret: the new one alone signs from now, every earlier one ends (at the cap of secrets in use too).
  const [endAll, setEndAll] = useState(false)
  const [confirming, setConfirming] = useState(false)
  const [refused, setRefused] = useState<ReadonlyMap<string, string>>(new Map())
  /** The latest refusal of this card's controls, said in the card. */
  const [refusal, setRefusal] = useState<RefusalValue | undefined>(undefined)
  const refuse = (what: string) => (problem: Parameters<typeof refusalOf>[1]) => setRefusal(refusalOf(`${what} of ${endpoint.url_hint}`, problem))
  const keyNames = useKeyNames()
  const update = useMutation(updateAtom)
  const remove = useMutation(removeAtom)
  const rotate = useMutation(rotateAtom)
  const titleId = `endpoint-${endpoint.id}`
  const cooling = endpoint.cooldown_until !== undefined && Date.parse(endpoint.cooldown_until) > Date.now()
  return (
    <li class="card" aria-labelledby={titleId}>
      <h3 id={titleId}>{endpoint.url_hint}</h3>
      <HealthBanner endpoint={endpoint} cooling={cooling} />
      <dl class="facts">
        <div>
          <dt>State</dt>
          <dd>
            <span class={`badge ${endpoint.active ? "active" : "inactive"}`}>{endpoint.active ? "active" : "inactive"}</span>
            {!endpoint.active && endpoint.deactivated_reason && <> — {endpoint.deactivated_reason} (saving its events reactivates it)</>}
          </dd>
        </div>
        {cooling && <div><dt>Cooling down until</dt><dd><Time iso={endpoint.cooldown_until} /> — nothing is sent before then, replays included</dd></div>}
        <div><dt>Kind</dt><dd>{destinationKind(endpoint.url_hint)}</dd></div>
        <div><dt>Events</dt><dd>{endpoint.events.join(", ")}</dd></div>
        <div><dt>Action classes</dt><dd>{endpoint.action_classes === null ? "all" : endpoint.action_classes.join(", ")}</dd></div>
        <div><dt>Custom headers</dt><dd>{endpoint.headers.length === 0 ? "none" : `${endpoint.headers.join(", ")} (values hidden)`}</dd></div>
        <div><dt>Rate limit</dt><dd>{rateText(endpoint.rate_limit)}</dd></div>
        <div><dt>Authentication</dt><dd>{authText(endpoint)}</dd></div>
        <div><dt>Created</dt><dd><Time iso={endpoint.created_at} /> by {actorName(endpoint.created_by, keyNames)}</dd></div>
      </dl>
      {editing
        ? (
          <form
            onSubmit={async (event) => {
              event.preventDefault()
              setRefusal(undefined)
              const refusedNow = headers === undefined ? new Map<string, string>() : refusedHeaders(updateHeaderRules, headersPayload(headers))
              setRefused(refusedNow)
              if (refusedNow.size > 0) return
              const exit = await update.run({
                params: { id: endpoint.id },
                payload: {
                  events: allEventTypes.filter((type) => events.has(type)),
                  action_classes: parseActionClasses(classes),
                  rate_limit: ratePayload(rate),
                  ...(headers === undefined ? {} : { headers: headersPayload(headers) }),
                  ...(auth === undefined ? {} : authPayload(auth))
                },
                reactivityKeys: ["endpoints"]
              })
              if (Exit.isSuccess(exit)) {
                setEditing(false)
                setHeaders(undefined)
                setAuth(undefined)
                onNotice({ tone: "success", text: `Events of ${endpoint.url_hint} saved.` })
              } else refuse("Saving the events")(problemOf(exit.cause))
            }}
          >
            <EventChoices legend={`Events for ${endpoint.url_hint}`} selected={events} onChange={setEvents} />
            <EventChoices legend={`Operational events for ${endpoint.url_hint}`} selected={events} onChange={setEvents} types={EndpointEventTypes} />
            <label>
              Only these action classes (comma-separated; empty for all)
              <input type="text" value={classes} onInput={(event) => setClasses(event.currentTarget.value)} />
            </label>
            {headers === undefined
              ? (
                <p>
                  Custom headers: {endpoint.headers.length === 0 ? "none" : endpoint.headers.join(", ")}{" "}
                  <button type="button" onClick={() => setHeaders(endpoint.headers.map((name) => ({ name, value: "" })))}>Replace headers</button>
                </p>
              )
              : (
                <HeaderRows
                  legend={`Custom headers for ${endpoint.url_hint} (replace the whole set; type every value again)`}
                  rows={headers}
                  onChange={setHeaders}
                  refused={refused}
                  idPrefix={titleId}
                />
              )}
            <RateLimitField value={rate} onChange={setRate} />
            {auth === undefined
              ? (
                <p>
                  Authentication: {authText(endpoint)}{" "}
                  <button type="button" onClick={() => setAuth(emptyAuth)}>Replace authentication</button>
                </p>
              )
              : <AuthenticationFields legend={`Authentication for ${endpoint.url_hint} (give it whole again; None removes it)`} draft={auth} onChange={setAuth} />}
            <div class="actions">
              <button type="submit" class="primary" disabled={update.busy || events.size === 0}>Save events</button>
              <button type="button" onClick={() => {
                setEditing(false)
                setHeaders(undefined)
                setAuth(undefined)
              }}>Cancel</button>
            </div>
          </form>
        )
        : (
          <div class="actions">
            <button type="button" onClick={() => setEditing(true)}>Edit events</button>
            <label class="inline">
              Old secret keeps working
              <select value={overlap} disabled={endAll} onChange={(event) => setOverlap(Number(event.currentTarget.value))}>
                {overlaps.map((choice) => <option key={choice.seconds} value={choice.seconds}>{choice.label}</option>)}
              </select>
            </label>
            <label class="inline">
              <input type="checkbox" checked={endAll} onChange={(event) => setEndAll(event.currentTarget.checked)} />
              End every earlier secret now
            </label>
            <button
              type="button"
              disabled={rotate.busy}
              onClick={async () => {
                setRefusal(undefined)
                const payload = endAll ? { overlap_seconds: 0, expire_previous: "all" as const } : { overlap_seconds: overlap }
                const exit = await rotate.run({ params: { id: endpoint.id }, payload, reactivityKeys: ["endpoints"] })
                if (Exit.isSuccess(exit)) {
                  onSecret(exit.value.secret)
                  setEndAll(false)
                  onNotice({
                    tone: "success",
                    text: endAll
                      ? "Secret rotated. Every earlier secret stopped signing: deliveries are signed with the new secret alone."
                      : `Secret rotated. Deliveries are signed with the previous secret too until ${
                        new Date(exit.value.previous_secret_expires_at).toLocaleString()
                      }.`
                  })
                } else {
                  const problem = problemOf(exit.cause)
                  const refused = refusalOf(`Rotating the signing secret of ${endpoint.url_hint}`, problem)
                  setRefusal(problem.code !== "LIMIT_REACHED" || endAll ? refused : {
                    ...refused,
                    why: `${refused.why} Keeping the latest secret beside a new one would sign with one secret too many: choose a shorter overlap, or End every earlier secret now.`
                  })
                }
              }}
            >
              Rotate secret
            </button>
            <button type="button" onClick={() => setQuery({ endpoint: showDeliveries ? undefined : endpoint.id, ...noDeliveryFilters })} aria-expanded={showDeliveries}>
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
          else refuse("Deleting")(problemOf(exit.cause))
        }}
      >
        <p><strong>{endpoint.url_hint}</strong> stops receiving events at once. This cannot be undone.</p>
      </Confirm>
      <Refusal id={`refusal-${endpoint.id}`} refusal={refusal} onDismiss={() => setRefusal(undefined)} />
      <EndpointHealth endpoint={endpoint} onNotice={onNotice} onRefusal={setRefusal} />
      {showDeliveries && <Deliveries endpoint={endpoint} onNotice={onNotice} />}
    </li>
  )
}

/** A disabled or failing endpoint says so first, with what to do. */
const HealthBanner = ({ endpoint, cooling }: { endpoint: NotificationEndpoint; cooling: boolean }) => {
  if (!endpoint.active) {
    return (
      <div class="notice error" role="alert">
        <p>
          <strong>Disabled</strong>
          {endpoint.deactivated_at && <> since <Time iso={endpoint.deactivated_at} /></>}: {endpoint.deactivated_reason ?? "deactivated"}.
          Nothing is sent to it. Fix the receiver, then save its events to reactivate it and replay what failed.
        </p>
      </div>
    )
  }
  if (endpoint.failing_since !== undefined || cooling) {
    return (
      <div class="notice warning" role="alert">
        <p>
          <strong>Failing</strong>
          {endpoint.failing_since !== undefined && <> since <Time iso={endpoint.failing_since} /></>}: its latest attempts failed
          {cooling && <>; nothing is sent before <Time iso={endpoint.cooldown_until} /></>}. It recovers with its next successful delivery.
        </p>
      </div>
    )
  }
  return null
}
