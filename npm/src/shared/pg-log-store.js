// The shared roster's input log on PostgreSQL (the `pg` package, loaded only here).
//
// One store per roster and connection pool. It only calls the functions of
// sql/rota-log-v1.sql, which hold the rules (gapless seq, database time, the leader's
// epoch, compaction), so this file and rota-host's `PgLogStore` cannot disagree on
// them. Readers are woken by NOTIFY and by a timer: the table is the truth, a lost
// notification only delays a reader until the next poll.

import { applySchema } from './schema.js'

/** Codes of {@link LogStoreError}. */
export const LOG_STORE_ERROR_CODES = Object.freeze([
  'STALE_EPOCH', // a leader-only append, renewal or step-down at an epoch that lost the lease
  'COMPACTED', // a read from below the compaction point: start from the latest snapshot
  'NO_SNAPSHOT', // a snapshot past the log's head, or a compaction with no snapshot there
  'SCHEMA_TOO_NEW', // the database has a newer schema version than this package
  'INVALID_INPUT', // a bad argument (checked before anything is sent)
  'DATABASE', // anything else from the database or the connection (see `cause`)
])

export class LogStoreError extends Error {
  constructor(code, message, options = undefined) {
    super(message, options)
    this.name = 'LogStoreError'
    this.code = code
  }
}

// The schema's own SQLSTATEs (class RT) and what they mean here.
const SQLSTATES = { RT001: 'STALE_EPOCH', RT002: 'COMPACTED', RT003: 'NO_SNAPSHOT' }

function wrap(error) {
  if (error instanceof LogStoreError) return error
  const code = SQLSTATES[error?.code] ?? 'DATABASE'
  return new LogStoreError(code, error?.message ?? String(error), { cause: error })
}

function invalid(message) {
  return new LogStoreError('INVALID_INPUT', message)
}

// int8 columns arrive as strings; every seq, epoch and time here fits a double exactly.
function int(value) {
  const n = Number(value)
  if (!Number.isSafeInteger(n)) throw new LogStoreError('DATABASE', `not a safe integer from the database: ${value}`)
  return n
}

function positive(name, value) {
  if (!Number.isSafeInteger(value) || value <= 0) throw invalid(`${name} must be a positive integer, not ${value}`)
  return value
}

function name(what, value) {
  if (typeof value !== 'string' || value === '') throw invalid(`${what} must be a non-empty string`)
  return value
}

export class PgLogStore {
  #pool
  #ownsPool
  #roster
  #pollMs

  /**
   * Connects, applies the schema when the database has none yet, and returns the
   * store of one roster (types/shared.d.ts has the types). `pool` is used as it is
   * (and not ended by `close`); otherwise a pool of `max` (default 4) connections to
   * `connectionString`. `pollMs` (default 1000): how often readers poll.
   */
  static async connect({ connectionString, pool, roster, pollMs = 1000, max = 4 } = {}) {
    name('roster', roster)
    positive('pollMs', pollMs)
    if ((pool === undefined) === (connectionString === undefined)) {
      throw invalid('give exactly one of connectionString and pool')
    }
    let owns = false
    if (pool === undefined) {
      let pg
      try {
        pg = (await import('pg')).default
      } catch (error) {
        throw new LogStoreError('DATABASE', "the shared roster needs the 'pg' package: npm install pg", { cause: error })
      }
      pool = new pg.Pool({ connectionString, max: positive('max', max) })
      // An idle client whose server went away: the pool drops it and makes a new one.
      pool.on('error', () => {})
      owns = true
    }
    const store = new PgLogStore(pool, owns, roster, pollMs)
    try {
      const client = await pool.connect()
      try {
        await applySchema(client, (code, message) => new LogStoreError(code, message))
      } finally {
        client.release()
      }
    } catch (error) {
      if (owns) await pool.end().catch(() => {})
      throw wrap(error)
    }
    return store
  }

  constructor(pool, ownsPool, roster, pollMs) {
    this.#pool = pool
    this.#ownsPool = ownsPool
    this.#roster = roster
    this.#pollMs = pollMs
  }

  get roster() {
    return this.#roster
  }

  async #query(text, values) {
    try {
      return await this.#pool.query(text, values === null ? [] : [this.#roster, ...values])
    } catch (error) {
      throw wrap(error)
    }
  }

  /**
   * Appends a batch in one transaction: the entries get the next seqs, in order, and
   * one `now` from the database clock. With `epoch` the batch is leader-only (ticks,
   * probe results, owner expiries) and refused with STALE_EPOCH unless `instance`
   * holds the leader lease at that epoch. Returns `{ firstSeq, lastSeq, now }`.
   */
  async append(entries, { instance, epoch } = {}) {
    if (!Array.isArray(entries) || entries.length === 0) throw invalid('append takes a non-empty array of entries')
    for (const e of entries) if (typeof e !== 'string') throw invalid('every entry is a string (the input JSON)')
    name('instance', instance)
    if (epoch !== undefined) positive('epoch', epoch)
    const r = await this.#query('SELECT * FROM rota_append($1, $2, $3, $4)', [instance, epoch ?? null, entries])
    const row = r.rows[0]
    return { firstSeq: int(row.first_seq), lastSeq: int(row.last_seq), now: int(row.now_ms) }
  }

  /**
   * Entries with seq >= `seq`, in order, at most `limit`. COMPACTED when `seq` is at
   * or below the compaction point.
   */
  async readFrom(seq, { limit = 1000 } = {}) {
    positive('seq', seq)
    positive('limit', limit)
    const r = await this.#query('SELECT * FROM rota_read($1, $2, $3)', [seq, limit])
    return r.rows.map((r) => ({ seq: int(r.seq), now: int(r.now_ms), instance: r.instance, epoch: r.epoch === null ? null : int(r.epoch), entry: r.entry }))
  }

  /** `{ lastSeq, lastNow, compactedThrough }`. */
  async head() {
    const r = await this.#query('SELECT * FROM rota_head($1)', [])
    const row = r.rows[0]
    return { lastSeq: int(row.last_seq), lastNow: int(row.last_now), compactedThrough: int(row.compacted_through) }
  }

  /** The database clock, epoch ms. */
  async now() {
    return int((await this.#query('SELECT rota_db_now() AS now', null)).rows[0].now)
  }

  /**
   * Calls `onWake({ reason, seq? })` when entries may have been appended: 'notify'
   * (with the newest seq), 'listen' (after LISTEN took, so what came before it is
   * read), and 'poll' every `pollMs` as the backstop. A dropped LISTEN connection is
   * made again. The caller reads with {@link readFrom}; wakes carry no entries.
   * `listen: false` polls only. `onError` hears of lost LISTEN connections.
   */
  subscribe(onWake, { pollMs = this.#pollMs, listen = true, onError = () => {} } = {}) {
    if (typeof onWake !== 'function') throw invalid('subscribe takes a function')
    positive('pollMs', pollMs)
    const roster = this.#roster
    const pool = this.#pool
    let closed = false
    let client = null
    let pid = null
    let relisten = null

    const onNotification = (message) => {
      if (message.channel !== 'rota_log' || typeof message.payload !== 'string') return
      const space = message.payload.indexOf(' ')
      if (space < 0 || message.payload.slice(space + 1) !== roster) return
      onWake({ reason: 'notify', seq: int(message.payload.slice(0, space)) })
    }
    const drop = (error) => {
      if (client !== null) {
        const c = client
        client = null
        pid = null
        c.off('notification', onNotification)
        c.release(error ?? true) // never back to the pool: its LISTEN would leak
      }
      if (error !== undefined) onError(wrap(error))
      if (!closed && relisten === null) {
        relisten = setTimeout(() => {
          relisten = null
          connect()
        }, pollMs)
      }
    }
    const connect = async () => {
      if (closed) return
      let c
      try {
        c = await pool.connect()
      } catch (error) {
        drop(error)
        return
      }
      if (closed) {
        c.release(true)
        return
      }
      client = c
      c.on('notification', onNotification)
      // Kept on for good: a released client may still report its end, and an
      // 'error' with no listener would crash the process.
      c.on('error', (error) => {
        if (client === c) drop(error)
      })
      c.on('end', () => {
        if (client === c) drop(new Error('the LISTEN connection ended'))
      })
      try {
        await c.query('LISTEN rota_log')
        const r = await c.query('SELECT pg_backend_pid() AS pid')
        if (client === c) pid = r.rows[0].pid
      } catch (error) {
        if (client === c) drop(error)
        return
      }
      if (!closed && client === c) onWake({ reason: 'listen' })
    }

    const timer = setInterval(() => onWake({ reason: 'poll' }), pollMs)
    timer.unref?.()
    if (listen) connect()
    return {
      /** The backend pid of the LISTEN connection (null while there is none). */
      get listenerPid() {
        return pid
      },
      close() {
        closed = true
        clearInterval(timer)
        clearTimeout(relisten)
        drop()
      },
    }
  }

  /** Records `instance`'s heartbeat at database time; returns that time. */
  async heartbeat(instance) {
    name('instance', instance)
    const r = await this.#query('SELECT rota_heartbeat($1, $2) AS seen', [instance])
    return int(r.rows[0].seen)
  }

  /**
   * Instances whose last heartbeat is `ttlMs` or more ago, by name. A heartbeat from
   * before the database server started counts as made at its start (no mass expiry
   * after the database itself was down).
   */
  async expiredInstances(ttlMs) {
    positive('ttlMs', ttlMs)
    const r = await this.#query('SELECT * FROM rota_expired_instances($1, $2)', [ttlMs])
    return r.rows.map((row) => ({ instance: row.instance, lastSeen: int(row.last_seen) }))
  }

  /**
   * The leader's expiry of `instance`, atomic with its heartbeat: only while its
   * heartbeat is still lapsed for `ttlMs` (grace after a database restart included),
   * appends `entry` (its `expireOwner`) as a leader-only entry at `epoch` (STALE_EPOCH
   * when that lease was lost) and forgets the instance. A heartbeat either lands first
   * (and this returns null: nothing appended) or waits for this to commit. Returns
   * the entry's seq.
   */
  async expireInstance(instance, ttlMs, { leader, epoch }, entry) {
    name('instance', instance)
    positive('ttlMs', ttlMs)
    name('leader', leader)
    if (!Number.isSafeInteger(epoch) || epoch < 0) throw invalid(`epoch must be a whole number, not ${epoch}`)
    if (typeof entry !== 'string' || entry === '') throw invalid('entry must be a non-empty string')
    const r = await this.#query('SELECT * FROM rota_expire_instance($1, $2, $3, $4, $5, $6)', [instance, ttlMs, leader, epoch, entry])
    const row = r.rows[0]
    return row?.expired === true ? int(row.seq) : null
  }

  /** Forgets an instance (once its expiry is in the log). True when it was there. */
  async forgetInstance(instance) {
    name('instance', instance)
    return (await this.#query('SELECT rota_forget_instance($1, $2) AS gone', [instance])).rows[0].gone
  }

  /**
   * Takes the leader lease for `ttlMs` when it is free (none, stepped down or lapsed),
   * at the next epoch; the holder asking again keeps its epoch and extends.
   */
  async acquireLeader(instance, ttlMs) {
    name('instance', instance)
    positive('ttlMs', ttlMs)
    const r = (await this.#query('SELECT * FROM rota_acquire_leader($1, $2, $3)', [instance, ttlMs])).rows[0]
    return { acquired: r.acquired === true, instance: r.instance, epoch: int(r.epoch), expiresAt: int(r.expires_at) }
  }

  /** Extends the lease held at `epoch`; STALE_EPOCH once it was lost. Returns the new expiry. */
  async renewLeader(instance, epoch, ttlMs) {
    name('instance', instance)
    positive('epoch', epoch)
    positive('ttlMs', ttlMs)
    const r = await this.#query('SELECT rota_renew_leader($1, $2, $3, $4) AS expires_at', [instance, epoch, ttlMs])
    return int(r.rows[0].expires_at)
  }

  /** Ends the lease held at `epoch` now. True when it was held. */
  async stepDown(instance, epoch) {
    name('instance', instance)
    positive('epoch', epoch)
    return (await this.#query('SELECT rota_step_down($1, $2, $3) AS done', [instance, epoch])).rows[0].done
  }

  /** Stores the state after entries 1..seq (the core's export); NO_SNAPSHOT past the head. */
  async writeSnapshot(seq, state) {
    positive('seq', seq)
    if (typeof state !== 'string') throw invalid('a snapshot state is a string')
    await this.#query('SELECT rota_write_snapshot($1, $2, $3)', [seq, state])
  }

  /** The newest snapshot `{ seq, state, createdAt }`, or null. */
  async latestSnapshot() {
    const r = await this.#query('SELECT * FROM rota_latest_snapshot($1)', [])
    if (r.rows.length === 0) return null
    const row = r.rows[0]
    return { seq: int(row.seq), state: row.state, createdAt: int(row.created_at) }
  }

  /**
   * Deletes the entries at or below `through` and the older snapshots; a snapshot at
   * `through` must exist (NO_SNAPSHOT otherwise). Returns how many entries went.
   */
  async compact(through) {
    positive('through', through)
    return int((await this.#query('SELECT rota_compact($1, $2) AS deleted', [through])).rows[0].deleted)
  }

  /** Ends the pool when the store made it. Subscriptions must be closed first. */
  async close() {
    if (this.#ownsPool) await this.#pool.end()
  }
}
