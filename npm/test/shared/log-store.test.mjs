// The log contract of the shared roster, on a real PostgreSQL (scripts/postgres.sh;
// `make test-shared` starts one and sets ROTA_PG_URL). rota-host's
// tests/shared_log.rs checks the same contract on its implementation.
//
//   ROTA_PG_URL=$(scripts/postgres.sh start) node --test npm/test/shared/
//   ROTA_TEST_SEED=<n> replays the random batch sizes.

import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import pg from 'pg'
import { LogStoreError, PgLogStore, SCHEMA_VERSION } from '../../src/shared/index.js'

const URL_ = process.env.ROTA_PG_URL
if (!URL_) throw new Error('ROTA_PG_URL is not set: ROTA_PG_URL=$(scripts/postgres.sh start) node --test npm/test/shared/')

const SEED = Number(process.env.ROTA_TEST_SEED ?? Math.floor(Math.random() * 2 ** 31))
console.log(`log-store tests: ROTA_TEST_SEED=${SEED}`)

// mulberry32: a small seeded generator.
function random(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

// A roster name no other test (or run) uses.
let rosters = 0
const rosterName = (what) => `node-${what}-${process.pid}-${Date.now()}-${++rosters}`

const stores = []
async function open(roster, options = {}) {
  const store = await PgLogStore.connect({ connectionString: URL_, roster, ...options })
  stores.push(store)
  return store
}

let admin
before(async () => {
  admin = new pg.Client({ connectionString: URL_ })
  await admin.connect()
})
after(async () => {
  for (const s of stores) await s.close()
  await admin.end()
})

// Waits until `check()` is true, failing after `ms` with `what`.
async function until(what, check, ms = 10_000) {
  const end = Date.now() + ms
  for (;;) {
    if (await check()) return
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

// Waits until the database clock has reached `t` (epoch ms).
const untilDbTime = (store, t) => until(`database time ${t}`, async () => (await store.now()) >= t)

// Reads the whole log in order from `from` whenever it is woken.
function follow(store, { from = 1, ...options } = {}) {
  const seen = []
  const errors = []
  let next = from
  let reading = false
  let again = false
  const pump = async () => {
    if (reading) {
      again = true
      return
    }
    reading = true
    try {
      do {
        again = false
        for (;;) {
          const batch = await store.readFrom(next)
          if (batch.length === 0) break
          seen.push(...batch)
          next = batch.at(-1).seq + 1
        }
      } while (again)
    } finally {
      reading = false
    }
  }
  const subscription = store.subscribe(() => pump().catch((e) => errors.push(e)), options)
  return { seen, errors, subscription }
}

const rejects = (promise, code) => assert.rejects(promise, (e) => e instanceof LogStoreError && e.code === code)

function assertGapless(entries, from = 1) {
  entries.forEach((e, i) => assert.equal(e.seq, from + i, `seq ${from + i} at index ${i}`))
  for (let i = 1; i < entries.length; i++) {
    assert.ok(entries[i].now >= entries[i - 1].now, `now goes back at seq ${entries[i].seq}`)
  }
}

async function readAll(store, from = 1) {
  const all = []
  for (;;) {
    const batch = await store.readFrom(from + all.length)
    if (batch.length === 0) return all
    all.push(...batch)
  }
}

describe('schema', () => {
  test('applies once per database, idempotently; a newer version is refused', async () => {
    const db = `rota_schema_${process.pid}_${Date.now()}`
    await admin.query(`CREATE DATABASE ${db}`)
    const url = new URL(URL_)
    url.pathname = `/${db}`
    try {
      // Three instances at once on an empty database: the advisory lock serializes them.
      const three = await Promise.all([1, 2, 3].map(() => PgLogStore.connect({ connectionString: url.href, roster: 'r' })))
      const client = new pg.Client({ connectionString: url.href })
      await client.connect()
      try {
        const versions = await client.query('SELECT version FROM rota_schema ORDER BY version')
        assert.deepEqual(versions.rows, [{ version: SCHEMA_VERSION }])
        await three[0].append(['x'], { instance: 'a' })
        for (const s of three) await s.close()
        await client.query('INSERT INTO rota_schema (version) VALUES ($1)', [SCHEMA_VERSION + 1])
      } finally {
        await client.end()
      }
      await rejects(PgLogStore.connect({ connectionString: url.href, roster: 'r' }), 'SCHEMA_TOO_NEW')
    } finally {
      await admin.query(`DROP DATABASE ${db} WITH (FORCE)`)
    }
  })
})

describe('append', () => {
  test('8 concurrent appenders: every seq once, no gaps, each appender in its order', async () => {
    const roster = rosterName('concurrent')
    const next = random(SEED)
    const appenders = await Promise.all(Array.from({ length: 8 }, () => open(roster, { max: 1 })))
    const plans = appenders.map((_, a) => Array.from({ length: 40 }, (_, b) => Array.from({ length: 1 + Math.floor(next() * 4) }, (_, k) => `a${a}-b${b}-${k}`)))
    const results = await Promise.all(
      appenders.map(async (store, a) => {
        const got = []
        for (const batch of plans[a]) got.push(await store.append(batch, { instance: `a${a}` }))
        return got
      }),
    )
    const total = plans.flat(2).length
    const all = await readAll(appenders[0])
    assert.equal(all.length, total)
    assertGapless(all)
    const bySeq = new Map(all.map((e) => [e.seq, e]))
    for (let a = 0; a < 8; a++) {
      let last = 0
      plans[a].forEach((batch, b) => {
        const r = results[a][b]
        assert.equal(r.lastSeq - r.firstSeq + 1, batch.length)
        assert.ok(r.firstSeq > last, `appender ${a}'s batches in its order`)
        last = r.lastSeq
        batch.forEach((entry, k) => {
          const e = bySeq.get(r.firstSeq + k)
          assert.equal(e.entry, entry)
          assert.equal(e.instance, `a${a}`)
          assert.equal(e.now, r.now, 'one now per batch')
          assert.equal(e.epoch, null)
        })
      })
    }
    assert.equal(new Set(all.map((e) => e.entry)).size, total, 'no entry twice')
    assert.deepEqual(await appenders[0].head(), { lastSeq: total, lastNow: all.at(-1).now, compactedThrough: 0 })
  })

  test('an aborted append leaves no gap: rolled back, failed mid-statement, connection killed', async () => {
    const roster = rosterName('abort')
    const store = await open(roster)
    await store.append(['one', 'two'], { instance: 'a' })

    // Rolled back after its seqs were given.
    const client = new pg.Client({ connectionString: URL_ })
    await client.connect()
    await client.query('BEGIN')
    const r = await client.query('SELECT * FROM rota_append($1, $2, NULL, $3)', [roster, 'x', ['lost1', 'lost2']])
    assert.equal(Number(r.rows[0].first_seq), 3)
    await client.query('ROLLBACK')
    const three = await store.append(['three'], { instance: 'a' })
    assert.deepEqual([three.firstSeq, three.lastSeq], [3, 3])

    // A batch the database refuses (text cannot hold NUL): all or nothing.
    await rejects(store.append(['four?', 'bad\u0000'], { instance: 'a' }), 'DATABASE')

    // Killed in the middle of its transaction while another append waits on the head.
    await client.query('BEGIN')
    const k = await client.query('SELECT * FROM rota_append($1, $2, NULL, $3)', [roster, 'x', ['killed1', 'killed2', 'killed3']])
    assert.equal(Number(k.rows[0].first_seq), 4)
    client.on('error', () => {})
    const waiting = store.append(['four'], { instance: 'b' })
    await until('the second append to wait on the killed one', async () => {
      const w = await admin.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [client.processID])
      return w.rows[0].n > 0
    })
    await admin.query('SELECT pg_terminate_backend($1)', [client.processID])
    const four = await waiting
    assert.equal(four.firstSeq, 4)
    await client.end().catch(() => {})

    const all = await readAll(store)
    assertGapless(all)
    assert.deepEqual(all.map((e) => e.entry), ['one', 'two', 'three', 'four'])
  })

  test('bad arguments are INVALID_INPUT and append nothing', async () => {
    const store = await open(rosterName('bad'))
    await rejects(store.append([], { instance: 'a' }), 'INVALID_INPUT')
    await rejects(store.append([{ not: 'text' }], { instance: 'a' }), 'INVALID_INPUT')
    await rejects(store.append(['x'], {}), 'INVALID_INPUT')
    await rejects(store.append(['x'], { instance: 'a', epoch: 0 }), 'INVALID_INPUT')
    await rejects(store.readFrom(0), 'INVALID_INPUT')
    assert.equal((await store.head()).lastSeq, 0)
  })
})

describe('leader', () => {
  test('a stale epoch is refused for leader-only entries; the new leader is accepted', async () => {
    const roster = rosterName('epoch')
    const store = await open(roster)
    const a = await store.acquireLeader('a', 60_000)
    assert.equal(a.acquired, true)
    assert.equal(a.instance, 'a')
    await store.append(['tick-a'], { instance: 'a', epoch: a.epoch })

    const b = await store.acquireLeader('b', 60_000)
    assert.deepEqual({ acquired: b.acquired, instance: b.instance, epoch: b.epoch }, { acquired: false, instance: 'a', epoch: a.epoch })
    await rejects(store.append(['tick-b'], { instance: 'b', epoch: a.epoch }), 'STALE_EPOCH')

    assert.equal(await store.stepDown('a', a.epoch), true)
    await rejects(store.append(['tick-a-late'], { instance: 'a', epoch: a.epoch }), 'STALE_EPOCH')
    const b2 = await store.acquireLeader('b', 60_000)
    assert.equal(b2.acquired, true)
    assert.equal(b2.epoch, a.epoch + 1)
    await rejects(store.append(['tick-a-stale'], { instance: 'a', epoch: a.epoch }), 'STALE_EPOCH')
    await rejects(store.renewLeader('a', a.epoch, 60_000), 'STALE_EPOCH')
    await store.append(['tick-b'], { instance: 'b', epoch: b2.epoch })
    // Entries that need no epoch are anyone's.
    await store.append(['request-a'], { instance: 'a' })

    const all = await readAll(store)
    assertGapless(all)
    assert.deepEqual(
      all.map((e) => [e.entry, e.epoch]),
      [['tick-a', a.epoch], ['tick-b', b2.epoch], ['request-a', null]],
    )
  })

  test('the lease lapses on database time; the next leader takes a new epoch', async () => {
    const roster = rosterName('lease')
    const store = await open(roster)
    const ttl = 400
    const a = await store.acquireLeader('a', ttl)
    assert.equal(a.acquired, true)
    const again = await store.acquireLeader('a', ttl)
    assert.equal(again.epoch, a.epoch, 'the holder keeps its epoch')
    const renewed = await store.renewLeader('a', a.epoch, ttl)
    assert.ok(renewed >= again.expiresAt)
    assert.equal((await store.acquireLeader('b', ttl)).acquired, false)

    // Appends of the old leader race the takeover: the log never interleaves epochs.
    let refused = 0
    let stop = false
    const ticking = (async () => {
      while (!stop) {
        try {
          await store.append(['tick-a'], { instance: 'a', epoch: a.epoch })
        } catch (e) {
          if (e.code !== 'STALE_EPOCH') throw e
          refused++
          return
        }
      }
    })()
    await untilDbTime(store, renewed)
    const b = await store.acquireLeader('b', ttl)
    assert.equal(b.acquired, true)
    assert.equal(b.instance, 'b')
    assert.equal(b.epoch, a.epoch + 1)
    assert.ok(b.expiresAt >= renewed + ttl)
    await store.append(['tick-b'], { instance: 'b', epoch: b.epoch })
    stop = true
    await ticking
    assert.equal(refused, 1, "the old leader's append after the lapse is refused")
    await rejects(store.renewLeader('a', a.epoch, ttl), 'STALE_EPOCH')
    assert.equal((await store.acquireLeader('a', ttl)).acquired, false)

    const all = await readAll(store)
    assertGapless(all)
    const firstB = all.findIndex((e) => e.epoch === b.epoch)
    assert.ok(firstB > 0)
    // Every entry of the old epoch is stamped before its lease ended.
    assert.ok(all.slice(0, firstB).every((e) => e.epoch === a.epoch && e.now < renewed))
    assert.ok(all.slice(firstB).every((e) => e.epoch === b.epoch))
  })
})

describe('readers', () => {
  test('a reader with no notifications reads everything by polling', async () => {
    const roster = rosterName('poll')
    const store = await open(roster)
    const reader = follow(store, { listen: false, pollMs: 50 })
    try {
      for (let i = 0; i < 20; i++) await store.append([`e${i}`], { instance: 'a' })
      await until('the poll-only reader to read 20 entries', () => reader.seen.length === 20)
      assertGapless(reader.seen)
      assert.deepEqual(reader.errors, [])
    } finally {
      reader.subscription.close()
    }
  })

  test('NOTIFY wakes a reader; after its LISTEN connection is killed it catches up and listens again', async () => {
    const roster = rosterName('notify')
    const store = await open(roster)
    const wakes = []
    const reader = follow(store, { pollMs: 300 })
    const counter = store.subscribe((w) => wakes.push(w), { pollMs: 60_000 })
    try {
      await until('LISTEN', () => reader.subscription.listenerPid !== null && counter.listenerPid !== null)
      const appended = await store.append(['one'], { instance: 'a' })
      await until('a notification', () => wakes.some((w) => w.reason === 'notify' && w.seq === appended.lastSeq))
      await until('the reader to read entry 1', () => reader.seen.length === 1)

      const pid = reader.subscription.listenerPid
      await admin.query('SELECT pg_terminate_backend($1)', [pid])
      await until('the reader to notice', () => reader.subscription.listenerPid !== pid)
      // Appended while it has no LISTEN: the notifications are lost, the entries are not.
      for (let i = 2; i <= 10; i++) await store.append([`e${i}`], { instance: 'a' })
      await until('the reader to catch up', () => reader.seen.length === 10)
      await until('LISTEN again', () => reader.subscription.listenerPid !== null && reader.subscription.listenerPid !== pid)
      assertGapless(reader.seen)
      assert.deepEqual(reader.errors, [])
    } finally {
      reader.subscription.close()
      counter.close()
    }
  })
})

describe('heartbeats', () => {
  test('instances whose heartbeat lapsed are listed; a heartbeat from before the database started gets a grace period', async () => {
    const roster = rosterName('heartbeat')
    const store = await open(roster)
    const ttl = 300
    const started = Number((await admin.query('SELECT (extract(epoch FROM pg_postmaster_start_time()) * 1000)::bigint AS t')).rows[0].t)
    const seenA = await store.heartbeat('a')
    await untilDbTime(store, Math.max(seenA, started) + ttl)
    const seenB = await store.heartbeat('b')
    assert.ok(seenB >= seenA + ttl)
    assert.deepEqual(await store.expiredInstances(ttl), [{ instance: 'a', lastSeen: seenA }])

    // A heartbeat long before the server's start: with a TTL longer than the server's
    // uptime it is not (yet) expired; with a short one it is.
    await store.heartbeat('old')
    await admin.query("UPDATE rota_instance SET last_seen = 0 WHERE roster = $1 AND instance = 'old'", [roster])
    const uptime = (await store.now()) - started
    assert.deepEqual((await store.expiredInstances(uptime + 60_000)).map((e) => e.instance), [])
    assert.deepEqual((await store.expiredInstances(ttl)).map((e) => e.instance), ['a', 'old'])

    assert.equal(await store.forgetInstance('a'), true)
    assert.equal(await store.forgetInstance('a'), false)
    assert.ok((await store.heartbeat('b')) >= seenB)
    assert.deepEqual((await store.expiredInstances(ttl)).map((e) => e.instance), ['old'])
  })
})

describe('expiry', () => {
  test('the leader expires a lapsed instance atomically with its heartbeat: refused when fresh, a stale epoch refused', async () => {
    const roster = rosterName('expire')
    const store = await open(roster)
    const ttl = 300
    const entry = (owner) => JSON.stringify({ type: 'expireOwner', owner })
    const lease = await store.acquireLeader('leader', 60_000)
    const seen = await store.heartbeat('a')
    // Fresh: nothing appended, the row stays.
    assert.equal(await store.expireInstance('a', ttl, { leader: 'leader', epoch: lease.epoch }, entry('a')), null)
    assert.equal((await store.head()).lastSeq, 0)
    await untilDbTime(store, seen + ttl)
    // A stale epoch (or an instance not the leader) is refused, nothing changes.
    await rejects(store.expireInstance('a', ttl, { leader: 'leader', epoch: lease.epoch + 1 }, entry('a')), 'STALE_EPOCH')
    await rejects(store.expireInstance('a', ttl, { leader: 'other', epoch: lease.epoch }, entry('a')), 'STALE_EPOCH')
    assert.equal((await store.head()).lastSeq, 0)
    // Lapsed: the entry is appended with the epoch, the instance forgotten.
    const seq = await store.expireInstance('a', ttl, { leader: 'leader', epoch: lease.epoch }, entry('a'))
    assert.equal(seq, 1)
    const [logged] = await readAll(store)
    assert.deepEqual([logged.entry, logged.epoch, logged.instance], [entry('a'), lease.epoch, 'leader'])
    assert.deepEqual(await store.expiredInstances(ttl), [])
    assert.equal(await store.forgetInstance('a'), false)
    // An instance never seen (or already forgotten) is no expiry.
    assert.equal(await store.expireInstance('ghost', ttl, { leader: 'leader', epoch: lease.epoch }, entry('ghost')), null)
    await rejects(store.expireInstance('a', 0, { leader: 'leader', epoch: lease.epoch }, entry('a')), 'INVALID_INPUT')
  })

  test(`a heartbeat racing the expiry: when it returns, either no expiry happened or it is in the log (seed ${SEED})`, async () => {
    const roster = rosterName('expire-race')
    const store = await open(roster)
    const other = await open(roster)
    const next = random(SEED)
    const ttl = 50
    const lease = await store.acquireLeader('leader', 60_000)
    let expired = 0
    for (let round = 0; round < 30; round += 1) {
      const who = `i${round}`
      const seen = await store.heartbeat(who)
      await untilDbTime(store, seen + ttl + Math.floor(next() * 5))
      const head = (await store.head()).lastSeq
      const [seq] = await Promise.all([
        store.expireInstance(who, ttl, { leader: 'leader', epoch: lease.epoch }, JSON.stringify({ type: 'expireOwner', owner: who })),
        (async () => {
          if (next() < 0.5) await new Promise((resolve) => setImmediate(resolve))
          await other.heartbeat(who)
          // Read once the heartbeat returned: an expiry that took effect must be here.
          const after = await readAll(other, head + 1)
          return after.some((e) => e.entry.includes(`"owner":"${who}"`))
        })().then((found) => ({ found })),
      ]).then(([seq, { found }]) => {
        if (seq !== null) assert.ok(found, `round ${round}: the expiry at ${seq} committed, yet the heartbeat's reader did not see it (seed ${SEED})`)
        return [seq]
      })
      if (seq !== null) expired += 1
    }
    console.log(`expiry race: ${expired} of 30 rounds expired the instance, the others were refused by its heartbeat`)
    assert.equal((await store.head()).lastSeq, expired, 'one entry per expiry, none refused half-way')
  })
})

describe('snapshots', () => {
  test('snapshot, compaction, and a late reader that starts from the snapshot', async () => {
    const roster = rosterName('snapshot')
    const store = await open(roster)
    assert.equal(await store.latestSnapshot(), null)
    for (let i = 1; i <= 10; i++) await store.append([`e${i}`], { instance: 'a' })
    await rejects(store.writeSnapshot(11, 'past the head'), 'NO_SNAPSHOT')
    await rejects(store.compact(6), 'NO_SNAPSHOT')
    await store.writeSnapshot(4, 'state after 4')
    await store.writeSnapshot(6, 'state after 6')
    assert.equal(await store.compact(6), 6)
    assert.deepEqual(await store.head(), { lastSeq: 10, lastNow: (await store.head()).lastNow, compactedThrough: 6 })
    await rejects(store.readFrom(1), 'COMPACTED')
    await rejects(store.readFrom(6), 'COMPACTED')
    await rejects(store.compact(4), 'NO_SNAPSHOT') // the older snapshot went with it

    // A new instance: the latest snapshot, then the rest of the log, then what follows.
    const late = await open(roster)
    const snapshot = await late.latestSnapshot()
    assert.equal(snapshot.seq, 6)
    assert.equal(snapshot.state, 'state after 6')
    const reader = follow(late, { from: snapshot.seq + 1, pollMs: 50 })
    try {
      await store.append(['e11'], { instance: 'a' })
      await until('the late reader to reach 11', () => reader.seen.length === 5)
      assertGapless(reader.seen, 7)
      assert.deepEqual(reader.seen.map((e) => e.entry), ['e7', 'e8', 'e9', 'e10', 'e11'])
      assert.deepEqual(reader.errors, [])
    } finally {
      reader.subscription.close()
    }
  })
})
