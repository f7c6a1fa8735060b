/**
 * Messages about settings (why svc cannot start, `StartFailure.ts`) may
 * quote a URL an operator gave: its user name and password never leave in
 * them.
 */

/** What stands for a URL's user name and password in a message about a setting. */
const SETTING_MASK = "***"

/**
 * `text`, a message about a setting, with the user information of every
 * URL-like word in it replaced by `SETTING_MASK`: `smtp://svc:pw@host` and a
 * mistyped `smtp//svc:pw@host` both become `…//***@host`, `svc:pw@host`
 * alone `***@host`. The user information runs to the word's last `@`, so a
 * password holding `@` or `/` goes whole. Settings are the operator's own
 * short text; each match starts at a fixed position (`//`, or a word's
 * start) and ends at the word's end.
 */
export const maskSettingText = (text: string): string =>
  text
    .replace(/\/\/[^\s"']*@/g, `//${SETTING_MASK}@`)
    .replace(/(^|[\s"'=(])[^\s"'/?#@:]+:(?!\/\/)[^\s"']*@/g, `$1${SETTING_MASK}@`)
