// The shared roster (Roster.create({ shared })) on a real PostgreSQL: several instances
// in one process, each its own replica of one log (sql/PROTOCOL.md). Faults are made
// in-process: the test-only crash hook, and a pool that can be broken and healed.
//
//   ROTA_PG_URL=$(scripts/postgres.sh start) node --test npm/test/shared/
//   ROTA_TEST_SEED=<n> replays the callers' random hold times.

import assert from 'node:assert/strict'
import { after, describe, test } from 'node:test'
import pg from 'pg'
import { Policy, Roster } from '../../src/node.js'
import { PgLogStore } from '../../src/shared/index.js'

const URL_ = process.env.ROTA_PG_URL
const skip = URL_ ? false : 'ROTA_PG_URL is not set: ROTA_PG_URL=$(scripts/postgres.sh start) node --test npm/test/shared/'
const CRASH = Symbol.for('rota.crash')

const SEED = Number(process.env.ROTA_TEST_SEED ?? Math.floor(Math.random() * 2 ** 31))
if (URL_) console.log(`shared roster tests: ROTA_TEST_SEED=${SEED}`)

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

let rosters = 0
const rosterName = (what) => `node-roster-${what}-${process.pid}-${Date.now()}-${++rosters}`

const TTL = 1_500
const SWEEP = 100

const opened = []
const stores = []
const pools = []
after(async () => {
  await Promise.allSettled(opened.map((r) => r.close()))
  await Promise.allSettled(stores.map((s) => s.close()))
  await Promise.allSettled(pools.map((p) => p.end()))
})

async function open(roster, { document = DOCUMENT, shared = {}, ...rest } = {}) {
  const instance = await Roster.create({
    document,
    probe: false,
    ...rest,
    shared: { connectionString: URL_, roster, ttlMs: TTL, sweepMs: SWEEP, pollMs: 200, ...shared },
  })
  opened.push(instance)
  return instance
}

async function logStore(roster) {
  const store = await PgLogStore.connect({ connectionString: URL_, roster })
  stores.push(store)
  return store
}

/** Polls `condition` until it holds; fails with `message` after `ms`. */
async function waitFor(condition, message, ms = 10_000) {
  const deadline = Date.now() + ms
  for (;;) {
    const value = await condition()
    if (value) return value
    if (Date.now() > deadline) assert.fail(`timed out after ${ms} ms waiting for: ${message}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** Waits until every replica folded the log's head. */
async function caughtUp(store, replicas) {
  await waitFor(async () => {
    const { lastSeq } = await store.head()
    return replicas.every((r) => r.foldedSeq === lastSeq) && lastSeq
  }, 'every replica at the head of the log')
}

async function allEntries(store) {
  const out = []
  for (;;) {
    const batch = await store.readFrom(out.length + 1, { limit: 1_000 })
    out.push(...batch)
    if (batch.length < 1_000) return out
  }
}

/**
 * Folds the log with an independent core, as PROTOCOL.md says, and checks that no
 * executor ever held more leases than its slots; returns the grants by request id
 * and the replay's state hash.
 */
function replay(entries, slots) {
  const genesis = JSON.parse(entries[0].entry)
  const policy = new Policy(genesis.document, genesis.options)
  const leases = new Map()
  const busy = new Map()
  const grants = new Map()
  for (const { seq, now, entry } of entries.slice(1)) {
    const answer = JSON.parse(policy.handleJson(`{"now":${now},${entry.slice(1)}`))
    if (answer.error !== undefined) continue
    for (const output of answer.outputs) {
      if (output.type === 'granted') {
        leases.set(output.lease, output.executor)
        busy.set(output.executor, (busy.get(output.executor) ?? 0) + 1)
        assert.ok(busy.get(output.executor) <= slots[output.executor], `over-grant on ${output.executor} at seq ${seq}`)
        grants.set(output.request, (grants.get(output.request) ?? 0) + 1)
      }
      if (output.type === 'event' && output.name === 'released') {
        const executor = leases.get(output.fields.lease)
        if (executor !== undefined && leases.delete(output.fields.lease)) busy.set(executor, busy.get(executor) - 1)
      }
    }
  }
  return { grants, hash: policy.stateHash() }
}

const DOCUMENT = {
  executors: [
    { id: 'a', harness: 'x', roles: ['coder'], slots: 4 },
    { id: 'b', harness: 'x', roles: ['coder'], slots: 4 },
    { id: 'c', harness: 'x', roles: ['coder'], slots: 4 },
  ],
}
const SLOTS = { a: 4, b: 4, c: 4 }
const ONE = { executors: [{ id: 'a', harness: 'x', roles: ['coder'], slots: 1 }] }
const TWO = { executors: [{ id: 'a', harness: 'x', roles: ['coder'], slots: 2 }] }

/** A pool whose queries and connections fail while `broken` (an outage of one instance). */
function breakablePool() {
  const real = new pg.Pool({ connectionString: URL_, max: 4 })
  real.on('error', () => {})
  pools.push(real)
  const down = () => Promise.reject(Object.assign(new Error('connection refused (the test broke this pool)'), { code: 'ECONNREFUSED' }))
  const pool = {
    broken: false,
    query: (...args) => (pool.broken ? down() : real.query(...args)),
    connect: () => (pool.broken ? down() : real.connect()),
    on: (...args) => real.on(...args),
    end: () => Promise.resolve(),
  }
  return pool
}

describe('the shared roster', { skip }, () => {
  test('3 instances × 8 callers on 12 slots: no over-grant, every request ends once, fair, equal state hashes', async () => {
    const name = rosterName('grants')
    const instances = [await open(name, { shared: { name: 'one' } }), await open(name, { shared: { name: 'two' } }), await open(name, { shared: { name: 'three' } })]
    const next = random(SEED)
    const held = new Map()
    let overGrant = null
    const perInstance = new Map(instances.map((r) => [r.instance, 0]))
    let total = 0
    const TARGET = 360
    const caller = async (roster) => {
      while (total < TARGET) {
        const lease = await roster.lease('coder')
        total += 1
        perInstance.set(roster.instance, perInstance.get(roster.instance) + 1)
        const now = (held.get(lease.executorId) ?? 0) + 1
        held.set(lease.executorId, now)
        if (now > SLOTS[lease.executorId]) overGrant ??= `${lease.executorId} held ${now} leases at once`
        await new Promise((resolve) => setTimeout(resolve, Math.floor(next() * 4)))
        held.set(lease.executorId, held.get(lease.executorId) - 1)
        lease.release()
      }
    }
    await Promise.all(instances.flatMap((r) => Array.from({ length: 8 }, () => caller(r))))
    assert.equal(overGrant, null, overGrant)

    const store = await logStore(name)
    await caughtUp(store, instances)
    const hashes = instances.map((r) => r.stateHash())
    assert.equal(new Set(hashes).size, 1, `one state hash at seq ${instances[0].foldedSeq}: ${hashes}`)
    const { grants, hash } = replay(await allEntries(store), SLOTS)
    assert.equal(hash, hashes[0], 'an independent fold of the log reaches the replicas\' hash')
    for (const [request, n] of grants) assert.equal(n, 1, `request ${request} granted ${n} times`)
    assert.equal(grants.size, total, 'every lease the callers got is one grant in the log')
    for (const r of instances) assert.equal(r.leased, 0)
    const mean = total / 3
    for (const [instance, n] of perInstance) {
      assert.ok(Math.abs(n - mean) <= mean * 0.25, `${instance} got ${n} of ${total} grants (mean ${mean.toFixed(0)}): ${[...perInstance.values()]}`)
    }
  })

  test("a follower's crash: its leases are released and its waiting requests cancelled within ttl + a sweep", async () => {
    const name = rosterName('crash')
    const leader = await open(name, { document: TWO, shared: { name: 'leader' } })
    await waitFor(() => leader.isLeader, 'the first instance leads')
    const follower = await open(name, { document: TWO, shared: { name: 'follower' } })
    await follower.lease('coder')
    await follower.lease('coder')
    const orphan = follower.lease('coder').catch((error) => error)
    const waiter = leader.lease('coder')
    await waitFor(() => leader.snapshot().queue.length === 2, 'both requests wait')
    const gone = follower.instance
    const crashedAt = Date.now()
    follower[CRASH]()
    const lease = await waiter
    const took = Date.now() - crashedAt
    assert.ok(took <= TTL + SWEEP + 1_000, `the waiter got its slot ${took} ms after the crash (ttl ${TTL} + sweep ${SWEEP})`)
    assert.equal(lease.executorId, 'a')
    const snapshot = leader.snapshot()
    assert.deepEqual(snapshot.queue.filter((q) => q.owner === gone), [], 'no request of the crashed instance waits')
    assert.deepEqual(snapshot.executors[0].leases.filter((l) => l.owner === gone), [], 'no lease of the crashed instance is held')
    assert.equal((await orphan).code, 'CLOSED')
    lease.release()
  })

  test("a leader's crash: a new epoch, and the old leader's leader-only append is refused STALE_EPOCH", async () => {
    const name = rosterName('leader')
    const first = await open(name, { document: ONE, shared: { name: 'first' } })
    await waitFor(() => first.isLeader, 'the first instance leads')
    const second = await open(name, { document: ONE, shared: { name: 'second' } })
    const epoch = first.leaderEpoch
    const old = first.instance
    first[CRASH]()
    await waitFor(() => second.isLeader, 'the second instance takes over', TTL * 4)
    assert.ok(second.leaderEpoch > epoch, `epoch ${second.leaderEpoch} after ${epoch}`)
    const store = await logStore(name)
    await assert.rejects(store.append(['{"type":"tick"}'], { instance: old, epoch }), (error) => error.code === 'STALE_EPOCH')
    // The new leader ticks: a deadline passes on the log's time.
    const held = await second.lease('coder')
    const started = Date.now()
    const error = await second.lease('coder', { timeoutMs: 200 }).catch((e) => e)
    assert.equal(error.code, 'TIMEOUT', String(error))
    assert.ok(Date.now() - started >= 150, 'not before its time')
    held.release()
  })

  test('timeoutMs times out by the leader\'s ticks, on a follower too', async () => {
    const name = rosterName('timeout')
    const leader = await open(name, { document: ONE })
    await waitFor(() => leader.isLeader, 'the first instance leads')
    const follower = await open(name, { document: ONE })
    const held = await leader.lease('coder')
    const started = Date.now()
    const error = await follower.lease('coder', { timeoutMs: 300 }).catch((e) => e)
    const took = Date.now() - started
    assert.equal(error.code, 'TIMEOUT', String(error))
    assert.ok(took >= 250 && took < 3_000, `timed out after ${took} ms`)
    assert.equal(follower.waiting, 0)
    held.release()
  })

  test('report() resolves with the exclusion, and the exclusion reaches the other instances', async () => {
    const name = rosterName('report')
    const one = await open(name)
    const two = await open(name)
    assert.equal(one.available('coder'), 12)
    const exclusion = await two.report('a', { kind: 'outage', message: 'engine down' })
    assert.equal(exclusion.id, 'a')
    assert.equal(exclusion.kind, 'until')
    assert.equal(two.available('coder'), 8, 'in force on the reporter once report() resolved')
    await waitFor(() => one.available('coder') === 8, 'the other instance folds the exclusion')
    assert.ok(one.snapshot().executors.find((e) => e.id === 'a').exclusion, 'excluded on the other instance')
    await one.resume('a')
    await waitFor(() => two.available('coder') === 12, 'the resume reaches the reporter')
    await assert.rejects(one.exclude('nobody'), (error) => error.code === 'UNKNOWN_EXECUTOR')
  })

  test('fencing when the database goes: FENCED calls; back with the same id after a short outage, a new one after expiry', async () => {
    const name = rosterName('fence')
    const watcher = await open(name, { document: ONE, shared: { name: 'watcher' } })
    await waitFor(() => watcher.isLeader, 'the watcher leads')
    const pool = breakablePool()
    const victim = await open(name, { document: ONE, shared: { name: 'victim', connectionString: undefined, pool } })
    const held = await watcher.lease('coder')
    const pending = victim.lease('coder').catch((e) => e)
    await waitFor(() => victim.waiting === 1, 'the victim waits')

    const id = victim.instance
    pool.broken = true
    await waitFor(() => victim.fenced, 'the victim fences itself')
    const error = await pending
    assert.equal(error.code, 'FENCED', String(error))
    assert.match(error.message, /fenced since/)
    await assert.rejects(victim.lease('coder'), (e) => e.code === 'FENCED')
    await assert.rejects(victim.report('a', new Error('x')), (e) => e.code === 'FENCED')

    pool.broken = false
    await waitFor(() => !victim.fenced, 'the victim rejoins')
    assert.equal(victim.instance, id, 'a short outage keeps the id')
    // Its request the log still had waiting was cancelled on rejoining.
    await waitFor(() => watcher.snapshot().queue.length === 0, 'the orphaned request is cancelled')
    held.release()
    const lease = await victim.lease('coder')
    lease.release()

    pool.broken = true
    await waitFor(() => victim.fenced, 'fenced again')
    // Long enough for the watcher to expire it (a heartbeat older than ttl, then a sweep).
    const store = await logStore(name)
    await waitFor(async () => {
      const entries = await store.readFrom(1, { limit: 10_000 })
      return entries.some((e) => e.entry === JSON.stringify({ type: 'expireOwner', owner: id }))
    }, 'the watcher expires the victim', TTL * 4)
    pool.broken = false
    await waitFor(() => !victim.fenced, 'the victim rejoins after its expiry', TTL * 4)
    assert.notEqual(victim.instance, id, 'a new incarnation once the log expired the old one')
    assert.ok(victim.instance.startsWith('victim:'))
    const again = await victim.lease('coder')
    assert.equal(again.executorId, 'a')
    again.release()
    await caughtUp(store, [watcher, victim])
    assert.equal(victim.stateHash(), watcher.stateHash())
  })

  test("its database connections killed (pg_terminate_backend): it keeps its id and serves again", async () => {
    const name = rosterName('terminate')
    const app = `rota-victim-${process.pid}-${rosters}`
    const other = await open(name, { document: ONE })
    const victim = await open(name, { document: ONE, shared: { connectionString: `${URL_}?application_name=${app}` } })
    const id = victim.instance
    ;(await victim.lease('coder')).release()
    const admin = new pg.Client({ connectionString: URL_ })
    await admin.connect()
    try {
      const killed = await admin.query('SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE application_name = $1', [app])
      assert.ok(killed.rows[0].n >= 1, 'its connections were there to kill')
    } finally {
      await admin.end()
    }
    const lease = await waitFor(async () => {
      if (victim.fenced) return false
      return victim.tryLease('coder').catch(() => false)
    }, 'the victim leases again')
    assert.equal(victim.instance, id, 'connections lost briefly expire nobody')
    lease.release()
    const store = await logStore(name)
    await caughtUp(store, [other, victim])
    assert.equal(victim.stateHash(), other.stateHash())
  })

  test('a late joiner starts from a snapshot after compaction and reaches the same state hash', async () => {
    const name = rosterName('late')
    const first = await open(name, { shared: { snapshotEvery: 20 } })
    await waitFor(() => first.isLeader, 'the first instance leads')
    const store = await logStore(name)
    for (let i = 0; i < 40; i += 1) (await first.lease('coder')).release()
    await first.exclude('b', { reason: 'kept across the snapshot' })
    await waitFor(async () => (await store.head()).compactedThrough > 0, 'the leader compacted the log')
    await assert.rejects(store.readFrom(1), (e) => e.code === 'COMPACTED')
    const late = await open(name, { shared: { snapshotEvery: 20 } })
    await caughtUp(store, [first, late])
    assert.equal(late.stateHash(), first.stateHash())
    assert.equal(late.available('coder'), 8, 'the exclusion came with the snapshot')
    const lease = await late.lease('coder')
    lease.release()
    await caughtUp(store, [first, late])
    assert.equal(late.stateHash(), first.stateHash())
  })

  test('no wake is lost: with the poll and the heartbeats out of reach, back-to-back calls on two instances all settle', async () => {
    // A lost wake or a stranded append waits for the next poll or heartbeat (here a
    // minute): the deadline below fails the test long before.
    const name = rosterName('wakes')
    const slow = { pollMs: 60_000, ttlMs: 240_000, sweepMs: 60_000 }
    const one = await open(name, { document: ONE, shared: slow })
    const two = await open(name, { document: ONE, shared: slow })
    // Progress, not speed, is what is checked (a loaded machine is slow, a lost wake
    // stalls for the minute): every cycle must end within 15 s of the one before.
    let completed = 0
    const cycles = async (roster) => {
      for (let i = 0; i < 40; i += 1) {
        ;(await roster.lease('coder')).release()
        completed += 1
      }
    }
    const run = Promise.all([cycles(one), cycles(two)])
    let seen = -1
    while (completed < 80) {
      seen = completed
      await waitFor(() => completed > seen, `cycle ${seen + 1} of 80 within 15 s of the last (no poll to rescue a lost wake)`, 15_000)
    }
    await run
    assert.equal(await one.exclude('a').then(() => one.resume('a')), undefined)
  })

  test("no wake is lost when a read stops at our own batch in flight: the entries after it are read once the append returns", async () => {
    // The order that lost a wake (5303838), made on purpose: A's append is held after
    // the database took it; B appends after it; A's reader, woken by B's entry, reads
    // both and stops at A's own batch (its calls are not known until the append
    // returns), so that notification is spent. When the append returns, A folds its
    // batch as sent and must read on: with the poll a minute away, B's entry is
    // otherwise unread for that minute.
    const name = rosterName('stopped-at-own')
    const slow = { pollMs: 60_000, ttlMs: 240_000, sweepMs: 60_000 }
    const connect = PgLogStore.connect
    const stores = []
    PgLogStore.connect = async (...args) => {
      const store = await connect.apply(PgLogStore, args)
      stores.push(store)
      return store
    }
    let a, b
    try {
      a = await open(name, { document: ONE, shared: slow })
      b = await open(name, { document: ONE, shared: slow })
    } finally {
      PgLogStore.connect = connect
    }
    const [storeA] = stores
    await waitFor(() => a.foldedSeq === b.foldedSeq && a.foldedSeq > 0, 'both replicas at the head')

    // A's next append: taken by the database, its answer held until the gate opens.
    let open_
    const gate = new Promise((resolve) => (open_ = resolve))
    let held = null
    const append = storeA.append
    storeA.append = async function (...args) {
      const result = await append.apply(this, args)
      if (held === null) {
        held = result
        storeA.append = append
        await gate
      }
      return result
    }
    // A's read that holds B's entry after its own.
    let sawBoth
    const both = new Promise((resolve) => (sawBoth = resolve))
    const readFrom = storeA.readFrom
    storeA.readFrom = async function (...args) {
      const rows = await readFrom.apply(this, args)
      if (held !== null && rows.some((r) => r.seq === held.firstSeq) && rows.some((r) => r.instance === b.instance && r.seq > held.firstSeq)) sawBoth(rows)
      return rows
    }

    const mine = a.tryLease('coder')
    await waitFor(() => held !== null, "the database took A's entry")
    const theirs = b.tryLease('coder')
    const rows = await Promise.race([both, new Promise((resolve) => setTimeout(resolve, 10_000, null))])
    assert.ok(rows !== null, "A's reader read B's entry behind its own held batch")
    const theirSeq = rows.find((r) => r.instance === b.instance && r.seq > held.firstSeq).seq
    assert.ok(a.foldedSeq < held.firstSeq, 'A folded nothing past its own batch in flight')
    open_()
    await waitFor(() => a.foldedSeq >= theirSeq, `A folds B's entry (seq ${theirSeq}) without the poll, a minute away`, 10_000)
    storeA.readFrom = readFrom
    ;(await mine)?.release()
    ;(await theirs)?.release()
  })

  test('instances racing to start an empty log: one genesis counts, every replica agrees', async () => {
    const name = rosterName('race')
    const replicas = await Promise.all([open(name), open(name), open(name)])
    const store = await logStore(name)
    await caughtUp(store, replicas)
    assert.equal(new Set(replicas.map((r) => r.stateHash())).size, 1)
    const entries = await allEntries(store)
    assert.equal(JSON.parse(entries[0].entry).type, 'genesis')
    const lease = await replicas[2].lease('coder')
    assert.equal(replicas[0].slots('coder'), 12)
    lease.release()
  })

  test('calls the core refuses reject with its code, on the caller only; tryLease, occupy, abort, use', async () => {
    const name = rosterName('calls')
    const one = await open(name, { document: ONE })
    const two = await open(name, { document: ONE })
    const rejected = []
    two.on('event', (e) => e.name === 'inputRejected' && rejected.push(e))
    await assert.rejects(one.lease('nope'), (e) => e.code === 'UNKNOWN_ROLE')
    const held = await one.lease('coder', { id: 'job-1' })
    assert.equal(held.request, 'job-1')
    await assert.rejects(two.lease('coder', { id: 'job-1' }), (e) => e.code === 'DUPLICATE_REQUEST')
    assert.equal(await two.tryLease('coder'), undefined, 'no free slot now')

    const controller = new AbortController()
    const aborted = two.lease('coder', { signal: controller.signal }).catch((e) => e)
    await waitFor(() => two.waiting === 1, 'the request waits')
    controller.abort(new Error('the caller gave up'))
    assert.equal((await aborted).message, 'the caller gave up')
    await waitFor(() => one.snapshot().queue.length === 0, 'the cancel reached the other replica')

    const occupied = await two.occupy('a', { role: 'coder' })
    assert.equal(occupied.occupied, true)
    await waitFor(() => one.snapshot().executors[0].busy === 2, 'the occupied slot is seen by the other instance')
    occupied.release()
    held.release()

    const failure = Object.assign(new Error('engine down'), { kind: 'outage' })
    await assert.rejects(
      two.use('coder', async () => {
        throw failure
      }),
      (e) => e === failure,
    )
    await waitFor(() => one.snapshot().executors[0].exclusion !== undefined, 'use() reported the failure for everyone')
    assert.ok(rejected.length >= 1, 'the other replica saw the rejected entries as inputRejected events')
  })

  test('reload() reaches every instance; a joiner with another document folds the log\'s, with a warning', async () => {
    const name = rosterName('reload')
    const one = await open(name, { document: ONE })
    const warnings = []
    const two = await open(name, { document: TWO, onEvent: (e) => e.name === 'sharedDocumentDiffers' && warnings.push(e) })
    assert.equal(warnings.length, 1)
    assert.equal(two.slots('coder'), 1, "the log's document, not its own")
    const same = []
    await open(name, { document: ONE, onEvent: (e) => e.name === 'sharedDocumentDiffers' && same.push(e) })
    assert.equal(same.length, 0, 'no warning for the same document')
    await one.reload(TWO)
    await waitFor(() => two.slots('coder') === 2, 'the reload reaches the other instance')
    assert.deepEqual(two.document, one.document)
  })

  test('options: { preflightReloads: true }: the genesis fixes preflight off, so a reload that adds an executor applies', async () => {
    const name = rosterName('preflight-reloads')
    const one = await open(name, { document: ONE, options: { preflightReloads: true } })
    const two = await open(name, { document: ONE })
    const added = { executors: [...ONE.executors, { id: 'b', harness: 'x', roles: ['coder'], slots: 1 }] }
    await one.reload(added)
    assert.equal(one.slots('coder'), 2, 'the reload applied on the instance that asked for it')
    await waitFor(() => two.slots('coder') === 2, 'the reload reaches the other instance')
    const store = await logStore(name)
    const [genesis] = await store.readFrom(1, { limit: 1 })
    const { options } = JSON.parse(genesis.entry)
    assert.equal(options.preflight, false, 'the genesis fixes preflight: false')
    assert.equal(options.preflightReloads, false, 'the genesis fixes preflightReloads: false')
  })

  test('a log whose genesis still asks for reload preflights: the instance that appended the reload runs them, once', async () => {
    const name = rosterName('old-genesis')
    const store = await logStore(name)
    const options = { canProbe: false, preflight: false, preflightReloads: true }
    await store.append([JSON.stringify({ type: 'genesis', log: 1, document: ONE, options })], { instance: 'writer:00000000' })
    const one = await open(name, { document: undefined })
    const two = await open(name, { document: undefined })
    await one.reload({ executors: [...ONE.executors, { id: 'b', harness: 'x', roles: ['coder'], slots: 1 }] })
    await waitFor(() => one.slots('coder') === 2 && two.slots('coder') === 2, 'the reload applies on both instances')
    await caughtUp(store, [one, two])
    const results = (await allEntries(store)).filter((e) => JSON.parse(e.entry).type === 'preflightResult')
    assert.deepEqual(results.map((e) => e.instance), [one.instance], 'one preflight result, appended by the instance that reloaded')
  })

  test('a literal secret in the log\'s document is a warning event naming its place, never the value', async () => {
    const name = rosterName('secret')
    const secret = 'sk-ant-api03-abcdefghijklmnop'
    const events = []
    const doc = { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], slots: 1, env: { ANTHROPIC_API_KEY: secret } }] }
    await open(name, { document: doc, onEvent: (e) => events.push(e) })
    const warnings = events.filter((e) => e.name === 'literalSecret')
    assert.deepEqual(warnings.map((e) => [e.level, e.fields.path]), [['warn', 'executors[0].env.ANTHROPIC_API_KEY']])
    assert.ok(!JSON.stringify(events).includes(secret), 'the value never shows')
  })

  test("the leader runs the health probes and appends their results: the executor comes back everywhere", async () => {
    const name = rosterName('probe')
    const document = { executors: [{ id: 'a', harness: 'x', roles: ['coder'], health: 'http://a.invalid/health', slots: 1 }] }
    const probed = []
    const probe = (who) => async () => {
      probed.push(who.instance)
      return true
    }
    const holders = {}
    const one = await open(name, { document, options: { healthProbeIntervalMs: 100 }, probe: (url, ctx) => probe(holders.one)(url, ctx) })
    holders.one = one
    await waitFor(() => one.isLeader, 'the first instance leads')
    const two = await open(name, { document, probe: (url, ctx) => probe(holders.two)(url, ctx) })
    holders.two = two
    const exclusion = await two.report('a', { kind: 'outage', message: 'engine down' })
    assert.equal(exclusion.kind, 'health')
    await waitFor(() => two.available('coder') === 1, 'the probe brought the executor back on the other instance')
    assert.ok(probed.length >= 1)
    assert.deepEqual([...new Set(probed)], [one.instance], 'only the leader probes')
  })

  test('machines: the owner creates and deletes its own; a crashed owner\'s are deleted by the leader that expired it', async () => {
    const name = rosterName('machines')
    const document = { executors: [{ id: 'vm', harness: 'x', roles: ['coder'], provision: true, slots: 2 }] }
    const calls = []
    const machines = (who) => ({
      create: async ({ request }) => {
        calls.push(['create', who.name, request])
        return { machine: request }
      },
      delete: async ({ hold }) => {
        calls.push(['delete', who.name, hold.machine])
      },
    })
    const leaderName = { name: 'leader' }
    const ownerName = { name: 'owner' }
    const leader = await open(name, { document, machines: machines(leaderName), shared: { name: 'leader' } })
    await waitFor(() => leader.isLeader, 'the first instance leads')
    const owner = await open(name, { document, machines: machines(ownerName), shared: { name: 'owner' } })
    const first = await owner.lease('coder')
    assert.deepEqual(first.hold, { machine: first.request })
    first.release()
    await waitFor(() => calls.some(([what, , id]) => what === 'delete' && id === first.request), 'the machine of a released lease is deleted')
    const second = await owner.lease('coder')
    owner[CRASH]()
    await waitFor(() => calls.some(([what, , id]) => what === 'delete' && id === second.request), 'the crashed owner\'s machine is deleted', TTL * 4)
    assert.deepEqual(
      calls.map(([what, who]) => `${what} by ${who}`),
      ['create by owner', 'delete by owner', 'create by owner', 'delete by leader'],
    )
    await waitFor(() => leader.snapshot().executors[0].leases.length === 0, 'the slot frees once the machine is deleted')
  })

  test('a log that does not start with a genesis is refused INVALID_LOG; a version marker of another log fences', async () => {
    const bad = rosterName('badlog')
    const store = await logStore(bad)
    await store.append(['{"type":"tick"}'], { instance: 'someone:00000000' })
    await assert.rejects(open(bad), (e) => e.code === 'INVALID_LOG')

    const name = rosterName('version')
    const one = await open(name, { document: ONE })
    const other = await logStore(name)
    await other.append(['{"type":"version","log":2}'], { instance: 'newer:00000000' })
    await waitFor(() => one.fenced, 'a replica that cannot fold the log fences')
    assert.match(one.fence.reason, /version/)
    await assert.rejects(one.lease('coder'), (e) => e.code === 'FENCED')
  })

  test('close(): its waiting calls reject CLOSED and its leases are released for the others', async () => {
    const name = rosterName('close')
    const stays = await open(name, { document: ONE })
    const leaves = await open(name, { document: ONE })
    await leaves.lease('coder')
    const waiting = leaves.lease('coder').catch((e) => e)
    const wants = stays.lease('coder')
    await leaves.close()
    assert.equal((await waiting).code, 'CLOSED')
    const lease = await wants
    assert.equal(lease.executorId, 'a')
    lease.release()
    await assert.rejects(leaves.lease('coder'), (e) => e.code === 'CLOSED')
  })

  test('a pause between the fold and the handover (past the TTL): the grant rejects FENCED and its lease goes back', async () => {
    const name = rosterName('handover-pause')
    const paused = await open(name, { document: ONE })
    // An output listener runs after the fold's own lapse check and before the lease
    // reaches its caller: blocking it past the TTL stands for a SIGSTOP landing there.
    let blocked = false
    paused.on('output', (output) => {
      if (output.type !== 'granted' || blocked) return
      blocked = true
      const until = performance.now() + TTL + 100
      while (performance.now() < until) {
        // no heartbeat can run meanwhile
      }
    })
    const outcome = await paused.lease('coder').then((lease) => lease, (error) => error)
    assert.ok(blocked, 'the grant reached the listener')
    assert.equal(outcome?.code, 'FENCED', `the lease after the pause: ${outcome?.id ?? outcome?.message}`)
    // The slot went back through the log (the release, or the expiry of the paused
    // instance): an instance that joins now gets it. (The pause blocked this whole
    // process, so every instance in it fenced: a new one is the witness.)
    const later = await open(name, { document: ONE })
    const lease = await later.lease('coder', { timeoutMs: 10_000 })
    assert.equal(lease.executorId, 'a')
    lease.release()
  })
})

test('shared: statePath, state and preflight are refused with the reason (no database needed)', async () => {
  const shared = { connectionString: URL_ ?? 'postgres://nowhere', roster: 'never-made' }
  await assert.rejects(Roster.create({ document: ONE, statePath: '/tmp/x.json', shared }), (e) => e.code === 'INVALID_INPUT' && /no state file/.test(e.message))
  await assert.rejects(Roster.create({ document: ONE, preflight: async () => true, shared }), (e) => e.code === 'INVALID_INPUT' && /does not preflight/.test(e.message))
  await assert.rejects(Roster.create({ document: ONE, state: { load() {}, save() {} }, shared }), (e) => e.code === 'INVALID_INPUT' && /no state file/.test(e.message))
  await assert.rejects(Roster.create({ document: ONE, now: () => 0, shared }), (e) => e.code === 'INVALID_INPUT' && /log's clock/.test(e.message))
  await assert.rejects(Roster.create({ document: ONE, shared: { roster: 'x' } }), (e) => e.code === 'INVALID_INPUT' && /connectionString/.test(e.message))
})

describe('the shared roster: borrowing and capacity (issue 43)', { skip }, () => {
  test("a borrowed lease and capacityChanged are the core's: every replica folds them alike", async () => {
    const name = rosterName('borrow')
    const both = (id) => ({ id, harness: 'x', roles: ['coder', 'reviewer'], slots: 1 })
    const document = { executors: [both('a'), both('b')] }
    const one = await open(name, { document, shared: { name: 'one' } })
    const two = await open(name, { document, shared: { name: 'two' } })
    const coderA = await one.lease('coder')
    const coderB = await one.lease('coder')
    assert.deepEqual([coderA.executorId, coderB.executorId], ['a', 'b'])
    // Every coder slot held: the review borrows a (on the other instance) instead of waiting.
    const review = await two.lease('reviewer', { avoid: ['a'], borrow: 'a' })
    assert.deepEqual([review.executorId, review.borrowed, review.because], ['a', true, 'held'])
    // Instance two waits for capacity to change; instance one's exclusion changes it.
    const changed = two.capacityChanged('reviewer', 2)
    await one.exclude('b', { kind: 'manual', reason: 'paused' })
    assert.equal(await changed, 1)
    review.release()
    const store = await logStore(name)
    await caughtUp(store, [one, two])
    assert.equal(one.stateHash(), two.stateHash())
    assert.equal(one.snapshot().executors.find((x) => x.id === 'a').busy, 1, 'the borrowed lease held no slot')
  })
})
