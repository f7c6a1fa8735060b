/**
 * "API keys": the organization's keys (never their material) and who made
 * each, creation with chosen scopes (the key shown once; it outlives the
 * console session that makes it, and the screen says so), revocation; and
 * console sessions, each with "Revoke".
 */
import { Exit } from "effect"
import { useState } from "preact/hooks"
import type { ApiKey, ConsoleSession, ConsoleSessionSummary } from "../../../src/api/Console.ts"
import { Scopes } from "../../../src/api/Security.ts"
import { problemOf, SvcApi } from "../api.ts"
import { refresh, useAtomValue, useMutation } from "../atoms.ts"
import { sessionAtom } from "../session.ts"
import { Confirm, Loaded, Notice, type NoticeValue, Refusal, refusalOf, type RefusalValue, SecretOnce, formatTime, Time } from "../ui.tsx"

const keysAtom = SvcApi.query("apiKeys", "list", { reactivityKeys: ["keys"] })
const sessionsAtom = SvcApi.query("console", "listSessions", { reactivityKeys: ["sessions"] })
const createAtom = SvcApi.mutation("apiKeys", "create")
const revokeKeyAtom = SvcApi.mutation("apiKeys", "revoke")
const revokeSessionAtom = SvcApi.mutation("console", "revokeSession")

type Pending = { kind: "key"; key: ApiKey } | { kind: "session"; session: ConsoleSessionSummary } | undefined

export const ApiKeys = ({ session }: { session: ConsoleSession }) => {
  const keys = useAtomValue(keysAtom)
  const sessions = useAtomValue(sessionsAtom)
  const [notice, setNotice] = useState<NoticeValue | undefined>(undefined)
  const [created, setCreated] = useState<string | undefined>(undefined)
  const [pending, setPending] = useState<Pending>(undefined)
  /** The latest refused revocation, said in the row of the key or session it names. */
  const [refused, setRefused] = useState<{ readonly id: string; readonly refusal: RefusalValue } | undefined>(undefined)
  const refusalIn = (id: string) => <Refusal id={`refusal-${id}`} refusal={refused?.id === id ? refused.refusal : undefined} onDismiss={() => setRefused(undefined)} />
  const revokeKey = useMutation(revokeKeyAtom)
  const revokeSession = useMutation(revokeSessionAtom)
  const confirm = async () => {
    setRefused(undefined)
    setNotice(undefined)
    if (pending?.kind === "key") {
      const { key } = pending
      const exit = await revokeKey.run({ params: { key_id: key.id }, reactivityKeys: ["keys"] })
      if (Exit.isSuccess(exit)) setNotice({ tone: "success", text: `Key ${key.key_prefix}… revoked: it stops working at once.` })
      else setRefused({ id: key.id, refusal: refusalOf(`Revoking the key ${key.name ?? `${key.key_prefix}…`} (${key.id})`, problemOf(exit.cause)) })
    } else if (pending?.kind === "session") {
      const { session } = pending
      const exit = await revokeSession.run({ params: { session_id: session.id }, reactivityKeys: ["sessions"] })
      if (Exit.isSuccess(exit) && session.current) refresh(sessionAtom)
      if (Exit.isSuccess(exit)) setNotice({ tone: "success", text: `Session of ${session.person} revoked: it ends at once.` })
      else setRefused({ id: session.id, refusal: refusalOf(`Revoking the session of ${session.person} (signed in ${formatTime(session.created_at)})`, problemOf(exit.cause)) })
    }
    setPending(undefined)
  }
  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title" tabIndex={-1}>API keys</h1>
      <Notice notice={notice} onClose={() => setNotice(undefined)} />
      {created && <SecretOnce label="The new API key" secret={created} onDone={() => setCreated(undefined)} />}
      <CreateKey
        grantable={session.scopes}
        onCreated={(key) => {
          setCreated(key)
          setNotice({
            tone: "success",
            text: `Key created, recorded as made by ${session.person}. It keeps working after this console session ends, until it is revoked here.`
          })
        }}
      />
      <h2 id="keys-title">Keys</h2>
      <Loaded result={keys} what="API keys">
        {(value) =>
          value.keys.length === 0
            ? <p class="empty">No API keys.</p>
            : (
              <div class="table-wrap">
                <table aria-labelledby="keys-title">
                  <thead><tr><th scope="col">Name and id</th><th scope="col">Key</th><th scope="col">Scopes</th><th scope="col">Created</th><th scope="col">Created by</th><th scope="col"><span class="sr-only">Action</span></th></tr></thead>
                  <tbody>
                    {value.keys.map((key) => (
                      <tr key={key.id}>
                        <td data-label="Name and id">{key.name ?? <span class="muted">unnamed</span>}<code class="key-id">{key.id}</code></td>
                        <td data-label="Key"><code class="prefix">{key.key_prefix}…</code></td>
                        <td data-label="Scopes">{key.scopes.join(", ")}</td>
                        <td data-label="Created"><Time iso={key.created_at} /></td>
                        <td data-label="Created by">{createdBy(key.created_by, value.keys)}</td>
                        <td class="row-action">
                          {key.revoked_at
                            ? <span class="muted">revoked</span>
                            : <button type="button" class="danger" aria-label={`Revoke key ${key.name ?? key.key_prefix}`} onClick={() => setPending({ kind: "key", key })}>Revoke</button>}
                          {refusalIn(key.id)}
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
      </Loaded>
      <h2 id="sessions-title">Console sessions</h2>
      <Loaded result={sessions} what="console sessions">
        {(value) => (
          <div class="table-wrap">
            <table aria-labelledby="sessions-title">
              <thead><tr><th scope="col">Person</th><th scope="col">Preset</th><th scope="col">Signed in</th><th scope="col">Last seen</th><th scope="col">Ends</th><th scope="col"><span class="sr-only">Action</span></th></tr></thead>
              <tbody>
                {value.sessions.map((item) => (
                  <tr key={item.id}>
                    <td data-label="Person">{item.person}{item.current && <span class="muted"> (this session)</span>}</td>
                    <td data-label="Preset">{item.preset}</td>
                    <td data-label="Signed in"><Time iso={item.created_at} /></td>
                    <td data-label="Last seen"><Time iso={item.last_seen_at} /></td>
                    <td data-label="Ends"><Time iso={item.expires_at} /></td>
                    <td class="row-action">
                      <button type="button" class="danger" aria-label={`Revoke session of ${item.person}`} onClick={() => setPending({ kind: "session", session: item })}>Revoke</button>
                      {refusalIn(item.id)}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Loaded>
      <Confirm
        open={pending !== undefined}
        title={pending?.kind === "session" ? "Revoke this console session?" : "Revoke this API key?"}
        confirmLabel={pending?.kind === "session" ? "Revoke session" : "Revoke key"}
        busy={revokeKey.busy || revokeSession.busy}
        onCancel={() => setPending(undefined)}
        onConfirm={confirm}
      >
        <p>
          {pending?.kind === "session"
            ? `${pending.session.person}'s session ends at once${pending.session.current ? ": that is you, in this browser" : ""}.`
            : pending?.kind === "key"
            ? `Every request with ${pending.key.key_prefix}… is refused from now on.`
            : ""}
        </p>
      </Confirm>
    </section>
  )
}

const CreateKey = (
  { grantable, onCreated }: { grantable: ReadonlyArray<string>; onCreated: (key: string) => void }
) => {
  const [name, setName] = useState("")
  const [scopes, setScopes] = useState<ReadonlySet<string>>(new Set())
  const create = useMutation(createAtom)
  const [refusal, setRefusal] = useState<RefusalValue | undefined>(undefined)
  return (
    <form
      class="form stack card"
      aria-labelledby="create-key"
      onSubmit={async (event) => {
        event.preventDefault()
        setRefusal(undefined)
        const chosen = Scopes.filter((scope) => scopes.has(scope))
        const exit = await create.run({ payload: { ...(name.trim() ? { name: name.trim() } : {}), scopes: chosen }, reactivityKeys: ["keys"] })
        if (Exit.isSuccess(exit)) {
          setName("")
          setScopes(new Set())
          return onCreated(exit.value.key)
        }
        setRefusal(refusalOf(`Creating the key ${name.trim() === "" ? "(unnamed)" : name.trim()}`, problemOf(exit.cause)))
      }}
    >
      <h2 id="create-key">New API key</h2>
      <p class="muted" id="key-outlives-session">
        A key you create here is recorded as made by you, but it is not tied to your console session: it keeps working after you sign out or
        your session ends, until someone revokes it below.
      </p>
      <label>
        Name
        <input value={name} maxLength={200} onInput={(event) => setName(event.currentTarget.value)} placeholder="ci-pipeline" />
      </label>
      <fieldset>
        <legend>Scopes</legend>
        {Scopes.filter((scope) => grantable.includes(scope)).map((scope) => (
          <label class="inline" key={scope}>
            <input
              type="checkbox"
              checked={scopes.has(scope)}
              onChange={(event) => {
                const next = new Set(scopes)
                if (event.currentTarget.checked) next.add(scope)
                else next.delete(scope)
                setScopes(next)
              }}
            />
            {scope}
          </label>
        ))}
      </fieldset>
      <div class="actions"><button type="submit" class="primary" aria-describedby="key-outlives-session" disabled={create.busy || scopes.size === 0}>Create key</button></div>
      <Refusal id="create-key-refusal" refusal={refusal} onDismiss={() => setRefusal(undefined)} />
    </form>
  )
}

/** Who made a key, as a person reads it: a console person's name, the key that made it by name (and id), or the command line. */
const createdBy = (actor: string | null, keys: ReadonlyArray<ApiKey>) => {
  if (actor === null) return <span class="muted">command line</span>
  if (actor.startsWith("console:")) return `${actor.slice("console:".length)} (console)`
  const maker = keys.find((key) => key.id === actor)
  return (
    <>
      {maker?.name ? `${maker.name} (API key)` : "API key"}
      <code class="key-id">{actor}</code>
    </>
  )
}
