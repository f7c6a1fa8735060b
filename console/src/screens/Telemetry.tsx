/**
 * "Telemetry": the organization's OTLP destination, its counters (polled,
 * so they move by themselves), a test span, batch deliveries with replay,
 * and creation with its protocol, compression and headers, each refused
 * header explained.
 */
import { Exit, Result, type Schema, SchemaIssue, SchemaParser } from "effect"
import { useMemo, useState } from "preact/hooks"
import { CreateTelemetryDestination, type TelemetryCompression, type TelemetryDestination, type TelemetryProtocol } from "../../../src/api/Telemetry.ts"
import { type Problem, problemOf, SvcApi } from "../api.ts"
import { refresh, useAtomValue, useMutation } from "../atoms.ts"
import { Confirm, describeProblem, formatTime, Loaded, Notice, type NoticeValue, Refusal, refusalOf, type RefusalValue, Time, useInterval } from "../ui.tsx"

const destinationsAtom = SvcApi.query("telemetry", "list", { reactivityKeys: ["telemetry"] })
const createAtom = SvcApi.mutation("telemetry", "create")
const testAtom = SvcApi.mutation("telemetry", "test")
const removeAtom = SvcApi.mutation("telemetry", "remove")
const replayAtom = SvcApi.mutation("telemetry", "replay")

const replayProblem = (what: string, problem: Problem): RefusalValue => {
  switch (problem.code) {
    case "NOT_REPLAYABLE":
      return { what, why: `Only failed batches can be replayed${problem.error?.delivery_status ? `, and this one is ${String(problem.error.delivery_status)}` : ""}.` }
    case "QUEUE_FULL":
      return { what, why: "The destination's queue is full: wait until queued batches are sent (or fail), then replay again." }
    default:
      return refusalOf(what, problem)
  }
}

export const Telemetry = () => {
  const destinations = useAtomValue(destinationsAtom)
  useInterval(() => refresh(destinationsAtom), 2000)
  const [notice, setNotice] = useState<NoticeValue | undefined>(undefined)
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title" tabIndex={-1}>Telemetry</h1>
      <Notice notice={notice} onClose={() => setNotice(undefined)} />
      <Loaded result={destinations} what="the destination">
        {(value) =>
          value.destinations.length === 0
            ? <CreateDestination onNotice={setNotice} />
            : (
              <ul class="cards" aria-label="Destinations">
                {value.destinations.map((destination) => <Destination key={destination.id} destination={destination} onNotice={setNotice} />)}
              </ul>
            )}
      </Loaded>
    </section>
  )
}

/** `headers.Authorization` or `headers["odd name"]` (how problems name a header): the header's name. */
const headerName = (field: string): string => {
  if (field.startsWith("headers[")) {
    try {
      return String(JSON.parse(field.slice("headers[".length, -1)))
    } catch {
      return field
    }
  }
  return field.replace(/^headers\./, "")
}

/** The contract's own rules for a header's name and value (`CustomHeaders`): what the API refuses, said before sending. */
const headerSchemas = CreateTelemetryDestination.fields.headers.schema
const formatIssue = SchemaIssue.makeFormatterStandardSchemaV1()

const refusal = (schema: Schema.Codec<string, string>, input: string): string | undefined => {
  const decoded = SchemaParser.decodeUnknownResult(schema)(input)
  return Result.isFailure(decoded) ? formatIssue(decoded.failure).issues[0]?.message ?? "Not accepted" : undefined
}

/**
 * Each header the contract refuses, by its name in lower case, with the
 * rule it breaks (its name's, else its value's). The typed client checks
 * a payload against the contract before sending it, so a refused header
 * never reaches the service: the form says why for each one instead.
 */
const refusedHeaders = (headers: Readonly<Record<string, string>>): Map<string, string> => {
  const refused = new Map<string, string>()
  for (const [name, value] of Object.entries(headers)) {
    const message = refusal(headerSchemas.key, name) ?? refusal(headerSchemas.value, value)
    if (message !== undefined) refused.set(name.toLowerCase(), message)
  }
  return refused
}

const headersRefused = (count: number) => `The collector headers were refused: ${count} header${count === 1 ? "" : "s"} to fix below.`

interface HeaderRow {
  readonly key: number
  readonly name: string
  readonly value: string
}

let nextRow = 0

const PROTOCOLS: ReadonlyArray<readonly [TelemetryProtocol, string]> = [
  ["http/json", "OTLP/HTTP JSON"],
  ["http/protobuf", "OTLP/HTTP protobuf"]
]
const COMPRESSIONS: ReadonlyArray<readonly [TelemetryCompression, string]> = [
  ["none", "None"],
  ["gzip", "gzip"]
]
const protocolLabel = (protocol: TelemetryProtocol) => PROTOCOLS.find(([value]) => value === protocol)?.[1] ?? protocol

const CreateDestination = ({ onNotice }: { onNotice: (notice: NoticeValue) => void }) => {
  const [url, setUrl] = useState("")
  const [protocol, setProtocol] = useState<TelemetryProtocol>("http/json")
  const [compression, setCompression] = useState<TelemetryCompression>("none")
  const [rows, setRows] = useState<ReadonlyArray<HeaderRow>>([])
  const [urlError, setUrlError] = useState<string | undefined>(undefined)
  const [headerErrors, setHeaderErrors] = useState<ReadonlyMap<string, string>>(new Map())
  /** The latest refusal of this form, said under its button. */
  const [refusal, setRefusal] = useState<RefusalValue | undefined>(undefined)
  const create = useMutation(createAtom)
  const setRow = (key: number, change: Partial<HeaderRow>) =>
    setRows((current) => current.map((row) => (row.key === key ? { ...row, ...change } : row)))
  return (
    <form
      class="form stack card"
      aria-labelledby="create-destination"
      onSubmit={async (event) => {
        event.preventDefault()
        setUrlError(undefined)
        setHeaderErrors(new Map())
        setRefusal(undefined)
        const what = `Creating the destination ${url.trim() || "(no URL)"}`
        const headers = Object.fromEntries(rows.filter((row) => row.name.trim() !== "").map((row) => [row.name.trim(), row.value]))
        const refused = refusedHeaders(headers)
        if (refused.size > 0) {
          setHeaderErrors(refused)
          return setRefusal({ what, why: headersRefused(refused.size) })
        }
        const exit = await create.run({ payload: { url, protocol, compression, ...(rows.length > 0 ? { headers } : {}) }, reactivityKeys: ["telemetry"] })
        if (Exit.isSuccess(exit)) return onNotice({ tone: "success", text: `Destination ${exit.value.url_hint} created.` })
        const problem = problemOf(exit.cause)
        if (problem.code === "INVALID_URL") setUrlError(problem.detail ?? problem.title)
        if (problem.code === "INVALID_HEADERS") {
          const issues = (problem.error?.errors as ReadonlyArray<{ field: string; message: string }> | undefined) ??
            (problem.error?.field ? [{ field: String(problem.error.field), message: problem.detail ?? problem.title }] : [])
          const byName = new Map<string, string>()
          for (const issue of issues) byName.set(headerName(issue.field).toLowerCase(), issue.message)
          setHeaderErrors(byName)
          return setRefusal({ what, why: headersRefused(byName.size) })
        }
        setRefusal(refusalOf(what, problem))
      }}
    >
      <h2 id="create-destination">New destination</h2>
      <p class="muted">Spans of your organization's requests are exported here over OTLP/HTTP.</p>
      <label>
        Collector traces URL (HTTPS)
        <input
          type="url"
          required
          value={url}
          placeholder="https://collector.example.com/v1/traces"
          aria-invalid={urlError ? "true" : undefined}
          aria-describedby={urlError ? "destination-url-error" : undefined}
          onInput={(event) => setUrl(event.currentTarget.value)}
        />
      </label>
      {urlError && <p id="destination-url-error" class="field-error">{urlError}</p>}
      <label>
        Protocol
        <select value={protocol} onChange={(event) => setProtocol(event.currentTarget.value as TelemetryProtocol)}>
          {PROTOCOLS.map(([value, label]) => <option key={value} value={value}>{label}</option>)}
        </select>
      </label>
      <label>
        Compression
        <select value={compression} onChange={(event) => setCompression(event.currentTarget.value as TelemetryCompression)}>
          {COMPRESSIONS.map(([value, label]) => <option key={value} value={value}>{label}</option>)}
        </select>
      </label>
      <fieldset>
        <legend>Headers sent with every export</legend>
        {rows.length === 0 && <p class="muted">None.</p>}
        {rows.map((row, index) => {
          const error = headerErrors.get(row.name.trim().toLowerCase())
          const errorId = `header-error-${row.key}`
          return (
            <div class="form" key={row.key}>
              <label>
                Header {index + 1} name
                <input value={row.name} aria-invalid={error ? "true" : undefined} aria-describedby={error ? errorId : undefined} onInput={(event) => setRow(row.key, { name: event.currentTarget.value })} />
              </label>
              <label>
                Header {index + 1} value
                <input type="password" autocomplete="off" value={row.value} onInput={(event) => setRow(row.key, { value: event.currentTarget.value })} />
              </label>
              <button type="button" onClick={() => setRows((current) => current.filter((other) => other.key !== row.key))}>Remove header {index + 1}</button>
              {error && <p id={errorId} class="field-error">{row.name}: {error}</p>}
            </div>
          )
        })}
        <button type="button" onClick={() => setRows((current) => [...current, { key: nextRow++, name: "", value: "" }])}>Add header</button>
      </fieldset>
      <div class="actions"><button type="submit" class="primary" disabled={create.busy}>Create destination</button></div>
      <Refusal id="create-destination-refusal" refusal={refusal} onDismiss={() => setRefusal(undefined)} />
    </form>
  )
}

const Destination = ({ destination, onNotice }: { destination: TelemetryDestination; onNotice: (notice: NoticeValue) => void }) => {
  const test = useMutation(testAtom)
  const remove = useMutation(removeAtom)
  const replay = useMutation(replayAtom)
  const [confirming, setConfirming] = useState(false)
  const [testOutcome, setTestOutcome] = useState<string | undefined>(undefined)
  /** The latest refusal of this card's Delete, said in the card; a refused Replay, in its batch's row. */
  const [refusal, setRefusal] = useState<RefusalValue | undefined>(undefined)
  const [replayRefused, setReplayRefused] = useState<{ readonly id: string; readonly refusal: RefusalValue } | undefined>(undefined)
  /** The batch last queued again from its row: said there, beside its Replay. */
  const [replayed, setReplayed] = useState<string | undefined>(undefined)
  const deliveriesAtom = useMemo(() => SvcApi.query("telemetry", "deliveries", { params: { id: destination.id }, query: {}, reactivityKeys: ["telemetry-deliveries"] }), [destination.id])
  const deliveries = useAtomValue(deliveriesAtom)
  useInterval(() => refresh(deliveriesAtom), 2000)
  return (
    <li class="card" aria-labelledby="destination-title">
      <h2 id="destination-title">{destination.url_hint}</h2>
      <div class="counters" aria-label="Counters">
        <div class="counter"><span>Pending spans</span><strong data-counter="pending">{destination.pending_spans}</strong></div>
        <div class="counter"><span>Dropped spans</span><strong data-counter="dropped">{destination.dropped_spans}</strong></div>
      </div>
      <dl class="facts">
        <div><dt>Protocol</dt><dd data-setting="protocol">{protocolLabel(destination.protocol)}</dd></div>
        <div><dt>Compression</dt><dd data-setting="compression">{destination.compression === "none" ? "None" : destination.compression}</dd></div>
        <div><dt>Last delivery</dt><dd><Time iso={destination.last_delivered_at} /></dd></div>
        <div><dt>Last error</dt><dd>{destination.last_error ?? "none"}</dd></div>
        <div><dt>Created</dt><dd><Time iso={destination.created_at} /></dd></div>
      </dl>
      <div class="actions">
        <button
          type="button"
          disabled={test.busy}
          onClick={async () => {
            setTestOutcome(undefined)
            const exit = await test.run({ params: { id: destination.id } })
            if (Exit.isSuccess(exit)) return setTestOutcome("The collector accepted the test span.")
            const problem = problemOf(exit.cause)
            setTestOutcome(
              problem.code === "EXPORT_FAILED"
                ? `The collector did not accept the test span${problem.error?.collector_status ? `: it answered HTTP ${String(problem.error.collector_status)}` : ` (${problem.detail ?? "no answer"})`}.`
                : `The test failed: ${describeProblem(problem)}`
            )
          }}
        >
          Send test span
        </button>
        <button type="button" class="danger" onClick={() => setConfirming(true)}>Delete</button>
        <span role="status">{test.busy ? "Sending…" : testOutcome ?? ""}</span>
      </div>
      <Confirm
        open={confirming}
        title="Delete this destination?"
        confirmLabel="Delete destination"
        busy={remove.busy}
        onCancel={() => setConfirming(false)}
        onConfirm={async () => {
          setRefusal(undefined)
          const exit = await remove.run({ params: { id: destination.id }, reactivityKeys: ["telemetry"] })
          setConfirming(false)
          if (Exit.isSuccess(exit)) onNotice({ tone: "success", text: "Destination deleted: nothing more is exported." })
          else setRefusal(refusalOf(`Deleting the destination ${destination.url_hint}`, problemOf(exit.cause)))
        }}
      >
        <p>Export to <strong>{destination.url_hint}</strong> stops at once; queued batches are dropped.</p>
      </Confirm>
      <Refusal id={`refusal-${destination.id}`} refusal={refusal} onDismiss={() => setRefusal(undefined)} />
      <h3 id="batches">Batch deliveries (latest 50)</h3>
      <Loaded result={deliveries} what="batch deliveries">
        {(value) =>
          value.deliveries.length === 0
            ? <p class="empty">No batches yet.</p>
            : (
              <div class="table-wrap">
                <table aria-labelledby="batches">
                  <thead><tr><th scope="col">Status</th><th scope="col">Spans</th><th scope="col">Rejected</th><th scope="col">Attempts</th><th scope="col">Last error</th><th scope="col">Created</th><th scope="col">Finished</th><th scope="col"><span class="sr-only">Action</span></th></tr></thead>
                  <tbody>
                    {value.deliveries.map((delivery) => (
                      <tr key={delivery.id}>
                        <td data-label="Status"><span class={`badge ${delivery.status}`}>{delivery.status}</span></td>
                        <td data-label="Spans">{delivery.span_count}</td>
                        <td data-label="Rejected">{delivery.rejected_spans}</td>
                        <td data-label="Attempts">{delivery.attempts}</td>
                        <td data-label="Last error">{delivery.last_error ?? delivery.warning ?? "—"}</td>
                        <td data-label="Created"><Time iso={delivery.created_at} /></td>
                        <td data-label="Finished"><Time iso={delivery.finished_at} /></td>
                        <td class="row-action">
                          {delivery.status === "failed" && (
                            <button
                              type="button"
                              disabled={replay.busy}
                              onClick={async () => {
                                setReplayRefused(undefined)
                                setReplayed(undefined)
                                const exit = await replay.run({ params: { id: destination.id, delivery: delivery.id }, reactivityKeys: ["telemetry-deliveries"] })
                                if (Exit.isSuccess(exit)) setReplayed(delivery.id)
                                else {
                                  const what = `Replay of the batch of ${delivery.span_count} spans made ${formatTime(delivery.created_at)}`
                                  setReplayRefused({ id: delivery.id, refusal: replayProblem(what, problemOf(exit.cause)) })
                                }
                              }}
                            >
                              Replay
                            </button>
                          )}
                          <div class="refusal-slot" role="status">
                            {replayed === delivery.id && <p class="notice success done">Batch queued again: it is sent shortly.</p>}
                          </div>
                          <Refusal
                            id={`refusal-${delivery.id}`}
                            refusal={replayRefused?.id === delivery.id ? replayRefused.refusal : undefined}
                            onDismiss={() => setReplayRefused(undefined)}
                          />
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
      </Loaded>
    </li>
  )
}
