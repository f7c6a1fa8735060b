/**
 * The organization's stored feedback bytes as this process last saw them,
 * for at most `maxAgeMs`.
 *
 * Speeds up: the feedback quota is weighed before
 * the body is parsed without a usage read per request (one read per
 * organization and interval instead of one per `POST /v1/feedback`, an index
 * range of up to 16 rows: a round trip of svc and database CPU on the path
 * the writes benchmark measures).
 *
 * A hint only ever says "read again": nothing is refused on a hint, only on
 * a fresh read, and the INSERT checks the quota atomically whatever the hint
 * said. It can be low (another process stored feedback since): then an
 * organization just past its quota has a correction checked before the
 * INSERT refuses it, as before the early check existed. It is raised by what
 * this process stores, so one process filling its quota is refused early at
 * once.
 */
export class UsageHints {
  private readonly hints = new Map<string, { bytes: number; readAt: number }>()
  private readonly maxAgeMs: number
  private readonly maxOrgs: number

  constructor(maxAgeMs: number, maxOrgs = 10_000) {
    this.maxAgeMs = maxAgeMs
    this.maxOrgs = maxOrgs
  }

  /** The bytes last seen for `orgId`, if seen within `maxAgeMs` of `now`. */
  get(orgId: string, now: number): number | undefined {
    const hint = this.hints.get(orgId)
    return hint !== undefined && now - hint.readAt <= this.maxAgeMs ? hint.bytes : undefined
  }

  /** What a fresh read found. */
  read(orgId: string, bytes: number, now: number): void {
    if (this.hints.size >= this.maxOrgs && !this.hints.has(orgId)) this.hints.clear()
    this.hints.set(orgId, { bytes, readAt: now })
  }

  /** This process stored `bytes` more for `orgId`. */
  stored(orgId: string, bytes: number): void {
    const hint = this.hints.get(orgId)
    if (hint !== undefined) hint.bytes += bytes
  }
}
