/**
 * "Reviewers": the organization's reviewer groups (docs/approvals.md,
 * "Reviewer groups") with each member's address and whether it is
 * confirmed; a new group with its first members; each group's members
 * edited (`ReviewerGroupCard.tsx`); and, with `approvals.decide`,
 * delegations (`Delegations.tsx`). Every problem the API (or the typed
 * client's check of the contract) names is shown next to its form, naming
 * the field.
 */
import { Exit } from "effect"
import { useState } from "preact/hooks"
import type { ConsoleSession } from "../../../src/api/Console.ts"
import { MAX_GROUP_MEMBERS } from "../../../src/api/Reviewers.ts"
import { problemOf, SvcApi } from "../api.ts"
import { useAtomValue, useMutation } from "../atoms.ts"
import { has } from "../session.ts"
import { describeProblem, Loaded, Notice, type NoticeValue } from "../ui.tsx"
import { Delegations } from "./Delegations.tsx"
import { checkGroup, createPayload, emptyMember, type FieldIssue, type MemberDraft, problemIssues } from "./reviewer-draft.ts"
import { FieldProblems, KeyChoices, MemberFields, names } from "./ReviewerFields.tsx"
import { GroupCard, putGroupAtom } from "./ReviewerGroupCard.tsx"

const groupsAtom = SvcApi.query("reviewers", "listGroups", { reactivityKeys: ["reviewer-groups"] })

export const Reviewers = ({ session }: { session: ConsoleSession }) => {
  const groups = useAtomValue(groupsAtom)
  const [notice, setNotice] = useState<NoticeValue | undefined>(undefined)
  // Key fields offer the organization's keys when the session may list them.
  const keyChoices = has(session.scopes, "keys.manage")
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title" tabIndex={-1}>Reviewers</h1>
      <Notice notice={notice} onClose={() => setNotice(undefined)} />
      {keyChoices && <KeyChoices />}
      <p class="muted">
        A reviewer group names who may decide the approvals a policy assigns to it: console persons and API keys holding{" "}
        <code>approvals.decide</code>. An address given here invites its person: it gets the group's approval mail once the person
        accepts it (signed in as themselves, on the Approvals screen) and confirms it from the mailbox.
      </p>
      <NewGroup existing={groups._tag === "Success" ? groups.value.groups.map((group) => group.name) : []} keyChoices={keyChoices} onNotice={setNotice} />
      <h2 id="groups-title">Reviewer groups</h2>
      <Loaded result={groups} what="the reviewer groups">
        {(value) =>
          value.groups.length === 0
            ? <p class="empty">No reviewer groups yet.</p>
            : (
              <ul class="cards" aria-labelledby="groups-title">
                {value.groups.map((group) => <GroupCard key={group.name} group={group} keyChoices={keyChoices} onNotice={setNotice} />)}
              </ul>
            )}
      </Loaded>
      {has(session.scopes, "approvals.decide") && <Delegations session={session} keyChoices={keyChoices} onNotice={setNotice} />}
    </section>
  )
}

const NewGroup = (
  { existing, keyChoices, onNotice }: { existing: ReadonlyArray<string>; keyChoices: boolean; onNotice: (notice: NoticeValue) => void }
) => {
  const [name, setName] = useState("")
  const [members, setMembers] = useState<ReadonlyArray<MemberDraft>>(() => [emptyMember()])
  const [issues, setIssues] = useState<ReadonlyArray<FieldIssue>>([])
  const put = useMutation(putGroupAtom)
  const change = (index: number, member: MemberDraft) => setMembers(members.map((m, i) => (i === index ? member : m)))
  return (
    <form
      class="form stack card"
      noValidate
      aria-labelledby="new-group-title"
      onSubmit={async (event) => {
        event.preventDefault()
        const payload = createPayload(members)
        // The API's PUT replaces an existing group's members: a new group must not do that unseen.
        const refused = existing.includes(name)
          ? [{ field: "name", message: `A group named ${name} exists: change its members below.` }]
          : checkGroup(name, payload)
        setIssues(refused)
        if (refused.length > 0) return
        const exit = await put.run({ params: { name }, payload, reactivityKeys: ["reviewer-groups"] })
        if (Exit.isSuccess(exit)) {
          const pending = exit.value.members.filter((member) => member.email_status === "invited").length
          setName("")
          setMembers([emptyMember()])
          return onNotice({
            tone: "success",
            text: `Group ${exit.value.name} saved with ${exit.value.members.length} member${exit.value.members.length === 1 ? "" : "s"}${
              pending > 0 ? `; ${pending} address${pending === 1 ? " is an invitation" : "es are invitations"}: each person accepts theirs` : ""
            }.`
          })
        }
        setIssues(problemIssues(problemOf(exit.cause), describeProblem))
      }}
    >
      <h2 id="new-group-title">New reviewer group</h2>
      <label>
        Name
        <input
          required
          value={name}
          placeholder="payments-leads"
          aria-describedby="new-group-name-hint"
          aria-invalid={names(issues, "name") ? "true" : undefined}
          onInput={(event) => setName(event.currentTarget.value)}
        />
      </label>
      <p id="new-group-name-hint" class="muted">
        1 to 64 letters, digits, '.', '_', ':' or '-', starting with a letter or digit.
      </p>
      {members.map((member, index) => (
        <MemberFields
          key={index}
          id={`new-member-${index}`}
          legend={`Member ${index + 1}`}
          field={`members[${index}]`}
          value={member}
          onChange={(value) => change(index, value)}
          issues={issues}
          keyChoices={keyChoices}
        >
          {members.length > 1 && (
            <button type="button" aria-label={`Remove member ${index + 1}`} onClick={() => setMembers(members.filter((_, i) => i !== index))}>
              Remove
            </button>
          )}
        </MemberFields>
      ))}
      <FieldProblems id="new-group-problems" issues={issues} lead="The group was not saved:" />
      <div class="actions">
        <button type="button" disabled={members.length >= MAX_GROUP_MEMBERS} onClick={() => setMembers([...members, emptyMember()])}>
          Add another member
        </button>
        <button type="submit" class="primary" disabled={put.busy}>Create group</button>
      </div>
    </form>
  )
}
