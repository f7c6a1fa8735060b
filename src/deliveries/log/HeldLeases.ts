/**
 * What this process knows of the target leases it holds on the log
 * (`Log.ts`): per target, the lease's id, its mark (the highest seq handed
 * out, as the database last answered it) and the seqs handed out and not
 * yet settled. From these the settle knows how far the target's cursor may
 * move: up to just below the lowest unsettled seq, or to the mark when
 * none is left. Nothing here is needed by another process: a lease this
 * process stops working runs out, and whoever takes it next starts at the
 * cursor the database holds, skipping what the outcome rows above it name.
 * The leases are held under an owner id, replaced when a take's answer is
 * lost (`Reconcile.ts`).
 */
import { newId } from "../../platform/Ids.ts"

interface Held {
  readonly leaseId: string
  mark: bigint
  /** How long a take or settle extends the lease. */
  leaseSeconds: number
  readonly pending: Set<bigint>
  /** Seqs of a batch the database refused: never settled here, so the cursor stays below them until the lease runs out. */
  readonly kept: Set<bigint>
}

/** Just below the lowest seq in flight or kept; the mark when there is none. */
const cursorOf = (lease: Held) => {
  let low: bigint | undefined
  for (const seq of lease.pending) if (low === undefined || seq < low) low = seq
  for (const seq of lease.kept) if (low === undefined || seq < low) low = seq
  return low === undefined ? lease.mark : low - 1n
}

export type LogLeases = ReturnType<typeof makeLogLeases>

export const makeLogLeases = () => {
  const held = new Map<string, Held>()
  let owner = newId()
  let former: Array<string> = []
  const unlistedAt = new Map<string, number>()

  return {
    /** Rows handed out under `leaseId`; `mark` is the target's new `leased_to`. A new lease id replaces what was known. */
    taken: (targetId: string, leaseId: string, mark: bigint, seqs: ReadonlyArray<bigint>, leaseSeconds: number) => {
      let lease = held.get(targetId)
      if (lease === undefined || lease.leaseId !== leaseId) {
        lease = { leaseId, mark, leaseSeconds, pending: new Set(), kept: new Set() }
        held.set(targetId, lease)
      }
      if (mark > lease.mark) lease.mark = mark
      lease.leaseSeconds = leaseSeconds
      for (const seq of seqs) {
        lease.pending.add(seq)
        // The mark is at least every row handed out.
        if (seq > lease.mark) lease.mark = seq
      }
    },
    /**
     * Removes `seqs` from what is in flight and answers the cursor the
     * target may move to (and the lease's length); undefined when the lease
     * is not known here.
     */
    settle: (targetId: string, leaseId: string, seqs: ReadonlyArray<bigint>) => {
      const lease = held.get(targetId)
      if (lease === undefined || lease.leaseId !== leaseId) return undefined
      for (const seq of seqs) {
        lease.pending.delete(seq)
        lease.kept.delete(seq)
      }
      return { cursor: cursorOf(lease), leaseSeconds: lease.leaseSeconds }
    },
    /** A batch the database refused: its seqs hold the cursor back for the rest of the lease. */
    keep: (targetId: string, leaseId: string, seqs: ReadonlyArray<bigint>) => {
      const lease = held.get(targetId)
      if (lease === undefined || lease.leaseId !== leaseId) return
      for (const seq of seqs) lease.kept.add(seq)
    },
    /** The lease is over (ended by the database with nothing in flight under it): forget it. */
    forget: (targetId: string, leaseId: string) => {
      // Sends still in flight under it will find the lease gone when they settle.
      if (held.get(targetId)?.leaseId === leaseId) held.delete(targetId)
    },
    /** Whether the quiet targets of `kind` are to leave the log's index now (`Unlist.ts`): at most every `everyMs`. */
    unlistDue: (kind: string, now: number, everyMs: number) => {
      if (now - (unlistedAt.get(kind) ?? -Infinity) < everyMs) return false
      unlistedAt.set(kind, now)
      return true
    },
    /** How many target leases are known (for tests). */
    size: () => held.size,
    /** The owner id this process takes leases under now. */
    owner: () => owner,
    /**
     * A take's answer was lost: the database may have moved marks or leased
     * targets under the owner id without this process knowing. Takes a new
     * owner id; the earlier ones are in doubt until `resolved`.
     */
    doubt: () => {
      former.push(owner)
      owner = newId()
    },
    /** The owner ids in doubt (empty when none is). */
    doubtful: (): ReadonlyArray<string> => former,
    /** Every lease known here, with its mark: what the database is told when in doubt. */
    known: () => Array.from(held, ([id, lease]) => ({ id, lease_id: lease.leaseId, mark: lease.mark.toString() })),
    /** The database was told (`owners`, those in doubt when it was): they are no longer. */
    resolved: (owners: ReadonlyArray<string>) => {
      former = former.filter((id) => !owners.includes(id))
    }
  }
}
