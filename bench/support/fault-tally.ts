/**
 * The fault study's arithmetic (`bench/faults.ts`), kept apart from the
 * processes so that a unit test holds it: which fault each repeated
 * receipt is owed to, and the counts against the stated bound.
 *
 * A delivery that arrives again was sent, and its outcome not recorded,
 * before a fault: the receipt before the repeat came before the fault
 * ended (a killed process's last requests may land a moment after the
 * signal; during a database crash, sends in flight still finish), and the
 * repeat comes after the fault began. Each repeat (the second receipt of an
 * event at an endpoint, the third, ...) is owed to the earliest fault that
 * both follows the previous receipt in that sense and begins before the
 * repeat; a repeat with no fault between it and the previous receipt is
 * counted apart (`outside`): the engine sends nothing twice without a fault.
 */
import { UNSETTLED_PER_TARGET } from "../../src/deliveries/worker/Admission.ts"

/** `reply`: a statement's answer lost after it committed (`pg-reply-dropper.ts`). */
export type FaultKind = "kill" | "crash" | "reply"

export interface FaultWindow {
  readonly kind: FaultKind
  /** When the fault began (the signal, the immediate stop), epoch ms. */
  readonly at: number
  /** When it was over: the killed process gone, the database accepting connections again. */
  readonly until: number
}

/** Per endpoint (receiver path): every event id received more than once, with its arrival times. */
export type Repeats = Readonly<Record<string, ReadonlyArray<readonly [string, ReadonlyArray<number>]>>>

export interface FaultTally {
  /** Repeats owed to this fault, in all and by endpoint. */
  readonly duplicates: number
  readonly byEndpoint: Readonly<Record<string, number>>
  /** The most at one endpoint. */
  readonly worstEndpoint: number
  /** The longest from the fault's start to a repeat owed to it (ms): when the repeats came. */
  readonly lastRepeatMs: number
}

export interface Tally {
  readonly faults: ReadonlyArray<FaultTally>
  /** Repeats with no fault between them and the receipt before. */
  readonly outside: ReadonlyArray<
    { readonly endpoint: string; readonly id: string; readonly previous: number; readonly repeat: number }
  >
  /** All repeats (receipts beyond each event's first at each endpoint). */
  readonly total: number
}

/** Owes every repeat to a fault of `faults` (any order) or to none. */
export const tally = (faults: ReadonlyArray<FaultWindow>, repeats: Repeats): Tally => {
  const order = faults.map((fault, index) => ({ fault, index })).sort((a, b) => a.fault.at - b.fault.at)
  const counts = faults.map(() => ({ duplicates: 0, byEndpoint: {} as Record<string, number>, lastRepeatMs: 0 }))
  const outside: Array<{ endpoint: string; id: string; previous: number; repeat: number }> = []
  let total = 0
  for (const [endpoint, list] of Object.entries(repeats)) {
    for (const [id, arrivals] of list) {
      const times = [...arrivals].sort((a, b) => a - b)
      for (let k = 1; k < times.length; k++) {
        total++
        const previous = times[k - 1]!
        const repeat = times[k]!
        const owed = order.find(({ fault }) => previous < fault.until && fault.at <= repeat)
        if (owed === undefined) {
          outside.push({ endpoint, id, previous, repeat })
          continue
        }
        const count = counts[owed.index]!
        count.duplicates++
        count.byEndpoint[endpoint] = (count.byEndpoint[endpoint] ?? 0) + 1
        count.lastRepeatMs = Math.max(count.lastRepeatMs, repeat - owed.fault.at)
      }
    }
  }
  return {
    faults: counts.map((c) => ({ ...c, worstEndpoint: Math.max(0, ...Object.values(c.byEndpoint)) })),
    outside,
    total
  }
}

export interface KindSummary {
  readonly faults: number
  readonly duplicates: number
  /** Per fault: the most, and the mean. */
  readonly worstPerFault: number
  readonly meanPerFault: number
  /** The most one fault caused at one endpoint. */
  readonly worstPerEndpoint: number
  /** The bound per fault and endpoint, and the faults that exceeded it. */
  readonly boundPerEndpoint: number
  readonly overBound: number
}

/**
 * The stated bound per fault and endpoint: a `kill -9` makes arrive twice at
 * most what the process had sent and not yet recorded, within
 * `UNSETTLED_PER_TARGET` times the per-endpoint in-flight limit (sends in
 * flight and those finished and not yet written, `src/deliveries/worker/Admission.ts`);
 * a database crash the process lives through, nothing to a healthy
 * endpoint (outcomes it could not write are kept and written later; a send
 * given back because its answer's consequences could not be written goes
 * out again, which after a 2xx happens only to an endpoint in a failing
 * streak); a lost answer, which the process also lives through, nothing.
 */
export const boundPerEndpoint = (kind: FaultKind, perEndpoint: number) =>
  kind === "kill" ? UNSETTLED_PER_TARGET * perEndpoint : 0

export const summarize = (
  kind: FaultKind,
  faults: ReadonlyArray<FaultWindow>,
  t: Tally,
  perEndpoint: number
): KindSummary => {
  const mine = t.faults.filter((_, i) => faults[i]!.kind === kind)
  const bound = boundPerEndpoint(kind, perEndpoint)
  const duplicates = mine.reduce((sum, f) => sum + f.duplicates, 0)
  return {
    faults: mine.length,
    duplicates,
    worstPerFault: Math.max(0, ...mine.map((f) => f.duplicates)),
    meanPerFault: mine.length === 0 ? 0 : duplicates / mine.length,
    worstPerEndpoint: Math.max(0, ...mine.map((f) => f.worstEndpoint)),
    boundPerEndpoint: bound,
    overBound: mine.filter((f) => f.worstEndpoint > bound).length
  }
}
