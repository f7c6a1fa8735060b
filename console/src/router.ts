/** The console's routes live under `/console/`; the query string holds filters, so a view can be shared as a link. */
import { useEffect, useState } from "preact/hooks"

export const BASE = "/console"

export interface Location {
  readonly path: string
  readonly query: URLSearchParams
}

const read = (): Location => ({
  path: location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) || "/" : "/",
  query: new URLSearchParams(location.search)
})

const listeners = new Set<() => void>()
addEventListener("popstate", () => listeners.forEach((listener) => listener()))

export const navigate = (to: string, options: { replace?: boolean } = {}) => {
  const url = to.startsWith("/console") ? to : `${BASE}${to}`
  if (url === location.pathname + location.search) return
  if (options.replace) history.replaceState(null, "", url)
  else history.pushState(null, "", url)
  listeners.forEach((listener) => listener())
}

/** Changes query parameters of the current view (`undefined` or "" removes one). */
export const setQuery = (changes: Record<string, string | undefined>) => {
  const query = new URLSearchParams(location.search)
  for (const [key, value] of Object.entries(changes)) {
    if (value === undefined || value === "") query.delete(key)
    else query.set(key, value)
  }
  const search = query.toString()
  navigate(`${location.pathname}${search ? `?${search}` : ""}`, { replace: true })
}

export const useLocation = (): Location => {
  const [current, setCurrent] = useState(read)
  useEffect(() => {
    const listener = () => setCurrent(read())
    listeners.add(listener)
    return () => void listeners.delete(listener)
  }, [])
  return current
}

/** Same-document navigation for ordinary links (keeps Ctrl+click and the like). */
export const onLinkClick = (event: MouseEvent) => {
  if (
    event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey
  ) return
  const anchor = (event.target as Element | null)?.closest?.("a")
  if (!anchor || anchor.origin !== location.origin || !anchor.pathname.startsWith(BASE) || anchor.target) return
  event.preventDefault()
  navigate(anchor.pathname + anchor.search)
}
