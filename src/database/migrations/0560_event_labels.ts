import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * What later stages need of an event is stored beside its body when the
 * event is written, instead of being parsed out of the body again: the
 * delivery label (`<type> <approval id>`). Events written before this
 * migration and not dispatched yet get theirs from the body, once, here.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE events ADD COLUMN label text`
  yield* sql`
    UPDATE events
    SET label = trim(type || ' ' || coalesce(substring(body from '"approval_id"\\s*:\\s*"([^"\\\\]*)"'), ''))
    WHERE dispatched_at IS NULL
  `
})
