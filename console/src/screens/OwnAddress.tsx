/**
 * "Your reviewer address" on the Approvals screen: the signed-in person's own
 * address, and the only place it becomes theirs. An address an
 * administrator invited them to is accepted here (the API takes it from the
 * person's own session); they may set another, or clear it.
 */
import { Exit } from "effect"
import { useState } from "preact/hooks"
import { problemOf, SvcApi } from "../api.ts"
import { useAtomValue, useMutation } from "../atoms.ts"
import { Loaded, Notice, type NoticeValue, Refusal, refusalOf, type RefusalValue } from "../ui.tsx"

const ownAddressAtom = SvcApi.query("reviewers", "ownAddress", { reactivityKeys: ["own-address"] })
const setOwnAddressAtom = SvcApi.mutation("reviewers", "setOwnAddress")

const statusWords = {
  invited: "invited by an administrator: not yours until you accept it",
  pending: "waiting for you to confirm it from the mail sent there",
  confirmed: "confirmed: approval mail for your groups goes there"
} as const

export const OwnAddress = () => {
  /** What the latest change did, said in this card. */
  const [notice, setNotice] = useState<NoticeValue | undefined>(undefined)
  const own = useAtomValue(ownAddressAtom)
  const set = useMutation(setOwnAddressAtom)
  const [draft, setDraft] = useState("")
  /** The latest refused change, said in this card: what was asked (accept, clear, another address) and why. */
  const [refusal, setRefusal] = useState<RefusalValue | undefined>(undefined)
  const run = async (email: string | null, what: string, done: string) => {
    setRefusal(undefined)
    setNotice(undefined)
    const exit = await set.run({ payload: { email }, reactivityKeys: ["own-address"] })
    if (Exit.isSuccess(exit)) {
      setDraft("")
      return setNotice({ tone: "success", text: done })
    }
    setRefusal(refusalOf(what, problemOf(exit.cause)))
  }
  return (
    <section class="own-address card" aria-labelledby="own-address-title">
      <h2 id="own-address-title">Your reviewer address</h2>
      <Loaded result={own} what="your reviewer address">
        {(value) => (
          <>
            {value.email === null
              ? <p class="muted">None: approvals for your reviewer groups wait for you here.</p>
              : (
                <p>
                  <strong>{value.email}</strong> <span class={`badge ${value.email_status === "confirmed" ? "active" : "pending"}`}>
                    {value.email_status === null ? "" : statusWords[value.email_status]}
                  </span>
                </p>
              )}
            <div class="actions">
              {value.email !== null && value.email_status === "invited" && (
                <button
                  type="button"
                  class="primary"
                  disabled={set.busy}
                  onClick={() => run(value.email, `Accepting ${value.email}`, `You accepted ${value.email}: confirm it from the mail sent there.`)}
                >
                  Accept this address
                </button>
              )}
              {value.email !== null && (
                <button type="button" disabled={set.busy} onClick={() => run(null, "Clearing your reviewer address", "Your reviewer address is cleared.")}>Clear</button>
              )}
            </div>
          </>
        )}
      </Loaded>
      <form
        class="form"
        noValidate
        onSubmit={(event) => {
          event.preventDefault()
          if (draft.trim() !== "") void run(draft.trim(), `Using ${draft.trim()} as your reviewer address`, `${draft.trim()} is yours once you confirm it from the mail sent there.`)
        }}
      >
        <label>
          Set another address
          <input type="email" value={draft} placeholder="you@example.com" onInput={(event) => setDraft(event.currentTarget.value)} />
        </label>
        <div class="actions"><button type="submit" disabled={set.busy || draft.trim() === ""}>Use this address</button></div>
      </form>
      <Notice notice={notice} onClose={() => setNotice(undefined)} />
      <Refusal id="own-address-refusal" refusal={refusal} onDismiss={() => setRefusal(undefined)} />
    </section>
  )
}
