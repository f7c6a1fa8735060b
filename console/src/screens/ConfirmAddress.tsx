/**
 * `/console/confirm-address#<token>`: the page a confirmation mail links
 * to. The token is in the fragment (never sent by the browser, so in no
 * server log) and is posted only when the person presses Confirm, so a link
 * preview cannot use it up. Confirming makes the address the mail went to
 * receive approval requests; nobody is signed in.
 */
import { Exit } from "effect"
import { useEffect, useRef, useState } from "preact/hooks"
import { problemOf, SvcApi } from "../api.ts"
import { useMutation } from "../atoms.ts"
import { takeFragmentToken } from "../fragment.ts"
import { describeProblem, Time } from "../ui.tsx"

const confirmAtom = SvcApi.mutation("reviewerConfirmation", "confirmAddress")

/** Read once at load, then taken out of the address bar and history. */
const token = takeFragmentToken("/confirm-address")

type Outcome =
  | { readonly kind: "confirmed"; readonly address: string; readonly at: string }
  | { readonly kind: "used" | "expired" | "replaced" | "invalid" | "error"; readonly text: string }
  | undefined

const titles = {
  confirmed: "Address confirmed",
  used: "Link already used",
  expired: "Link expired",
  replaced: "Address no longer in use",
  invalid: "Cannot confirm this address",
  error: "Cannot confirm this address"
} as const

export const ConfirmAddress = () => {
  const { run, busy } = useMutation(confirmAtom)
  const [outcome, setOutcome] = useState<Outcome>(undefined)
  const heading = useRef<HTMLHeadingElement>(null)
  useEffect(() => {
    document.title = "Confirm reviewer address · svc"
  }, [])
  useEffect(() => heading.current?.focus(), [outcome?.kind])
  const submit = async () => {
    const exit = await run({ payload: { token } })
    if (Exit.isSuccess(exit)) return setOutcome({ kind: "confirmed", address: exit.value.reviewer_email, at: exit.value.confirmed_at })
    const problem = problemOf(exit.cause)
    switch (problem.code) {
      case "CONFIRMATION_LINK_USED":
        return setOutcome({ kind: "used", text: "This confirmation link was already used. A link works once." })
      case "CONFIRMATION_LINK_EXPIRED":
        return setOutcome({ kind: "expired", text: "This confirmation link has expired. Ask for the address to be set again: a new mail is sent." })
      case "REVIEWER_ADDRESS_REPLACED":
        return setOutcome({
          kind: "replaced",
          text: "The address this mail went to is no longer the organization's reviewer address. Nothing was confirmed."
        })
      case "CONFIRMATION_LINK_INVALID":
        return setOutcome({ kind: "invalid", text: "This is not a confirmation link of this service." })
      default:
        return setOutcome({ kind: "error", text: `Confirming failed: ${describeProblem(problem)}` })
    }
  }
  return (
    <main id="main" class="narrow">
      <h1 ref={heading} tabIndex={-1}>{outcome === undefined ? "Confirm your reviewer address" : titles[outcome.kind]}</h1>
      {outcome?.kind === "confirmed"
        ? (
          <p class="notice success" role="status">
            <strong>{outcome.address}</strong> now receives approval requests and deadline notices (confirmed <Time iso={outcome.at} />).
            Each mail links to the approval it is about.
          </p>
        )
        : outcome !== undefined
        ? <p class="notice error" role="alert">{outcome.text}</p>
        : token === ""
        ? (
          <p class="notice warning">
            This page needs the whole link of the confirmation mail, including the part after <code>#</code>.
          </p>
        )
        : (
          <>
            <p>
              This address was set to receive an organization's approval requests. Each such mail carries a link that opens and
              decides one approval, so none is sent before you confirm that this mailbox is yours.
            </p>
            <p class="muted">The link works once. Confirming signs you in to nothing.</p>
            <button type="button" class="primary" disabled={busy} onClick={submit}>Confirm</button>
          </>
        )}
    </main>
  )
}
