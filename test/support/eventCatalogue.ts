/**
 * The event catalogue (docs/events.md) as the tests read it: per event type
 * its example body and its JSON Schema, the example of a test event, and the
 * delivery headers it lists; plus a validator of bodies against the schemas
 * of src/api/Events.ts.
 */
import addFormatsModule from "ajv-formats"
import { Ajv2020 } from "ajv/dist/2020.js"
import { eventJsonSchema } from "../../src/api/Events.ts"
import { type EventType, EventTypes } from "../../src/api/Notifications.ts"
import { codeBlocks, read } from "./markdown.ts"

export const CATALOGUE = "docs/events.md"

export interface CatalogueEntry {
  readonly example: Record<string, any>
  readonly schema: Record<string, unknown>
}

/** The text of each `##`/`###` section of the page, by heading (code spans unwrapped). */
const sections = (text: string): Map<string, string> => {
  const found = new Map<string, string>()
  let heading: string | undefined
  let lines: Array<string> = []
  let fence = false
  for (const line of text.split("\n")) {
    if (/^ {0,3}(```|~~~)/.test(line)) fence = !fence
    const match = fence ? null : /^#{2,3}\s+(.*)$/.exec(line)
    if (match !== null) {
      if (heading !== undefined) found.set(heading, lines.join("\n"))
      heading = match[1]!.replaceAll("`", "").trim()
      lines = []
    } else {
      lines.push(line)
    }
  }
  if (heading !== undefined) found.set(heading, lines.join("\n"))
  return found
}

const jsonBlocks = (section: string) =>
  codeBlocks(CATALOGUE, section).filter((block) => block.lang === "json").map((block) =>
    JSON.parse(block.code) as Record<string, any>
  )

/** Every event type's section: its first JSON block is the example, its second the schema. */
export const catalogue = (): {
  readonly entries: Map<string, CatalogueEntry>
  readonly testExample: Record<string, any>
  readonly headers: Array<string>
} => {
  const page = sections(read(CATALOGUE))
  const entries = new Map<string, CatalogueEntry>()
  for (const [heading, section] of page) {
    if (!/^(approval|endpoint)\.[a-z_]+$/.test(heading)) continue
    const [example, schema, ...rest] = jsonBlocks(section)
    if (example === undefined || schema === undefined || rest.length > 0) {
      throw new Error(`${CATALOGUE}, ${heading}: expected two JSON blocks, the example and the schema`)
    }
    entries.set(heading, { example, schema })
  }
  const [testExample] = jsonBlocks(page.get("Test events") ?? "")
  if (testExample === undefined) throw new Error(`${CATALOGUE}: no example under "Test events"`)
  // The headers table: rows whose first cell is a header name in a code span.
  const headers = [...(page.get("Headers") ?? "").matchAll(/^\| `([A-Za-z-]+)` \|/gm)].map((match) =>
    match[1]!.toLowerCase()
  )
  return { entries, testExample, headers }
}

/** Every key path of a JSON value (`approval.status`, ...), sorted: the shape two bodies must share. */
export const keyPaths = (value: unknown, prefix = ""): Array<string> =>
  typeof value !== "object" || value === null || Array.isArray(value)
    ? []
    : Object.entries(value).flatMap(([key, inner]) => [`${prefix}${key}`, ...keyPaths(inner, `${prefix}${key}.`)])
      .sort()

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020

/** Closes every object schema (`additionalProperties: false`): a body with a field the schema does not name fails. */
const closed = (schema: unknown): unknown => {
  if (Array.isArray(schema)) return schema.map(closed)
  if (typeof schema !== "object" || schema === null) return schema
  const out: Record<string, unknown> = Object.fromEntries(
    Object.entries(schema).map(([key, inner]) => [key, closed(inner)])
  )
  if (out.type === "object") out.additionalProperties = false
  return out
}

/**
 * Validators by event type: the published schema (open objects) and the
 * same schema closed, so that a field svc sends and the schema does not
 * name is caught too.
 */
export const eventValidators = () => {
  const ajv = addFormats(new Ajv2020({ allErrors: true, strict: true }))
  const byType = new Map(EventTypes.map((type) => {
    const schema = eventJsonSchema(type)
    return [type, { open: ajv.compile(schema), closed: ajv.compile(closed(schema) as object) }] as const
  }))
  /** Why `body` does not fit the schema of `type`, or nothing. */
  return (type: EventType, body: unknown): Array<string> => {
    const validators = byType.get(type)
    if (validators === undefined) return [`unknown event type ${type}`]
    const problems: Array<string> = []
    for (const [name, validate] of Object.entries(validators)) {
      if (!validate(body)) {
        problems.push(
          ...(validate.errors ?? []).map((e) =>
            `${name}: ${e.instancePath} ${e.message ?? ""} ${JSON.stringify(e.params)}`
          )
        )
      }
    }
    return problems
  }
}
