/**
 * A delivery's lease, from claim to outcome, over both storage paths (the
 * log and rows on their own): claiming, settling what was sent, and giving
 * back what was claimed but not sent.
 */
import type { PgClient } from "@effect/sql-pg"
import { Duration, Effect, type Option } from "effect"
import { newId } from "../platform/Ids.ts"
import type { LogLeases } from "./log/HeldLeases.ts"
import * as Log from "./log/Log.ts"
import { logSuccesses, settledOf, settleLogSuccesses } from "./log/SettleSuccesses.ts"
import * as Rows from "./Rows.ts"
import { readAnswer } from "./rows/EmptyClaimAnswer.ts"
import { settleRowsJson } from "./rows/SettleInput.ts"
import { claimStatement, settleStatement } from "./rows/Statements.ts"
import {
  type Claimed,
  type ClaimOptions,
  type DeliveryKind,
  LOGGED_KINDS,
  type Settled,
  type SettleItem,
  toDelivery
} from "./Types.ts"

/** Order of two `seq`s (decimal bigint text, no sign or leading zeros) without parsing them. */
const compareSeq = (a: string, b: string) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0)

// A kind whose deliveries are logged (`Log.ts`) first hands out rows of
// the targets it can lease; the per-row claim (`claimStatement`) then takes
// what room is left (retries, replays, released rows, strict targets' heads)
// unless the caller says its last answer stands (`ClaimOptions.rows`).
export const claimOrNextDue = Effect.fnUntraced(function*(
  ctx: LogContext,
  kind: DeliveryKind,
  options: ClaimOptions
): Effect.fn.Return<ClaimAnswer> {
  const { sql } = ctx
  const logged = LOGGED_KINDS.includes(kind) && options.log !== false
    ? yield* Log.take(sql, ctx.leases, kind, options)
    : []
  const limit = options.limit - logged.length
  const due = limit > 0 && options.rows !== false
  const answer = due
    ? yield* claimStatement(sql, kind, { ...options, limit }, newId(), ctx.leases.owner()).pipe(Effect.orDie)
    : []
  const { nextDue, rows: found } = yield* readAnswer(answer)
  const rows = yield* Rows.claimed(Effect.succeed(found))
  const claimed = rows
    .map((row): Claimed => ({
      ...toDelivery(row),
      leaseOwner: row.lease_owner,
      targetFailures: row.target_failures,
      targetGroup: row.target_group ?? undefined,
      claimedFrom: row.claimed_from
    }))
    .concat(logged)
    .sort((a, b) => a.nextAttemptAt.getTime() - b.nextAttemptAt.getTime() || compareSeq(a.seq, b.seq))
  return {
    claimed,
    nextDue: logged.length > 0 ? undefined : nextDue,
    rows: { ran: due, nextDue: due ? nextDue : undefined }
  }
})

/** `claimOrNextDue`'s deliveries alone. */
export const claim = (ctx: LogContext, kind: DeliveryKind, options: ClaimOptions) =>
  Effect.map(claimOrNextDue(ctx, kind, options), (answer) => answer.claimed)

/**
 * What a claim took, oldest due first; when it took nothing and the per-row
 * statement ran, also when the next delivery becomes claimable
 * (`DeliveryQueue.nextDue`'s answer, asked by the same statement).
 */
export interface ClaimAnswer {
  readonly claimed: ReadonlyArray<Claimed>
  readonly nextDue: Option.Option<Date> | undefined
  /**
   * Whether the per-row statement ran, and its own answer when it did and
   * took nothing (whatever the log handed out): the next due instant.
   */
  readonly rows: { readonly ran: boolean; readonly nextDue: Option.Option<Date> | undefined }
}

/** The SQL client and this process's own view of its target leases on the log (and the owner id it holds them under). */
export interface LogContext {
  readonly sql: PgClient.PgClient
  readonly leases: LogLeases
}

// One statement per batch (`settleStatement`, or `settleLogSuccesses` for
// a batch of the log's successes alone).
export const settleMany = Effect.fnUntraced(function*(
  ctx: LogContext,
  items: ReadonlyArray<SettleItem>
): Effect.fn.Return<Settled> {
  if (items.length === 0) return { held: [], coolingFor: new Map(), failures: new Map() }
  const { leases, sql } = ctx
  const targetIds = [...new Set(items.map((item) => item.claimed.targetId))].sort()
  // Rows handed out of the log: where each target's cursor may move once
  // this batch is written.
  const logged = new Map<string, { targetId: string; leaseId: string; seqs: Array<bigint> }>()
  for (const { claimed } of items) {
    if (claimed.claimedFrom !== "logged") continue
    const key = `${claimed.targetId}:${claimed.leaseOwner}`
    const entry = logged.get(key)
    if (entry === undefined) {
      logged.set(key, { targetId: claimed.targetId, leaseId: claimed.leaseOwner, seqs: [BigInt(claimed.seq)] })
    } else entry.seqs.push(BigInt(claimed.seq))
  }
  // Only the lease this process holds moves the cursor (an item of a lost
  // lease changes nothing here).
  const log = new Map<string, { readonly cursor: bigint; readonly leaseSeconds: number }>()
  for (const { leaseId, seqs, targetId } of logged.values()) {
    const settled = leases.settle(targetId, leaseId, seqs)
    if (settled !== undefined) log.set(targetId, settled)
  }
  // Not written: until the batch is, its rows hold the cursor back.
  const holdCursor = <A, E>(effect: Effect.Effect<A, E>) =>
    Effect.tapCause(effect, () =>
      Effect.sync(() => {
        for (const { leaseId, seqs, targetId } of logged.values()) leases.keep(targetId, leaseId, seqs)
      }))
  const successes = logSuccesses(items, log)
  if (successes !== undefined) {
    const rows = yield* settleLogSuccesses(sql, successes).pipe(holdCursor)
    for (const row of rows) {
      if (row.log_ended) {
        leases.forget(
          row.id,
          successes.find((p) => p.targetId === row.id)!.leaseId
        )
      }
    }
    return settledOf(items, successes, rows)
  }
  const settled = yield* settleStatement(sql, settleRowsJson(items, log), targetIds).pipe(holdCursor, Effect.orDie)
  // Keyed by lease, not only by delivery: one batch may hold the same
  // delivery twice (a lease that ran out while its send was still in
  // flight, and the claim that took it over); only the holder's counts.
  const held = new Set(settled.map((row) => `${row.delivery_id}:${row.lease_owner}`))
  // How long each target still cools down, measured by the database (the
  // caller counts it from its own clock).
  const coolingFor = new Map<string, Duration.Duration>()
  const failures = new Map<string, number>()
  for (const row of settled) {
    if (row.cooldown_ms !== null && row.cooldown_ms > 0) coolingFor.set(row.target_id, Duration.millis(row.cooldown_ms))
    if (row.failures !== null) failures.set(row.target_id, row.failures)
    if (row.log_ended) leases.forget(row.target_id, row.lease_owner)
  }
  // A lease lost is not forgotten here: an item may go unrecorded with the
  // lease still this process's (its row was deleted), and forgetting would
  // let the cursor pass rows still in flight. A lost lease's entry is
  // replaced when this process takes the target again.
  return {
    held: items.map((item) => held.has(`${item.claimed.id}:${item.claimed.leaseOwner}`)),
    coolingFor,
    failures
  }
})

export const release = Effect.fnUntraced(function*(ctx: LogContext, claimed: ReadonlyArray<Claimed>) {
  if (claimed.length === 0) return 0
  const { sql } = ctx
  const logged = claimed.filter((c) => c.claimedFrom === "logged")
  const perRow = claimed.filter((c) => c.claimedFrom !== "logged")
  const fromLog = yield* Log.releaseLogged(sql, ctx.leases, logged)
  if (perRow.length === 0) return fromLog
  const rows = perRow.map((c) => ({ id: c.id, lease_owner: c.leaseOwner, status: c.claimedFrom }))
  const released = yield* sql`
    UPDATE deliveries d
    SET status = CASE WHEN i.status IN ('queued', 'retrying') THEN i.status
                      WHEN d.attempts > 1 THEN 'retrying' ELSE 'queued' END,
        attempts = greatest(0, d.attempts - 1), lease_owner = NULL, lease_until = NULL
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS i(id uuid, lease_owner uuid, status text)
    WHERE d.id = i.id AND d.lease_owner = i.lease_owner AND d.status = 'sending'
    RETURNING d.id
  `.pipe(Effect.orDie)
  return fromLog + released.length
})
