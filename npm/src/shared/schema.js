// The shared-roster log's schema: the repository's sql/rota-log-v1.sql, the one file
// both hosts apply (rota-host includes the same file at compile time). `npm pack`
// copies it into the package as sql/ (the "prepack" script); a checkout of the
// repository reads it where it lives.

import { existsSync, readFileSync } from 'node:fs'

/** The schema version this package speaks (the row sql/rota-log-v1.sql writes). */
export const SCHEMA_VERSION = 1

const FILE = `rota-log-v${SCHEMA_VERSION}.sql`
const PLACES = [
  new URL(`../../../sql/${FILE}`, import.meta.url), // a checkout: <repo>/sql
  new URL(`../../sql/${FILE}`, import.meta.url), // the installed package: <package>/sql
]

// Serializes concurrent first applications across instances (any fixed key: 'rota').
const APPLY_LOCK = 0x726f7461

/**
 * Applies the schema on a connected client (`query(text, values)`), once per
 * database: in one transaction, under an advisory lock, only when no version is there
 * yet. A database at a newer version is refused, never downgraded.
 * @returns {Promise<number>} the version found before (0: applied now)
 */
export async function applySchema(client, makeError) {
  await client.query('BEGIN')
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [APPLY_LOCK])
    const present = await client.query("SELECT to_regclass('rota_schema') IS NOT NULL AS present")
    let found = 0
    if (present.rows[0].present) {
      const r = await client.query('SELECT coalesce(max(version), 0)::int AS version FROM rota_schema')
      found = r.rows[0].version
    }
    if (found > SCHEMA_VERSION) {
      throw makeError('SCHEMA_TOO_NEW', `the database's rota log schema is version ${found}; this package speaks version ${SCHEMA_VERSION}`)
    }
    if (found < SCHEMA_VERSION) {
      const place = PLACES.find((url) => existsSync(url))
      if (place === undefined) {
        throw new Error(`the shared-roster schema ${FILE} is missing from this installation (looked in ${PLACES.map((u) => u.pathname).join(', ')})`)
      }
      await client.query(readFileSync(place, 'utf8'))
    }
    await client.query('COMMIT')
    return found
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {})
    throw error
  }
}
