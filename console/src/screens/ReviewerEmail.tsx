/** The Webhooks screen's reviewer email address: where approval requests and deadline notices go, and whether it is confirmed. */
import { Exit } from "effect"
import { useState } from "preact/hooks"
import { problemOf, SvcApi } from "../api.ts"
import { useAtomValue, useMutation } from "../atoms.ts"
import { Loaded, Notice, type NoticeValue, Refusal, refusalOf, type RefusalValue } from "../ui.tsx"

const settingsAtom = SvcApi.query("notifications", "getSettings", { reactivityKeys: ["settings"] })
const saveSettingsAtom = SvcApi.mutation("notifications", "updateSettings")

export const ReviewerEmail = () => {
  /** What the latest change did, said in this card. */
  const [notice, setNotice] = useState<NoticeValue | undefined>(undefined)
  const settings = useAtomValue(settingsAtom)
  const save = useMutation(saveSettingsAtom)
  const [draft, setDraft] = useState<string | undefined>(undefined)
  /** The latest refused Save email, said under the form. */
  const [refusal, setRefusal] = useState<RefusalValue | undefined>(undefined)
  return (
    <section class="card" aria-labelledby="reviewer-email">
      <h2 id="reviewer-email">Reviewer email</h2>
      <Loaded result={settings} what="the notification settings">
        {(value) => (
          <form
            class="form"
            onSubmit={async (event) => {
              event.preventDefault()
              const address = (draft ?? value.reviewer_email ?? "").trim()
              setRefusal(undefined)
              setNotice(undefined)
    setNotice(undefined)
              const exit = await save.run({ payload: { reviewer_email: address === "" ? null : address }, reactivityKeys: ["settings"] })
              if (Exit.isSuccess(exit)) {
                setDraft(undefined)
                setNotice({
                  tone: "success",
                  text: exit.value.reviewer_email === null
                    ? "Reviewer email cleared."
                    : exit.value.reviewer_email_status === "confirmed"
                    ? `Reviewer email set to ${exit.value.reviewer_email}.${exit.value.email_notifier ? "" : " Email is not sent until the service has an SMTP server (SVC_SMTP_URL)."}`
                    : `Reviewer email set to ${exit.value.reviewer_email}, pending confirmation: a confirmation mail goes there (through the service's SMTP server, SVC_SMTP_URL). It gets no approval request until its link is opened.`
                })
              } else {
                const what = address === "" ? "Clearing the reviewer email" : `Saving the reviewer email ${address}`
                setRefusal(refusalOf(what, problemOf(exit.cause)))
              }
            }}
          >
            <label>
              Address that gets approval requests and deadline notices
              <input type="email" value={draft ?? value.reviewer_email ?? ""} onInput={(event) => setDraft(event.currentTarget.value)} placeholder="reviewers@example.com" />
            </label>
            <button type="submit" disabled={save.busy}>Save email</button>
            {value.reviewer_email !== null && (
              <p>
                <span class={`badge ${value.reviewer_email_status === "confirmed" ? "active" : "pending"}`}>
                  {value.reviewer_email_status === "confirmed" ? "confirmed" : "pending confirmation"}
                </span>{" "}
                {value.reviewer_email_status === "confirmed"
                  ? `${value.reviewer_email} confirmed it reads this service's mail.`
                  : `${value.reviewer_email} gets no approval request until the link of its confirmation mail is opened. Save the address again to send a new one.`}
              </p>
            )}
            <p class="muted">{value.email_notifier ? "Email is active." : "Email is off (no confirmed address, or no SMTP server configured)."}</p>
          </form>
        )}
      </Loaded>
      <Notice notice={notice} onClose={() => setNotice(undefined)} />
      <Refusal id="reviewer-email-refusal" refusal={refusal} onDismiss={() => setRefusal(undefined)} />
    </section>
  )
}
