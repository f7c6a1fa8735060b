/** The svc console: a client of the public `/v1` API, nothing else. */
import { render } from "preact"
import { useEffect, useState } from "preact/hooks"
import type { ConsoleSession } from "../../src/api/Console.ts"
import { problemOf, SvcApi } from "./api.ts"
import { refresh, runMutation, useAtomValue } from "./atoms.ts"
import { navigate, onLinkClick, useLocation } from "./router.ts"
import { has, type Screen, screens, sessionAtom } from "./session.ts"
import { ApiKeys } from "./screens/ApiKeys.tsx"
import { Approvals } from "./screens/Approvals.tsx"
import { ConfirmAddress } from "./screens/ConfirmAddress.tsx"
import { Decide } from "./screens/Decide.tsx"
import { McpServers } from "./screens/McpServers.tsx"
import { Policies } from "./screens/Policies.tsx"
import { Promote } from "./screens/Promote.tsx"
import { Review } from "./screens/Review.tsx"
import { Reviewers } from "./screens/Reviewers.tsx"
import { SignIn } from "./screens/SignIn.tsx"
import { Telemetry } from "./screens/Telemetry.tsx"
import { Webhooks } from "./screens/Webhooks.tsx"
import { describeProblem } from "./ui.tsx"

const views: Record<string, (props: { session: ConsoleSession }) => preact.JSX.Element> = {
  "/review": Review,
  "/promote": Promote,
  "/approvals": Approvals,
  "/policies": Policies,
  "/reviewers": Reviewers,
  "/webhooks": Webhooks,
  "/telemetry": Telemetry,
  "/mcp-servers": McpServers,
  "/keys": ApiKeys
}

const signOut = SvcApi.mutation("consoleSignIn", "signOut")

const SignedOut = ({ reason }: { reason: string }) => (
  <main id="main" class="narrow">
    <h1>svc console</h1>
    <p>{reason}</p>
    <p>
      Ask an administrator for a sign-in link, made with{" "}
      <code>npm run cli -- console login --org ORG_ID --preset reviewer --name "Your name"</code>, and open it in this browser.
    </p>
  </main>
)

const Missing = ({ screen, session }: { screen: Screen; session: ConsoleSession }) => (
  <section aria-labelledby="page-title">
    <h1 id="page-title" tabIndex={-1}>{screen.label}</h1>
    <p class="notice warning" role="alert">
      This screen needs the <code>{screen.scope}</code> scope. Your session ({session.preset} preset) does not have it; ask
      for a sign-in link with a preset that does.
    </p>
  </section>
)

const Shell = ({ session }: { session: ConsoleSession }) => {
  const { path } = useLocation()
  const offered = screens.filter((screen) => has(session.scopes, screen.scope))
  const [signingOut, setSigningOut] = useState(false)
  const current = screens.find((screen) => path === screen.path || path.startsWith(`${screen.path}/`))
  useEffect(() => {
    if (path === "/" && offered[0]) navigate(offered[0].path, { replace: true })
  }, [path])
  useEffect(() => {
    document.title = current ? `${current.label} · svc console` : "svc console"
    // Moving between screens: focus the new screen's heading, as a page load would.
    const heading = document.querySelector<HTMLElement>("main h1")
    heading?.focus({ preventScroll: false })
  }, [current?.path])
  const View = current ? views[current.path] : undefined
  return (
    <>
      <a class="skip" href="#main">Skip to content</a>
      <header class="top">
        <span class="brand">svc console</span>
        <nav aria-label="Screens">
          <ul>
            {offered.map((screen) => (
              <li key={screen.path}>
                <a href={`/console${screen.path}`} aria-current={current?.path === screen.path ? "page" : undefined}>
                  {screen.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div class="who">
          <span>{session.person} · {session.preset}</span>
          <button
            type="button"
            disabled={signingOut}
            onClick={async () => {
              setSigningOut(true)
              await runMutation(signOut, {})
              refresh(sessionAtom)
              setSigningOut(false)
            }}
          >
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        {current === undefined
          ? path === "/" && offered.length === 0
            ? <p>Your session's preset offers no screen.</p>
            : path === "/" ? null : <><h1 tabIndex={-1}>Not found</h1><p>No console screen at this address.</p></>
          : !has(session.scopes, current.scope)
          ? <Missing screen={current} session={session} />
          : View && <View session={session} />}
      </main>
    </>
  )
}

const App = () => {
  const { path } = useLocation()
  if (path === "/sign-in") return <SignIn />
  // A reviewer mail's link: this one approval, without a console session.
  if (path === "/decide") return <Decide />
  // A confirmation mail's link: confirms the reviewer address, without a console session.
  if (path === "/confirm-address") return <ConfirmAddress />
  return <Authenticated />
}

const Authenticated = () => {
  const result = useAtomValue(sessionAtom)
  if (result._tag === "Initial") return <p class="boot" aria-busy="true">Loading the console…</p>
  if (result._tag === "Failure") {
    const problem = problemOf(result.cause)
    return (
      <SignedOut
        reason={problem.code === "UNAUTHENTICATED" ? "You are not signed in, or your session has ended." : `The console could not start: ${describeProblem(problem)}`}
      />
    )
  }
  return <Shell session={result.value} />
}

document.addEventListener("click", onLinkClick)
const root = document.getElementById("app")!
root.replaceChildren()
render(<App />, root)
