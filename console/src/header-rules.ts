/**
 * The contract's own rules for custom header names and values (the
 * `headers` schema of a create or update payload, `HeaderNames.ts`), said
 * before sending. The typed client checks a payload against the contract
 * before it leaves the browser, so a refused header never reaches the
 * service and the client's failure reads "Expected no excess property":
 * a form checks each row first and says, at the row, which rule it breaks.
 */
import { Result, type Schema, SchemaIssue, SchemaParser } from "effect"

const formatIssue = SchemaIssue.makeFormatterStandardSchemaV1()

const refusal = (schema: Schema.Codec<string, string>, input: string): string | undefined => {
  const decoded = SchemaParser.decodeUnknownResult(schema)(input)
  return Result.isFailure(decoded) ? formatIssue(decoded.failure).issues[0]?.message ?? "Not accepted" : undefined
}

/** A headers schema's rules: its keys' and its values'. */
export interface HeaderSchemas {
  readonly key: Schema.Codec<string, string>
  readonly value: Schema.Codec<string, string>
}

/** Each header the rules refuse, by its name in lower case, with the rule it breaks (its name's, else its value's). */
export const refusedHeaders = (
  schemas: HeaderSchemas,
  headers: Readonly<Record<string, string>>
): Map<string, string> => {
  const refused = new Map<string, string>()
  for (const [name, value] of Object.entries(headers)) {
    const message = refusal(schemas.key, name) ?? refusal(schemas.value, value)
    if (message !== undefined) refused.set(name.toLowerCase(), message)
  }
  return refused
}
