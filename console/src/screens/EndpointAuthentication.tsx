/**
 * How svc authenticates to a webhook endpoint, as the endpoint forms edit it
 * (docs/webhooks.md, "Endpoint authentication"): none, OAuth 2.0 client
 * credentials, a client certificate for mutual TLS, or both. The client
 * secret and the private key are write-only (typed or pasted, sent, never
 * shown again: the API answers hints only).
 */
import type { NotificationEndpoint } from "../../../src/api/Notifications.ts"

export type AuthKind = "none" | "oauth" | "certificate" | "both"

export interface AuthDraft {
  readonly kind: AuthKind
  readonly tokenUrl: string
  readonly clientId: string
  readonly clientSecret: string
  readonly scope: string
  readonly audience: string
  readonly certificate: string
  readonly privateKey: string
}

export const emptyAuth: AuthDraft = {
  kind: "none",
  tokenUrl: "",
  clientId: "",
  clientSecret: "",
  scope: "",
  audience: "",
  certificate: "",
  privateKey: ""
}

const kinds: ReadonlyArray<{ readonly kind: AuthKind; readonly label: string }> = [
  { kind: "none", label: "None (signatures only)" },
  { kind: "oauth", label: "OAuth 2.0 client credentials" },
  { kind: "certificate", label: "Client certificate (mutual TLS)" },
  { kind: "both", label: "Both" }
]

const optional = (text: string) => (text.trim() === "" ? undefined : text.trim())

/** The draft as the API takes it: both fields always (null removes what the endpoint had). */
export const authPayload = (draft: AuthDraft) => {
  const oauth = draft.kind === "oauth" || draft.kind === "both"
  const certificate = draft.kind === "certificate" || draft.kind === "both"
  const scope = optional(draft.scope)
  const audience = optional(draft.audience)
  return {
    auth: oauth
      ? {
        type: "oauth2_client_credentials" as const,
        token_url: draft.tokenUrl.trim(),
        client_id: draft.clientId.trim(),
        client_secret: draft.clientSecret,
        ...(scope === undefined ? {} : { scope }),
        ...(audience === undefined ? {} : { audience })
      }
      : null,
    tls_client_certificate: certificate ? { certificate: draft.certificate, private_key: draft.privateKey } : null
  }
}

/** What the endpoint's card says of its authentication. */
export const authText = (endpoint: NotificationEndpoint): string => {
  const parts: Array<string> = []
  if (endpoint.auth !== null) {
    parts.push(`OAuth 2.0 client credentials (client ${endpoint.auth.client_id}, token endpoint ${endpoint.auth.token_url_hint})`)
  }
  const certificate = endpoint.tls_client_certificate
  if (certificate !== null) {
    parts.push(`client certificate ${certificate.subject}, expires ${new Date(certificate.not_after).toLocaleDateString()}`)
  }
  return parts.length === 0 ? "none (signatures only)" : parts.join("; ")
}

export const AuthenticationFields = (
  { legend, draft, onChange }: { legend: string; draft: AuthDraft; onChange: (draft: AuthDraft) => void }
) => {
  const set = (change: Partial<AuthDraft>) => onChange({ ...draft, ...change })
  const oauth = draft.kind === "oauth" || draft.kind === "both"
  const certificate = draft.kind === "certificate" || draft.kind === "both"
  return (
    <fieldset>
      <legend>{legend}</legend>
      <p class="muted">
        Deliveries are always signed. A receiver behind an API gateway may also want a bearer token or a client certificate. Secrets are stored encrypted and never shown again.
      </p>
      <div class="actions" role="radiogroup" aria-label={`${legend}: kind`}>
        {kinds.map((choice) => (
          <label class="inline" key={choice.kind}>
            <input type="radio" name={legend} checked={draft.kind === choice.kind} onChange={() => set({ kind: choice.kind })} />
            {choice.label}
          </label>
        ))}
      </div>
      {oauth && (
        <div class="stack">
          <label class="wide">
            Token URL
            <input type="url" required value={draft.tokenUrl} placeholder="https://login.example.com/oauth/token" onInput={(event) => set({ tokenUrl: event.currentTarget.value })} />
          </label>
          <label>
            Client ID
            <input type="text" required value={draft.clientId} onInput={(event) => set({ clientId: event.currentTarget.value })} />
          </label>
          <label>
            Client secret
            <input type="password" required autocomplete="off" value={draft.clientSecret} onInput={(event) => set({ clientSecret: event.currentTarget.value })} />
          </label>
          <label>
            Scope (optional)
            <input type="text" value={draft.scope} onInput={(event) => set({ scope: event.currentTarget.value })} />
          </label>
          <label>
            Audience (optional)
            <input type="text" value={draft.audience} onInput={(event) => set({ audience: event.currentTarget.value })} />
          </label>
        </div>
      )}
      {certificate && (
        <div class="stack">
          <label class="wide">
            Client certificate (PEM)
            <textarea class="mono" required rows={4} value={draft.certificate} placeholder="-----BEGIN CERTIFICATE-----" onInput={(event) => set({ certificate: event.currentTarget.value })} />
          </label>
          <label class="wide">
            Private key (PEM, unencrypted)
            <textarea class="mono" required rows={4} autocomplete="off" value={draft.privateKey} placeholder="-----BEGIN PRIVATE KEY-----" onInput={(event) => set({ privateKey: event.currentTarget.value })} />
          </label>
        </div>
      )}
    </fieldset>
  )
}
