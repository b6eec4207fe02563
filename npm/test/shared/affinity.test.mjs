// Affinity keys in the shared roster: three instances, each its own replica of one log
// on PostgreSQL. The key -> executor memory is the core's state, folded alike on every
// replica, so a key leased from one instance sticks to its executor on the others.
//
//   ROTA_PG_URL=$(scripts/postgres.sh start) node --test npm/test/shared/affinity.test.mjs

import assert from 'node:assert/strict'
import { after, describe, test } from 'node:test'
import { Roster } from '../../src/node.js'
import { PgLogStore } from '../../src/shared/index.js'
import { Cluster, WORKER_DEFAULTS, monoMs, until } from './harness/cluster.mjs'

const URL_ = process.env.ROTA_PG_URL
const skip = URL_ ? false : 'ROTA_PG_URL is not set: ROTA_PG_URL=$(scripts/postgres.sh start) node --test npm/test/shared/'

const opened = []
const stores = []
after(async () => {
  await Promise.allSettled(opened.map((r) => r.close()))
  await Promise.allSettled(stores.map((s) => s.close()))
})

const DOCUMENT = {
  executors: ['a', 'b', 'c'].map((id) => ({ id, harness: 'x', roles: ['coder'], slots: 1 })),
}

async function open(roster) {
  const instance = await Roster.create({
    document: DOCUMENT,
    probe: false,
    shared: { connectionString: URL_, roster, ttlMs: 1_500, sweepMs: 100, pollMs: 200 },
  })
  opened.push(instance)
  return instance
}

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

describe('affinity in the shared roster', { skip }, () => {
  test('a key leased from one instance sticks to its executor on the other two; one state hash', async () => {
    const name = `node-roster-affinity-${process.pid}-${Date.now()}`
    const instances = [await open(name), await open(name), await open(name)]
    const store = await PgLogStore.connect({ connectionString: URL_, roster: name })
    stores.push(store)
    const [one, two, three] = instances
    // A release is appended asynchronously: wait until every replica folded it.
    const allFree = async () => {
      await waitFor(() => instances.every((r) => r.available('coder') === 3), 'every slot free on every replica')
      await caughtUp(store, instances)
    }
    const first = await one.lease('coder', { affinity: 'session-7' })
    const home = first.executorId
    first.release()
    await allFree()
    // Every other executor was leased less recently than `home`: round-robin alone
    // would pass it over; the key takes it on another instance.
    const explained = three.explain({ role: 'coder', affinity: 'session-7' })
    assert.equal(explained.pick, home)
    assert.match(explained.affinity, new RegExp(`^key 'session-7' sticks to ${home} until `))
    const second = await two.lease('coder', { affinity: 'session-7' })
    assert.equal(second.executorId, home, 'the key sticks on the second instance')
    second.release()
    await allFree()
    const plain = await three.lease('coder')
    assert.notEqual(plain.executorId, home, 'a lease without the key goes by round-robin')
    const third = await three.lease('coder', { affinity: 'session-7' })
    assert.equal(third.executorId, home, 'the key sticks on the third instance')
    // Busy on the third instance's lease: the key yields on the first, and moves.
    const fourth = await one.lease('coder', { affinity: 'session-7' })
    assert.notEqual(fourth.executorId, home)
    for (const lease of [plain, third, fourth]) lease.release()
    await allFree()
    const hashes = instances.map((r) => r.stateHash())
    assert.equal(new Set(hashes).size, 1, `one state hash: ${hashes}`)
    const moved = await two.lease('coder', { affinity: 'session-7' })
    assert.equal(moved.executorId, fourth.executorId, 'the key moved with the grant, on every replica')
    moved.release()
  })
})

describe('affinity across three processes', { skip, concurrency: 1 }, () => {
  test('three worker processes lease with one key: every grant stays on one executor, while round-robin would spread them', async () => {
    // Two executors of 3 slots: with three callers the remembered one is always free,
    // so the key never moves; the default choice (least recently leased) would
    // alternate between a and b.
    const document = { executors: ['a', 'b'].map((id) => ({ id, harness: 'x', roles: ['coder'], slots: 3 })) }
    const cluster = new Cluster({
      url: URL_,
      defaults: { ...WORKER_DEFAULTS, callers: 1 },
    })
    try {
      const workers = []
      for (const name of ['p', 'q', 'r']) workers.push(await cluster.spawn(name, { affinity: 'session-1', document: JSON.stringify(document) }))
      await cluster.untilGranting(workers, monoMs())
      const from = monoMs()
      const grantsIn = () => workers.flatMap((w) => w.records().filter((r) => r.t === 'grant' && r.ms >= from))
      await until('60 grants from the three processes', () => grantsIn().length >= 60, 60_000, 100)
      const grants = grantsIn()
      const points = await cluster.quiesce()
      assert.equal(new Set(points.map((p) => p.hash)).size, 1, 'every instance at the head has one stateHash')
      await cluster.stopAll()
      const result = await cluster.check()
      assert.deepEqual(result.overGrants, [], 'no executor above its slots in the log')
      const executors = new Set(grants.map((g) => g.executor))
      const byProcess = new Set(grants.map((g) => g.instance.split(':')[0]))
      assert.equal(byProcess.size, 3, `every process leased: ${[...byProcess]}`)
      assert.equal(executors.size, 1, `the key kept one executor across the processes: ${JSON.stringify([...executors])}`)
    } finally {
      await cluster.close()
    }
  })
})
