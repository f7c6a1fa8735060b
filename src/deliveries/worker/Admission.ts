/**
 * Which claimed deliveries may start now, target by target: the delivery
 * worker's rules, free of clocks, fibers and the database. Every method that
 * needs the time takes `now` (epoch ms), so the rules are tested by feeding
 * events (`test/unit/deliveries/admission.test.ts`, property-based).
 *
 * Rules, per target (an endpoint or destination):
 *
 * - at most `concurrency` sends in flight in all, `perTarget` per target;
 * - a target whose latest known attempt failed is probed: at most
 *   `perFailingTarget` sends in flight or finished-but-unrecorded;
 * - in flight plus finished-but-unrecorded stays below
 *   `UNSETTLED_PER_TARGET` times `perTarget` (what a crash of this process
 *   can make arrive twice);
 * - targets of one group (an organization's endpoints on one host) have at
 *   most `perGroup` sends in flight, except that a target with none in
 *   flight may always start one: other targets never hold it back entirely;
 * - nothing starts for a target cooling down: what waits for it is given
 *   back; nor a delivery that waited longer than `maxWaitMs` (it could no
 *   longer finish within its lease): it is given back;
 * - targets take turns: one that started something goes behind the others.
 */

/**
 * In flight plus finished-but-unrecorded deliveries of one target stay
 * below this many times `perTarget`: the most a crash of this process can
 * make arrive twice at one endpoint (64 at the default of 16 in flight).
 * It also bounds a settle batch of one endpoint: at twice `perTarget` a
 * busy endpoint's batches held about 14 outcomes, 21 at four times
 * (`bench/notes/delivery-log.md`, "What was cut").
 */
export const UNSETTLED_PER_TARGET = 4

export interface AdmissionLimits {
  readonly concurrency: number
  readonly perTarget: number
  readonly perFailingTarget: number
  readonly perGroup: number
  readonly maxWaitMs: number
}

/** A claimed delivery waiting here for its turn. */
export interface Entry<A> {
  readonly item: A
  readonly target: string
  /** The target's group, when it has one. */
  readonly group: string | undefined
  /** When it was claimed (before the claim was sent): its lease lasts at least the lease time from here. */
  readonly claimedAt: number
}

export interface Decision<A> {
  /** To start now; already counted in flight. */
  readonly start: ReadonlyArray<Entry<A>>
  /** To give back unsent (cooling target, or waited too long). */
  readonly giveBack: ReadonlyArray<A>
}

interface TargetState<A> {
  waiting: Array<Entry<A>>
  inFlight: number
  unrecorded: number
  /** Whether its latest known attempt failed; unknown until claimed or sent. */
  failing: boolean | undefined
  group: string | undefined
}

const NOTHING: Decision<never> = { start: [], giveBack: [] }

export class Admission<A> {
  readonly limits: AdmissionLimits
  /** Per target with anything here; insertion order is the turn. */
  private readonly targets = new Map<string, TargetState<A>>()
  /** Cooldown ends learnt from settling (kept after a target goes idle). */
  private readonly cooling = new Map<string, number>()
  private readonly groupInFlight = new Map<string, number>()
  private waitingTotal = 0
  private inFlightTotal = 0

  constructor(limits: AdmissionLimits) {
    this.limits = limits
  }

  get inFlight() {
    return this.inFlightTotal
  }

  get waiting() {
    return this.waitingTotal
  }

  inFlightOfGroup(group: string) {
    return this.groupInFlight.get(group) ?? 0
  }

  /** Deliveries just claimed. `failing`: whether the database says the target's latest attempt failed. */
  add(entries: ReadonlyArray<Entry<A> & { readonly failing: boolean }>) {
    for (const entry of entries) {
      const state = this.target(entry.target)
      state.waiting.push(entry)
      state.group = entry.group
      state.failing ??= entry.failing
      this.waitingTotal++
      // Claimable means not cooling down (any more), whatever was heard here.
      this.cooling.delete(entry.target)
    }
  }

  /** What may start now and what must be given back; nothing starts while `paused`. */
  admit(now: number, paused: boolean): Decision<A> {
    if (paused || this.waitingTotal === 0) return NOTHING
    const start: Array<Entry<A>> = []
    const giveBack: Array<A> = []
    const served: Array<string> = []
    for (const [target, state] of this.targets) {
      if (state.waiting.length === 0) continue
      const until = this.cooling.get(target)
      if (until !== undefined && until <= now) this.cooling.delete(target)
      if (until !== undefined && until > now) {
        for (const entry of state.waiting) giveBack.push(entry.item)
        this.waitingTotal -= state.waiting.length
        state.waiting = []
        this.forgetIfIdle(target, state)
        continue
      }
      let started = false
      while (state.waiting.length > 0 && this.inFlightTotal < this.limits.concurrency && this.mayStart(state)) {
        const next = state.waiting.shift()!
        this.waitingTotal--
        if (now - next.claimedAt > this.limits.maxWaitMs) {
          giveBack.push(next.item)
          continue
        }
        this.inFlightTotal++
        state.inFlight++
        if (next.group !== undefined) this.groupInFlight.set(next.group, (this.groupInFlight.get(next.group) ?? 0) + 1)
        start.push(next)
        started = true
      }
      if (state.waiting.length === 0) this.forgetIfIdle(target, state)
      else if (started) served.push(target)
    }
    // Their turn is over: they go behind the other targets.
    for (const target of served) {
      const state = this.targets.get(target)!
      this.targets.delete(target)
      this.targets.set(target, state)
    }
    return start.length === 0 && giveBack.length === 0 ? NOTHING : { start, giveBack }
  }

  /**
   * A started send is over. `failed`: its outcome (a failed attempt or
   * not); `undefined` when it was interrupted and has no outcome to record.
   */
  sendEnded(entry: Entry<A>, failed: boolean | undefined) {
    const state = this.target(entry.target)
    this.inFlightTotal--
    state.inFlight--
    if (entry.group !== undefined) {
      const n = (this.groupInFlight.get(entry.group) ?? 1) - 1
      if (n <= 0) this.groupInFlight.delete(entry.group)
      else this.groupInFlight.set(entry.group, n)
    }
    if (failed !== undefined) {
      state.failing = failed
      state.unrecorded++
    } else {
      this.forgetIfIdle(entry.target, state)
    }
  }

  /** The outcome of an ended send was written (or given up). */
  recorded(target: string) {
    const state = this.targets.get(target)
    if (state === undefined) return
    state.unrecorded--
    this.forgetIfIdle(target, state)
  }

  /** Settling says these targets cool down until the given instants. */
  coolDown(until: ReadonlyMap<string, number>, now: number) {
    if (this.cooling.size > 1_000) {
      for (const [target, end] of this.cooling) if (end <= now) this.cooling.delete(target)
    }
    for (const [target, end] of until) this.cooling.set(target, end)
  }

  /**
   * Whether a delivery waits here only for outcomes to be recorded (its
   * target is at its bound of sends in flight or unrecorded, and nothing
   * else holds it back): then recording should not linger.
   */
  waitsForRecording(): boolean {
    if (this.waitingTotal === 0 || this.inFlightTotal >= this.limits.concurrency) return false
    for (const state of this.targets.values()) {
      if (state.waiting.length === 0 || state.unrecorded === 0 || this.mayStart(state)) continue
      // It could start if none of its target's outcomes waited to be recorded.
      if (this.mayStart({ ...state, unrecorded: 0 })) return true
    }
    return false
  }

  /** Targets this process could not start anything for now (their group is at its bound): not worth claiming. */
  saturatedTargets(): Array<string> {
    const out: Array<string> = []
    if (this.groupInFlight.size === 0) return out
    for (const [target, state] of this.targets) if (this.groupFull(state)) out.push(target)
    return out
  }

  /** Everything waiting, taken out (shutdown). */
  takeAllWaiting(): Array<A> {
    const out: Array<A> = []
    for (const [target, state] of this.targets) {
      for (const entry of state.waiting) out.push(entry.item)
      state.waiting = []
      this.forgetIfIdle(target, state)
    }
    this.waitingTotal = 0
    return out
  }

  /** Its group is at its bound, and it has a send in flight (so it may not start one more). */
  private groupFull(state: TargetState<A>) {
    return state.group !== undefined && state.inFlight > 0 &&
      (this.groupInFlight.get(state.group) ?? 0) >= this.limits.perGroup
  }

  private mayStart(state: TargetState<A>) {
    const unsettled = state.inFlight + state.unrecorded
    if (this.groupFull(state)) return false
    return state.failing === true
      ? unsettled < Math.min(this.limits.perFailingTarget, this.limits.perTarget)
      : state.inFlight < this.limits.perTarget && unsettled < UNSETTLED_PER_TARGET * this.limits.perTarget
  }

  private target(target: string) {
    let state = this.targets.get(target)
    if (state === undefined) {
      state = { waiting: [], inFlight: 0, unrecorded: 0, failing: undefined, group: undefined }
      this.targets.set(target, state)
    }
    return state
  }

  private forgetIfIdle(target: string, state: TargetState<A>) {
    if (state.inFlight === 0 && state.unrecorded === 0 && state.waiting.length === 0) this.targets.delete(target)
  }
}
