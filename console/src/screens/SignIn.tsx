/**
 * `/console/sign-in#<token>`: the link's secret is in the fragment (never
 * sent to the server by the browser, so never in a log) and is posted only
 * when the person presses "Sign in", so a link preview cannot use it up.
 */
import { useEffect, useRef, useState } from "preact/hooks"
import { Exit } from "effect"
import { problemOf, SvcApi } from "../api.ts"
import { refresh, useMutation } from "../atoms.ts"
import { navigate } from "../router.ts"
import { sessionAtom } from "../session.ts"
import { takeFragmentToken } from "../fragment.ts"
import { describeProblem } from "../ui.tsx"

const signIn = SvcApi.mutation("consoleSignIn", "signIn")

/** Read once at load, then taken out of the address bar and history. */
const token = takeFragmentToken("/sign-in")

type Outcome = { kind: "used" | "expired" | "invalid" | "error"; text: string } | undefined

export const SignIn = () => {
  const { run, busy } = useMutation(signIn)
  const [outcome, setOutcome] = useState<Outcome>(undefined)
  const heading = useRef<HTMLHeadingElement>(null)
  useEffect(() => heading.current?.focus(), [outcome?.kind])
  const submit = async () => {
    const exit = await run({ payload: { token } })
    if (Exit.isSuccess(exit)) {
      refresh(sessionAtom)
      navigate("/", { replace: true })
      return
    }
    const problem = problemOf(exit.cause)
    switch (problem.code) {
      case "LINK_USED":
        return setOutcome({ kind: "used", text: "This sign-in link was already used. A link works once." })
      case "LINK_EXPIRED":
        return setOutcome({ kind: "expired", text: "This sign-in link has expired." })
      case "LINK_INVALID":
        return setOutcome({ kind: "invalid", text: "This is not a sign-in link of this service." })
      default:
        return setOutcome({ kind: "error", text: `Signing in failed: ${describeProblem(problem)}` })
    }
  }
  const title = outcome === undefined
    ? "Sign in to the svc console"
    : outcome.kind === "used"
    ? "Link already used"
    : outcome.kind === "expired"
    ? "Link expired"
    : "Cannot sign in"
  return (
    <main id="main" class="narrow">
      <h1 ref={heading} tabIndex={-1}>{title}</h1>
      {outcome !== undefined
        ? (
          <>
            <p class="notice error" role="alert">{outcome.text}</p>
            <p>
              Ask for a new link: <code>npm run cli -- console login --org ORG_ID --preset PRESET --name "NAME"</code>.
            </p>
          </>
        )
        : token === ""
        ? (
          <p class="notice warning">
            This page needs the whole sign-in link, including the part after <code>#</code>. Open the link printed by{" "}
            <code>npm run cli -- console login</code>.
          </p>
        )
        : (
          <>
            <p>Press the button to start your console session in this browser. The link then stops working.</p>
            <button type="button" class="primary" disabled={busy} onClick={submit}>Sign in</button>
          </>
        )}
    </main>
  )
}
