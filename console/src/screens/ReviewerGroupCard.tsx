/**
 * One reviewer group on the Reviewers screen: its members with their
 * addresses and whether each is confirmed, removing a member, setting or
 * clearing a member's address, adding a member, deleting the group. Every
 * change is the group's `PUT` with the other members' addresses left out,
 * so they stay as they are (and a pending one is not mailed again).
 */
import { Exit } from "effect"
import { useEffect, useRef, useState } from "preact/hooks"
import type { GroupInput, GroupMember, ReviewerGroup } from "../../../src/api/Reviewers.ts"
import { problemOf, SvcApi } from "../api.ts"
import { useMutation } from "../atoms.ts"
import { Confirm, describeProblem, type NoticeValue, Time } from "../ui.tsx"
import {
  addPayload,
  addressPayload,
  checkGroup,
  emptyMember,
  type FieldIssue,
  type MemberDraft,
  memberInput,
  problemIssues,
  removePayload,
  reviewerText
} from "./reviewer-draft.ts"
import { FieldProblems, KeyMember, MemberFields, names } from "./ReviewerFields.tsx"

export const putGroupAtom = SvcApi.mutation("reviewers", "putGroup")
const deleteGroupAtom = SvcApi.mutation("reviewers", "deleteGroup")

/** An id fragment from a group's name (names may hold '.' and ':'). */
const slug = (name: string) => name.replace(/[^A-Za-z0-9_-]/g, "_")

const AddressStatus = ({ member }: { member: GroupMember }) =>
  member.email_status === "invited"
    ? <span class="badge pending" title="Only the person makes an address theirs: they accept it in the console or with their own key">invited: waiting for the person to accept</span>
    : member.email_status === "pending"
    ? <span class="badge pending">waiting for confirmation</span>
    : member.email_status === "confirmed"
    ? <span class="badge active">confirmed</span>
    : <span class="muted">no address</span>

export const GroupCard = (
  { group, keyChoices, onNotice }: { group: ReviewerGroup; keyChoices: boolean; onNotice: (notice: NoticeValue) => void }
) => {
  const id = `group-${slug(group.name)}`
  const put = useMutation(putGroupAtom)
  const remove = useMutation(deleteGroupAtom)
  const [issues, setIssues] = useState<ReadonlyArray<FieldIssue>>([])
  const [editing, setEditing] = useState<number | undefined>(undefined)
  const [confirming, setConfirming] = useState(false)
  /** The outcome of the card's last change, said in the card beside its controls. */
  const [said, setSaid] = useState<string | undefined>(undefined)

  /** Stores the group's new members; the outcome in words, or the problems next to the members. */
  const save = async (payload: GroupInput, done: (saved: ReviewerGroup) => string) => {
    const refused = checkGroup(group.name, payload)
    setIssues(refused)
    setSaid(undefined)
    if (refused.length > 0) return
    const exit = await put.run({ params: { name: group.name }, payload, reactivityKeys: ["reviewer-groups"] })
    if (Exit.isSuccess(exit)) {
      setEditing(undefined)
      return setSaid(done(exit.value))
    }
    setIssues(problemIssues(problemOf(exit.cause), describeProblem))
  }
  const deleteGroup = async () => {
    setIssues([])
    const exit = await remove.run({ params: { name: group.name }, reactivityKeys: ["reviewer-groups"] })
    setConfirming(false)
    if (Exit.isSuccess(exit)) return onNotice({ tone: "success", text: `Group ${group.name} deleted.` })
    setIssues(problemIssues(problemOf(exit.cause), describeProblem))
  }

  return (
    <li class="card" aria-labelledby={`${id}-title`}>
      <h3 id={`${id}-title`}>{group.name}</h3>
      <p class="muted">
        {group.members.length === 1 ? "1 member" : `${group.members.length} members`}; updated <Time iso={group.updated_at} />.
      </p>
      {group.members.length === 0
        ? <p class="empty">No members: nobody can decide the approvals assigned to this group.</p>
        : (
          <div class="table-wrap">
            <table aria-labelledby={`${id}-title`}>
              <thead>
                <tr>
                  <th scope="col">Member</th>
                  <th scope="col">Address</th>
                  <th scope="col"><span class="sr-only">Actions</span></th>
                </tr>
              </thead>
              <tbody>
                {group.members.map((member, index) => {
                  const who = reviewerText(member)
                  return (
                    <tr key={who}>
                      <td data-label="Member">
                        {member.console_user !== undefined
                          ? <>{member.console_user} <span class="muted">(console person)</span></>
                          : <KeyMember id={member.key_id ?? ""} named={keyChoices} />}
                      </td>
                      <td data-label="Address">
                        {editing === index
                          ? (
                            <AddressEditor
                              who={who}
                              initial={member.email ?? ""}
                              invalid={names(issues, `members[${index}].email`)}
                              busy={put.busy}
                              onCancel={() => setEditing(undefined)}
                              onSave={(email) =>
                                save(addressPayload(group.members, index, email), (saved) =>
                                  saved.members.find((m) => reviewerText(m) === who)?.email_status === "invited"
                                    ? `${who} is invited to use this address: it gets approval mail once they accept it themselves and confirm it.`
                                    : `Address of ${who} set.`)}
                            />
                          )
                          : (
                            <>
                              {member.email !== null && <span class="address">{member.email}</span>} <AddressStatus member={member} />
                            </>
                          )}
                      </td>
                      <td class="row-action">
                        <div class="actions row-actions">
                          <button
                            type="button"
                            aria-label={`Change address of ${who}`}
                            disabled={put.busy}
                            onClick={() => setEditing(index)}
                          >
                            Change address
                          </button>
                          {member.email !== null && (
                            <button
                              type="button"
                              aria-label={`Clear address of ${who}`}
                              disabled={put.busy}
                              onClick={() => save(addressPayload(group.members, index, null), () => `Address of ${who} cleared: no more approval mail goes to it.`)}
                            >
                              Clear address
                            </button>
                          )}
                          <button
                            type="button"
                            class="danger"
                            aria-label={`Remove ${who} from ${group.name}`}
                            disabled={put.busy}
                            onClick={() => save(removePayload(group.members, index), () => `${who} removed from ${group.name}.`)}
                          >
                            Remove
                          </button>
                        </div>
                      </td>
                    </tr>
                  )
                })}
              </tbody>
            </table>
          </div>
        )}
      <FieldProblems id={`${id}-problems`} issues={issues} lead={`${group.name} was not changed:`} />
      <div class="refusal-slot" role="status">{said !== undefined && <p class="notice success done">{said}</p>}</div>
      <AddMember group={group} id={id} keyChoices={keyChoices} onDone={setSaid} />
      <div class="actions">
        <button type="button" class="danger" aria-label={`Delete group ${group.name}`} onClick={() => setConfirming(true)}>Delete group</button>
      </div>
      <Confirm
        id={`${id}-confirm`}
        open={confirming}
        title={`Delete the group ${group.name}?`}
        confirmLabel="Delete group"
        busy={remove.busy}
        onCancel={() => setConfirming(false)}
        onConfirm={deleteGroup}
      >
        <p>
          Its members keep their addresses for their other groups. The service refuses while a policy names the group or a pending
          approval is assigned to it.
        </p>
      </Confirm>
    </li>
  )
}

/** A member's new address, in place of the address; focused when it opens, as a dialog would be. */
const AddressEditor = (
  { who, initial, invalid, busy, onSave, onCancel }: {
    who: string
    initial: string
    invalid: boolean
    busy: boolean
    onSave: (email: string) => void
    onCancel: () => void
  }
) => {
  const [address, setAddress] = useState(initial)
  const input = useRef<HTMLInputElement>(null)
  useEffect(() => input.current?.focus(), [])
  return (
    <form
      class="form inline-edit"
      noValidate
      aria-label={`New address of ${who}`}
      onSubmit={(event) => {
        event.preventDefault()
        onSave(address.trim())
      }}
    >
      <label>
        New address of {who}
        <input
          ref={input}
          type="email"
          value={address}
          required
          aria-invalid={invalid ? "true" : undefined}
          onInput={(event) => setAddress(event.currentTarget.value)}
          onKeyDown={(event) => {
            if (event.key === "Escape") onCancel()
          }}
        />
      </label>
      <button type="submit" class="primary" disabled={busy}>Save address</button>
      <button type="button" onClick={onCancel}>Cancel</button>
    </form>
  )
}

const AddMember = (
  { group, id, keyChoices, onDone }: { group: ReviewerGroup; id: string; keyChoices: boolean; onDone: (text: string | undefined) => void }
) => {
  const [draft, setDraft] = useState<MemberDraft>(emptyMember)
  const [issues, setIssues] = useState<ReadonlyArray<FieldIssue>>([])
  const put = useMutation(putGroupAtom)
  // Problems name members by their place: once the members change, they name someone else.
  useEffect(() => setIssues([]), [group.updated_at])
  const field = `members[${group.members.length}]`
  return (
    <form
      class="stack"
      noValidate
      aria-labelledby={`${id}-add-title`}
      onSubmit={async (event) => {
        event.preventDefault()
        const payload = addPayload(group.members, draft)
        const refused = checkGroup(group.name, payload)
        setIssues(refused)
        onDone(undefined)
        if (refused.length > 0) return
        const exit = await put.run({ params: { name: group.name }, payload, reactivityKeys: ["reviewer-groups"] })
        if (Exit.isSuccess(exit)) {
          const added = reviewerText(memberInput(draft))
          setDraft(emptyMember())
          return onDone(draft.email.trim() === "" ? `${added} added to ${group.name}.` : `${added} added to ${group.name}; their address waits for confirmation.`)
        }
        setIssues(problemIssues(problemOf(exit.cause), describeProblem))
      }}
    >
      <h4 id={`${id}-add-title`}>Add a member to {group.name}</h4>
      <MemberFields
        id={`${id}-new`}
        legend="New member"
        field={field}
        value={draft}
        onChange={setDraft}
        issues={issues}
        keyChoices={keyChoices}
      >
        <button type="submit" disabled={put.busy}>Add member</button>
      </MemberFields>
      <FieldProblems id={`${id}-add-problems`} issues={issues} lead="The member was not added:" />
    </form>
  )
}
