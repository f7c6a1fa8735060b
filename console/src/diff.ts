/**
 * A structural diff of two JSON values by JSON path: which members were
 * changed, added or removed (arrays compared by position).
 */
export interface Change {
  readonly path: string
  readonly kind: "changed" | "added" | "removed"
  readonly before?: unknown
  readonly after?: unknown
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/

const member = (path: string, key: string) =>
  IDENTIFIER.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`

export const jsonDiff = (before: unknown, after: unknown, path = "$"): ReadonlyArray<Change> => {
  if (isObject(before) && isObject(after)) {
    const changes: Array<Change> = []
    for (const key of Object.keys(before)) {
      if (!(key in after)) changes.push({ path: member(path, key), kind: "removed", before: before[key] })
      else changes.push(...jsonDiff(before[key], after[key], member(path, key)))
    }
    for (const key of Object.keys(after)) {
      if (!(key in before)) changes.push({ path: member(path, key), kind: "added", after: after[key] })
    }
    return changes
  }
  if (Array.isArray(before) && Array.isArray(after)) {
    const changes: Array<Change> = []
    const shared = Math.min(before.length, after.length)
    for (let i = 0; i < shared; i++) changes.push(...jsonDiff(before[i], after[i], `${path}[${i}]`))
    for (let i = shared; i < before.length; i++) {
      changes.push({ path: `${path}[${i}]`, kind: "removed", before: before[i] })
    }
    for (let i = shared; i < after.length; i++) changes.push({ path: `${path}[${i}]`, kind: "added", after: after[i] })
    return changes
  }
  if (JSON.stringify(before) === JSON.stringify(after)) return []
  return [{ path, kind: "changed", before, after }]
}
