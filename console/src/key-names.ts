/**
 * People and API keys by name: the organization's keys, read where the
 * session may list them (`keys.manage`), so a record that names a key by
 * its id ("created by", "decided by") shows the key's name instead.
 */
import { SvcApi } from "./api.ts"
import { useAtomValue } from "./atoms.ts"

const keysAtom = SvcApi.query("apiKeys", "list", { reactivityKeys: ["keys"] })

/** The organization's key names by id; empty while loading or without `keys.manage`. */
export const useKeyNames = (): ReadonlyMap<string, string | null> => {
  const keys = useAtomValue(keysAtom)
  return new Map(keys._tag === "Success" ? keys.value.keys.map((key) => [key.id, key.name]) : [])
}

/**
 * Who an actor record names, in words: `console:<person>`, an API key by its
 * name (an unnamed or unknown one by its whole id, to match on the API keys
 * screen), or the command line (null).
 */
export const actorName = (actor: string | null, names: ReadonlyMap<string, string | null>): string => {
  if (actor === null) return "the command line"
  if (actor.startsWith("console:")) return `${actor.slice("console:".length)} (console)`
  const name = names.get(actor)
  return name == null ? `API key ${actor}` : `${name} (API key)`
}
