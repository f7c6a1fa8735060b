/**
 * The custom headers and the rate limit of a webhook endpoint, as the
 * endpoint forms edit them: header values are write-only (typed into
 * password fields, sent, and never shown again: the API lists names only),
 * and an empty rate limit means unlimited.
 */
import { useEffect, useRef } from "preact/hooks"
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

/**
 * The header rows of a form; a row whose header the rules refuse (`refused`,
 * by name in lower case) says why beside it, and the first such row's name
 * takes the focus when they appear.
 */
export const HeaderRows = (
  { legend, rows, onChange, refused = new Map(), idPrefix }: {
    legend: string
    rows: ReadonlyArray<HeaderRow>
    onChange: (rows: ReadonlyArray<HeaderRow>) => void
    refused?: ReadonlyMap<string, string>
    /** Makes the rows' message ids unique on the page. */
    idPrefix: string
  }
) => {
  const set = (index: number, row: HeaderRow) => onChange(rows.map((old, i) => (i === index ? row : old)))
  const first = useRef<HTMLInputElement>(null)
  const firstRefused = rows.findIndex((row) => refused.has(row.name.trim().toLowerCase()))
  useEffect(() => {
    if (refused.size > 0) first.current?.focus()
  }, [refused])
  return (
    <fieldset>
      <legend>{legend}</legend>
      <p class="muted">Sent with every delivery, retry, replay and test event (at most 10). Values are stored encrypted and never shown again.</p>
      {rows.map((row, index) => {
        const error = refused.get(row.name.trim().toLowerCase())
        const errorId = `${idPrefix}-header-${index}-error`
        return (
          <div key={index}>
            <div class="actions">
              <label class="inline">
                Header name
                <input
                  type="text"
                  value={row.name}
                  placeholder="X-Routing-Key"
                  ref={index === firstRefused ? first : null}
                  aria-invalid={error ? "true" : undefined}
                  aria-describedby={error ? errorId : undefined}
                  onInput={(event) => set(index, { ...row, name: event.currentTarget.value })}
                />
              </label>
              <label class="inline">
                Value
                <input type="password" autocomplete="off" value={row.value} onInput={(event) => set(index, { ...row, value: event.currentTarget.value })} />
              </label>
              <button type="button" aria-label={`Remove header ${row.name || index + 1}`} onClick={() => onChange(rows.filter((_, i) => i !== index))}>Remove</button>
            </div>
            {error && <p id={errorId} class="field-error">{row.name.trim()} is refused: {error}.</p>}
          </div>
        )
      })}
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
