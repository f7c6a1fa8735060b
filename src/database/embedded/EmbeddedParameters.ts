/**
 * Parameters as PGlite takes them, each with the type `@effect/sql-pg`
 * binds it with on a server (its `inferScalar`), so PostgreSQL resolves
 * operators and functions the same way on both databases.
 */
import { PgTypes } from "@effect/sql-pg"

const OID = PgTypes.OID
const INT32_MIN = -2147483648
const INT32_MAX = 2147483647
/** Array types of the element types `scalarOid` gives. */
const ARRAY_OF: Record<number, number> = {
  [OID.bool]: 1000,
  [OID.int4]: 1007,
  [OID.int8]: 1016,
  [OID.float8]: 1022,
  [OID.text]: 1009,
  [OID.timestamptz]: 1185,
  [OID.bytea]: 1001
}

/**
 * The type `@effect/sql-pg` binds a JavaScript value with (its
 * `inferScalar`), so PostgreSQL resolves operators and functions the same
 * way on both databases: a string stays untyped (0), the statement decides.
 */
const scalarOid = (value: unknown): number => {
  switch (typeof value) {
    case "boolean":
      return OID.bool
    case "bigint":
      return OID.int8
    case "number":
      return Number.isInteger(value) && value >= INT32_MIN && value <= INT32_MAX
        ? OID.int4
        : Number.isSafeInteger(value)
        ? OID.int8
        : OID.float8
    case "string":
      return 0
  }
  if (value instanceof Date) return OID.timestamptz
  if (value instanceof Uint8Array) return OID.bytea
  return 0
}

const arrayOid = (values: ReadonlyArray<unknown>): number => {
  for (const element of values) {
    if (element === null || element === undefined) continue
    const oid = scalarOid(element)
    return ARRAY_OF[oid === 0 ? OID.text : oid] ?? 0
  }
  return 0
}

/** Parameters as PGlite takes them, with the types to bind them as. */
export const toPglite = (
  params: ReadonlyArray<unknown>
): { readonly params: ReadonlyArray<unknown>; readonly types: ReadonlyArray<number> } => {
  const out: Array<unknown> = new Array(params.length)
  const types: Array<number> = new Array(params.length)
  for (let i = 0; i < params.length; i++) {
    const value = params[i]
    if (value === undefined || value === null) {
      out[i] = null
      types[i] = 0
    } else if (PgTypes.isParameter(value)) {
      types[i] = value.oid
      out[i] = value.value === null
        ? null
        : value.oid === OID.json || value.oid === OID.jsonb
        ? JSON.stringify(value.value, (_, v) => typeof v === "bigint" ? v.toString() : v)
        : value.value
    } else if (Array.isArray(value)) {
      types[i] = value.length === 0 ? 0 : arrayOid(value)
      out[i] = value.length === 0 ? "{}" : value
    } else {
      types[i] = scalarOid(value)
      out[i] = value
    }
  }
  return { params: out, types }
}
