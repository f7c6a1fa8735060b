/**
 * Delegations on the Reviewers screen: the organization's delegations not
 * yet over, a new one from the signed-in person (the API makes the caller
 * the delegator) to someone else for a window, and ending one's own.
 */
import { Exit } from "effect"
import { useState } from "preact/hooks"
import type { ConsoleSession } from "../../../src/api/Console.ts"
import type { Reviewer } from "../../../src/api/Deciders.ts"
import { type Delegation, MAX_DELEGATION_DAYS } from "../../../src/api/Delegations.ts"
import { problemOf, SvcApi } from "../api.ts"
import { useAtomValue, useMutation } from "../atoms.ts"
import { Confirm, describeProblem, formatTime, Loaded, type NoticeValue, Refusal, refusalOf, type RefusalValue, Time } from "../ui.tsx"
import { checkDelegation, delegateOf, type FieldIssue, instantOf, localIn, type MemberKind, problemIssues, reviewerText } from "./reviewer-draft.ts"
import { FieldProblems, names, PersonFields } from "./ReviewerFields.tsx"

const delegationsAtom = SvcApi.query("reviewers", "listDelegations", { reactivityKeys: ["delegations"] })
const delegateAtom = SvcApi.mutation("reviewers", "delegate")
const endAtom = SvcApi.mutation("reviewers", "endDelegation")

const isOwn = (delegation: Delegation, session: ConsoleSession) => delegation.delegator.console_user === session.person

/**
 * A delegation's person in words: a console person by name, an API key by
 * the name the delegation carries for it (`key_names`: the API names the
 * organization's keys to anyone who may delegate), else by its id.
 */
const personText = (reviewer: Reviewer, names: Delegation["key_names"]): string => {
  if (reviewer.console_user !== undefined) return reviewer.console_user
  const name = names?.[reviewer.key_id ?? ""]
  return name === undefined ? reviewerText(reviewer) : `${name} (API key)`
}

/** The same, in a table cell: a key's name, then its id to match it elsewhere. */
const Person = ({ reviewer, names }: { reviewer: Reviewer; names: Delegation["key_names"] }) => {
  if (reviewer.console_user !== undefined) return <>{reviewer.console_user}</>
  const name = names?.[reviewer.key_id ?? ""]
  return (
    <>
      {name === undefined ? "API key" : <><strong>{name}</strong> (API key)</>}
      <code class="key-id">{reviewer.key_id}</code>
    </>
  )
}

export const Delegations = (
  { session, keyChoices, onNotice }: { session: ConsoleSession; keyChoices: boolean; onNotice: (notice: NoticeValue) => void }
) => {
  const delegations = useAtomValue(delegationsAtom)
  const [ending, setEnding] = useState<Delegation | undefined>(undefined)
  const end = useMutation(endAtom)
  /** The latest refused End, said in the row of the delegation it names. */
  const [refused, setRefused] = useState<{ readonly id: string; readonly refusal: RefusalValue } | undefined>(undefined)
  const confirmEnd = async () => {
    if (!ending) return
    setRefused(undefined)
    const exit = await end.run({ params: { delegation_id: ending.delegation_id }, reactivityKeys: ["delegations"] })
    setEnding(undefined)
    const to = personText(ending.delegate, ending.key_names)
    if (Exit.isSuccess(exit)) onNotice({ tone: "success", text: `Delegation to ${to} ended: from now on they decide only what they could before.` })
    else setRefused({ id: ending.delegation_id, refusal: refusalOf(`Ending the delegation to ${to} (until ${formatTime(ending.ends_at)})`, problemOf(exit.cause)) })
  }
  return (
    <section class="delegations" aria-labelledby="delegations-title">
      <h2 id="delegations-title">Delegations</h2>
      <p class="muted">
        While a delegation lasts, its delegate decides the approvals assigned to every group of the person who delegated, under their own name
        and in that person's place: under a quorum their vote is the delegator's one vote.
      </p>
      <NewDelegation session={session} keyChoices={keyChoices} />
      <Loaded result={delegations} what="the delegations">
        {(value) =>
          value.delegations.length === 0
            ? <p class="empty">No delegations under way or to come.</p>
            : (
              <div class="table-wrap">
                <table aria-labelledby="delegations-title">
                  <thead>
                    <tr>
                      <th scope="col">From</th>
                      <th scope="col">To</th>
                      <th scope="col">Starts</th>
                      <th scope="col">Ends</th>
                      <th scope="col"><span class="sr-only">Action</span></th>
                    </tr>
                  </thead>
                  <tbody>
                    {value.delegations.map((delegation) => (
                      <tr key={delegation.delegation_id}>
                        <td data-label="From"><Person reviewer={delegation.delegator} names={delegation.key_names} />{isOwn(delegation, session) && <span class="muted"> (you)</span>}</td>
                        <td data-label="To"><Person reviewer={delegation.delegate} names={delegation.key_names} /></td>
                        <td data-label="Starts"><Time iso={delegation.starts_at} /></td>
                        <td data-label="Ends"><Time iso={delegation.ends_at} /></td>
                        <td class="row-action">
                          {isOwn(delegation, session)
                            ? (
                              <button type="button" class="danger" aria-label={`End delegation to ${personText(delegation.delegate, delegation.key_names)}`} onClick={() => setEnding(delegation)}>
                                End
                              </button>
                            )
                            : <span class="muted">only its delegator ends it</span>}
                          <Refusal
                            id={`refusal-${delegation.delegation_id}`}
                            refusal={refused?.id === delegation.delegation_id ? refused.refusal : undefined}
                            onDismiss={() => setRefused(undefined)}
                          />
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
      </Loaded>
      <Confirm
        id="end-delegation-title"
        open={ending !== undefined}
        title="End this delegation now?"
        confirmLabel="End delegation"
        busy={end.busy}
        onCancel={() => setEnding(undefined)}
        onConfirm={confirmEnd}
      >
        <p>{ending ? `${personText(ending.delegate, ending.key_names)} stops deciding in your place at once.` : ""}</p>
      </Confirm>
    </section>
  )
}

const NewDelegation = (
  { session, keyChoices }: { session: ConsoleSession; keyChoices: boolean }
) => {
  /** The delegation just made, said under its Delegate button. */
  const [made, setMade] = useState<string | undefined>(undefined)
  const [kind, setKind] = useState<MemberKind>("console_user")
  const [who, setWho] = useState("")
  const [starts, setStarts] = useState("")
  const [ends, setEnds] = useState(() => localIn(Date.now(), 7))
  const [issues, setIssues] = useState<ReadonlyArray<FieldIssue>>([])
  const create = useMutation(delegateAtom)
  return (
    <form
      class="form stack card"
      noValidate
      aria-labelledby="new-delegation-title"
      onSubmit={async (event) => {
        event.preventDefault()
        const startsAt = instantOf(starts)
        const payload = { delegate: delegateOf(kind, who), ...(startsAt === "" ? {} : { starts_at: startsAt }), ends_at: instantOf(ends) }
        const refused = ends.trim() === "" ? [{ field: "ends_at", message: "Choose when the delegation ends." }] : checkDelegation(payload)
        setIssues(refused)
        setMade(undefined)
        if (refused.length > 0) return
        const exit = await create.run({ payload, reactivityKeys: ["delegations"] })
        if (Exit.isSuccess(exit)) {
          setWho("")
          setStarts("")
          return setMade(`Delegated to ${personText(exit.value.delegate, exit.value.key_names)} until ${formatTime(exit.value.ends_at)}.`)
        }
        setIssues(problemIssues(problemOf(exit.cause), describeProblem))
      }}
    >
      <h3 id="new-delegation-title">New delegation</h3>
      <p>
        From: <strong>{session.person}</strong> <span class="muted">(you: a delegation is always its maker's own)</span>
      </p>
      <fieldset>
        <legend>Delegate to</legend>
        <div class="form">
          <PersonFields
            id="delegate"
            kind={kind}
            who={who}
            keyChoices={keyChoices}
            invalid={names(issues, "delegate")}
            onChange={(nextKind, nextWho) => {
              setKind(nextKind)
              setWho(nextWho)
            }}
          />
        </div>
      </fieldset>
      <div class="form">
        <label>
          Starts (empty: now)
          <input type="datetime-local" value={starts} aria-invalid={names(issues, "starts_at") ? "true" : undefined} onInput={(event) => setStarts(event.currentTarget.value)} />
        </label>
        <label>
          Ends
          <input type="datetime-local" required value={ends} aria-invalid={names(issues, "ends_at") ? "true" : undefined} onInput={(event) => setEnds(event.currentTarget.value)} />
        </label>
      </div>
      <p class="muted">In your browser's time zone; at most {MAX_DELEGATION_DAYS} days.</p>
      <FieldProblems id="new-delegation-problems" issues={issues} lead="Not delegated:" />
      <div class="actions"><button type="submit" class="primary" disabled={create.busy}>Delegate</button></div>
      <div class="refusal-slot" role="status">{made !== undefined && <p class="notice success done">{made}</p>}</div>
    </form>
  )
}
