// Choosing among equal free executors in a shared roster: three processes on one
// PostgreSQL log, each rule's outcome read from the log (folded with the raw Policy,
// harness/check-log.mjs), every replica at one stateHash. And the floor under a role
// (`maxExcluded: '50%'`): three instances on one log, one reports a 429 on each of two
// executors; the first goes out, the second is held back on every instance, and every
// instance keeps leasing on it.
//
//   ROTA_PG_URL=$(scripts/postgres.sh start) node --test npm/test/shared/choosing.test.mjs

import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { Cluster, WORKER_DEFAULTS, monoMs, until } from './harness/cluster.mjs'
import { describe as summary } from './harness/check-log.mjs'
import { Roster } from 'rota'

const URL_ = process.env.ROTA_PG_URL
const skip = URL_ ? false : 'ROTA_PG_URL is not set: ROTA_PG_URL=$(scripts/postgres.sh start) node --test npm/test/shared/'

const DEFAULTS = { ...WORKER_DEFAULTS, callers: 1 }

/** Three processes lease under `document` until the log has `grants` grants; the log's check. */
async function run(document, grants, flags = {}) {
  const cluster = new Cluster({ url: URL_, defaults: { ...DEFAULTS, ...flags } })
  try {
    const workers = []
    for (const name of ['a', 'b', 'c']) workers.push(await cluster.spawn(name, { document: JSON.stringify(document) }))
    await cluster.untilGranting(workers, monoMs())
    await until(`${grants} grants`, () => workers.reduce((n, w) => n + w.records().filter((r) => r.t === 'grant').length, 0) >= grants, 60_000, 100)
    await cluster.quiesce()
    await cluster.stopAll()
    const result = await cluster.check()
    const text = summary(result, result.wall)
    assert.deepEqual(result.overGrants, [], `no executor above its slots\n${text}`)
    assert.deepEqual(result.endedTwice, [], `no request ended twice\n${text}`)
    assert.deepEqual(result.hashMismatches, [], `every checkpoint's stateHash is the log's at its seq\n${text}`)
    assert.ok(result.hashesCompared > 0, 'some checkpoints were compared')
    assert.equal(Object.keys(result.grantsByOwner).length, 3, `all three were granted: ${JSON.stringify(result.grantsByOwner)}`)
    return result
  } finally {
    await cluster.close()
  }
}

/** The log's grants and lease ends in log order (ends of an entry before its grants). */
function timeline(result) {
  const steps = []
  for (const [lease, g] of result.grantsByLease) steps.push({ seq: g.seq, order: 1, lease, executor: g.executor, kind: 'grant' })
  for (const [lease, e] of result.leaseEnds) steps.push({ seq: e.seq, order: 0, lease, kind: 'end' })
  return steps.sort((p, q) => p.seq - q.seq || p.order - q.order || p.lease - q.lease)
}

describe('shared roster: choosing among equal executors', { skip, concurrency: 1 }, () => {
  test('weight 3 to 1: every four grants in the log are three on x and one on y, across three processes', async () => {
    // Three callers in all, four slots each: both executors are free at every grant, so
    // the weighted round-robin alone decides, on one state every replica folds alike.
    const document = {
      executors: [
        { id: 'x', harness: 'pi', roles: ['coder'], slots: 4, weight: 3 },
        { id: 'y', harness: 'pi', roles: ['coder'], slots: 4 },
      ],
    }
    const result = await run(document, 60)
    const order = timeline(result)
      .filter((s) => s.kind === 'grant')
      .map((s) => s.executor)
      .join('')
    assert.ok(order.length >= 60, order)
    for (let i = 0; i + 4 <= order.length; i++) {
      const window = order.slice(i, i + 4)
      assert.equal([...window].filter((e) => e === 'x').length, 3, `grants ${i}..${i + 3} of ${order}`)
    }
  })

  test('leastBusy: every grant in the log goes to a free executor no busier than any other, relative to its slots', async () => {
    const slots = { x: 1, y: 2, z: 3 }
    const document = {
      choice: 'leastBusy',
      executors: Object.entries(slots).map(([id, n]) => ({ id, harness: 'pi', roles: ['coder'], slots: n })),
    }
    // Nine callers on six slots: grants at every load.
    const result = await run(document, 90, { callers: 3 })
    const busy = { x: 0, y: 0, z: 0 }
    const holder = new Map()
    let checked = 0
    for (const step of timeline(result)) {
      if (step.kind === 'end') {
        const e = holder.get(step.lease)
        if (e !== undefined) busy[e] -= 1
        holder.delete(step.lease)
        continue
      }
      const e = step.executor
      for (const other of Object.keys(slots)) {
        if (busy[other] >= slots[other]) continue
        // busy[e]/slots[e] <= busy[other]/slots[other], cross-multiplied.
        assert.ok(busy[e] * slots[other] <= busy[other] * slots[e], `lease ${step.lease} (seq ${step.seq}) went to ${e} at ${busy[e]}/${slots[e]} while ${other} was at ${busy[other]}/${slots[other]}`)
      }
      busy[e] += 1
      holder.set(step.lease, e)
      checked += 1
    }
    assert.ok(checked >= 90, `${checked} grants checked`)
  })
})

describe('shared roster: the floor under a role', { skip }, () => {
  test("maxExcluded '50%' across three instances: the second 429 is held back everywhere", async (t) => {
    const document = { maxExcluded: '50%', executors: ['x', 'y'].map((id) => ({ id, harness: 'pi', roles: ['coder'], slots: 2 })) }
    const roster = `floor-${process.pid}-${Date.now()}`
    const instances = []
    for (let i = 0; i < 3; i++) {
      instances.push(await Roster.create({ shared: { connectionString: URL_, roster }, document, probe: false }))
    }
    t.after(() => Promise.all(instances.map((r) => r.close())))
    const held = instances.map(() => [])
    instances.forEach((r, i) => r.on('event', (e) => e.name === 'exclusionHeldBack' && held[i].push(e.fields)))
    const http429 = Object.assign(new Error('429 Too Many Requests'), { status: 429, headers: { 'retry-after': '600' } })
    assert.equal((await instances[0].report('x', http429))?.kind, 'until')
    assert.equal(await instances[0].report('y', http429), undefined)
    // Every instance leases y (x is out), each from its own process's view of the log.
    for (const r of instances) {
      const lease = await r.lease('coder', { timeoutMs: 10_000 })
      assert.equal(lease.executorId, 'y')
      await lease.release()
    }
    for (const [i, r] of instances.entries()) {
      const byId = Object.fromEntries(r.snapshot().executors.map((x) => [x.id, x]))
      assert.equal(byId.x.exclusion?.kind, 'until', `instance ${i}: x is out`)
      assert.equal(byId.y.exclusion, undefined, `instance ${i}: y stays in`)
      assert.deepEqual(held[i].map((f) => [f.executor, f.role, f.maxExcluded]), [['y', 'coder', 50]], `instance ${i} saw the held-back event once`)
    }
  })
})

describe('shared roster: the floor across three processes', { skip, concurrency: 1 }, () => {
  test("maxExcluded '50%': three worker processes report every lease rate-limited; one executor goes, the other stays in and keeps granting", async () => {
    // Without the floor the second executor goes too (a 429 with Retry-After 600
    // excludes at once) and nothing is granted for ten minutes.
    const document = { maxExcluded: '50%', executors: ['x', 'y'].map((id) => ({ id, harness: 'pi', roles: ['coder'], slots: 2 })) }
    const cluster = new Cluster({ url: URL_, defaults: { ...DEFAULTS, 'rate-limited': true } })
    try {
      const workers = []
      for (const name of ['a', 'b', 'c']) workers.push(await cluster.spawn(name, { document: JSON.stringify(document) }))
      await cluster.untilGranting(workers, monoMs())
      const from = monoMs()
      const grantsIn = () => workers.flatMap((w) => w.records().filter((r) => r.t === 'grant' && r.ms >= from))
      await until('60 grants after every process leased once', () => grantsIn().length >= 60, 60_000, 100)
      const executors = new Set(grantsIn().map((g) => g.executor))
      const points = await cluster.quiesce()
      assert.equal(new Set(points.map((p) => p.hash)).size, 1, 'every instance at the head has one stateHash')
      await cluster.stopAll()
      const result = await cluster.check()
      assert.deepEqual(result.overGrants, [], 'no executor above its slots in the log')
      assert.equal(executors.size, 1, `one executor kept serving: ${JSON.stringify([...executors])}`)
    } finally {
      await cluster.close()
    }
  })
})
