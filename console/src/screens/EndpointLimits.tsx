/**
 * The custom headers and the rate limit of a webhook endpoint, as the
 * endpoint forms edit them: header values are write-only (typed into
 * password fields, sent, and never shown again: the API lists names only),
 * and an empty rate limit means unlimited.
 */
import { MAX_RATE_LIMIT } from "../../../src/api/Notifications.ts"

export interface HeaderRow {
  readonly name: string
  readonly value: string
}

/** The rows as the API takes them (rows without a name are left out). */
export const headersPayload = (rows: ReadonlyArray<HeaderRow>): Record<string, string> =>
  Object.fromEntries(rows.filter((row) => row.name.trim() !== "").map((row) => [row.name.trim(), row.value]))

/** `""` → null (unlimited); otherwise the number typed. */
export const ratePayload = (text: string): number | null => text.trim() === "" ? null : Number(text)

export const rateText = (rate: number | null) => rate === null ? "unlimited" : `${rate} per second`

export const HeaderRows = (
  { legend, rows, onChange }: { legend: string; rows: ReadonlyArray<HeaderRow>; onChange: (rows: ReadonlyArray<HeaderRow>) => void }
) => {
  const set = (index: number, row: HeaderRow) => onChange(rows.map((old, i) => (i === index ? row : old)))
  return (
    <fieldset>
      <legend>{legend}</legend>
      <p class="muted">Sent with every delivery, retry, replay and test event (at most 10). Values are stored encrypted and never shown again.</p>
      {rows.map((row, index) => (
        <div class="actions" key={index}>
          <label class="inline">
            Header name
            <input type="text" value={row.name} placeholder="X-Routing-Key" onInput={(event) => set(index, { ...row, name: event.currentTarget.value })} />
          </label>
          <label class="inline">
            Value
            <input type="password" autocomplete="off" value={row.value} onInput={(event) => set(index, { ...row, value: event.currentTarget.value })} />
          </label>
          <button type="button" aria-label={`Remove header ${row.name || index + 1}`} onClick={() => onChange(rows.filter((_, i) => i !== index))}>Remove</button>
        </div>
      ))}
      {rows.length < 10 && <button type="button" onClick={() => onChange([...rows, { name: "", value: "" }])}>Add header</button>}
    </fieldset>
  )
}

export const RateLimitField = ({ value, onChange }: { value: string; onChange: (text: string) => void }) => (
  <label>
    Rate limit (deliveries per second, 1 to {MAX_RATE_LIMIT}; empty for unlimited)
    <input type="number" min={1} max={MAX_RATE_LIMIT} step={1} value={value} placeholder="unlimited" onInput={(event) => onChange(event.currentTarget.value)} />
  </label>
)
