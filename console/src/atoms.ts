/**
 * Preact hooks over Effect's atom registry: a component reads an atom (and
 * re-renders when it changes) and runs result-function atoms (the API
 * client's mutations) as promises of their `Exit`.
 */
import { Exit } from "effect"
import { AsyncResult, type Atom, AtomRegistry } from "effect/reactivity"
import { useCallback, useEffect, useReducer, useRef, useState } from "preact/hooks"

/** Query results stay a little while after their last reader, so moving between screens does not refetch at once. */
export const registry = AtomRegistry.make({ defaultIdleTTL: 5_000 })

export const useAtomValue = <A>(atom: Atom.Atom<A>): A => {
  const [, rerender] = useReducer((n: number) => n + 1, 0)
  const value = registry.get(atom)
  useEffect(() => {
    const unsubscribe = registry.subscribe(atom, () => rerender(undefined as never))
    // It may have changed between this render and the subscription.
    if (registry.get(atom) !== value) rerender(undefined as never)
    return unsubscribe
  }, [atom])
  return value
}

export const refresh = (atom: Atom.Atom<unknown>) => registry.refresh(atom)

/** Calls of one mutation atom run one after another: setting it again would interrupt the call under way. */
const queues = new WeakMap<object, Promise<unknown>>()

/**
 * Runs a mutation atom with `arg`; resolves with the outcome once the call
 * settles. The atom is mounted for the duration of the call.
 */
export const runMutation = <W, A, E>(atom: Atom.AtomResultFn<W, A, E>, arg: W): Promise<Exit.Exit<A, E>> => {
  const previous = queues.get(atom) ?? Promise.resolve()
  const call = previous.then(() => runNow(atom, arg))
  queues.set(atom, call)
  return call
}

const runNow = <W, A, E>(atom: Atom.AtomResultFn<W, A, E>, arg: W): Promise<Exit.Exit<A, E>> =>
  new Promise((resolve) => {
    let started = false
    let done = false
    let unsubscribe: (() => void) | undefined
    const settle = (result: AsyncResult.AsyncResult<A, E>) => {
      if (!started || done || result.waiting || result._tag === "Initial") return
      done = true
      queueMicrotask(() => unsubscribe?.())
      resolve(result._tag === "Success" ? Exit.succeed(result.value) : Exit.failCause(result.cause))
    }
    unsubscribe = registry.subscribe(atom, settle)
    started = true
    registry.set(atom, arg)
    if (done) unsubscribe()
  })

/** A mutation as a component uses it: `run` and whether a call is under way. */
export const useMutation = <W, A, E>(atom: Atom.AtomResultFn<W, A, E>) => {
  const [busy, setBusy] = useState(false)
  const alive = useRef(true)
  useEffect(() => () => {
    alive.current = false
  }, [])
  const run = useCallback(async (arg: W) => {
    setBusy(true)
    try {
      return await runMutation(atom, arg)
    } finally {
      if (alive.current) setBusy(false)
    }
  }, [atom])
  return { run, busy }
}
