/**
 * The secret of a mailed link (`/console/sign-in#<token>`,
 * `/console/confirm-address#<token>`, `/console/decide#<token>`) lives in
 * the fragment, which browsers never send to the server.
 */

/** The token in a location's `hash`: "" when there is none, or when it is not valid percent-encoding (a mangled link). */
export const fragmentToken = (hash: string): string => {
  if (hash.length <= 1) return ""
  try {
    return decodeURIComponent(hash.slice(1))
  } catch {
    // A link a mail client mangled: the page says the link is not valid instead of failing to load.
    return ""
  }
}

/**
 * On the page whose path ends with `page`, the fragment's token, then taken
 * out of the address bar and history; elsewhere "" (every screen module is
 * loaded on every console page, so another page's fragment is not read).
 */
export const takeFragmentToken = (page: string): string => {
  if (!location.pathname.endsWith(page)) return ""
  const token = fragmentToken(location.hash)
  if (location.hash.length > 1) history.replaceState(null, "", location.pathname)
  return token
}
