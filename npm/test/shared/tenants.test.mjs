// Tenants across processes: three instances on one PostgreSQL log, two tenants. a and
// b lease as tenant t1 (weight 1), c as tenant t2 (weight 2), all on one slot; every
// replica folds the same fair queues, so the log's grants follow the weights: while
// both tenants keep requests waiting, t2 (c alone) takes about two grants in three,
// where lease order would give each process a third. Every checkpoint's stateHash is
// the log's, and no executor is granted beyond its slot.
//
//   ROTA_PG_URL=$(scripts/postgres.sh start) node --test npm/test/shared/tenants.test.mjs

import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { Cluster, WORKER_DEFAULTS, monoMs, until } from './harness/cluster.mjs'

const URL_ = process.env.ROTA_PG_URL
const skip = URL_ ? false : 'ROTA_PG_URL is not set: ROTA_PG_URL=$(scripts/postgres.sh start) node --test npm/test/shared/'

const DEFAULTS = WORKER_DEFAULTS

const document = {
  fairness: 'tenants',
  tenants: { t2: { weight: 2 } },
  executors: [{ id: 'x', harness: 'pi', roles: ['coder'], slots: 1 }],
}

describe('shared roster, tenants across processes', { skip, concurrency: 1 }, () => {
  test('three processes, two tenants of weights 1 and 2: the grants follow the weights on every replica', async () => {
    const cluster = new Cluster({ url: URL_, defaults: DEFAULTS })
    try {
      const workers = []
      for (const [name, tenant] of [['a', 't1'], ['b', 't1'], ['c', 't2']]) {
        workers.push(await cluster.spawn(name, { tenant, document: JSON.stringify(document) }))
      }
      await cluster.untilGranting(workers, monoMs())
      const from = monoMs()
      const inWindow = (to = Infinity) => Object.fromEntries(workers.map((w) => [w.name, w.records().filter((r) => r.t === 'grant' && r.ms >= from && r.ms < to).length]))
      const total = (grants) => Object.values(grants).reduce((n, g) => n + g, 0)
      await until('150 grants in the window', () => total(inWindow()) >= 150, 60_000, 100)
      const grants = inWindow(monoMs())
      const points = await cluster.quiesce()
      assert.equal(new Set(points.map((p) => p.hash)).size, 1, 'every instance at the head has one stateHash')
      await cluster.stopAll()
      const result = await cluster.check()
      assert.deepEqual(result.overGrants, [], 'no executor above its slot in the log')
      assert.deepEqual(result.leaseGrantedTwice, [], 'no lease id granted twice')
      assert.deepEqual(result.endedTwice, [], 'no request ended twice')
      assert.deepEqual(result.hashMismatches, [], "every checkpoint's stateHash is the log's at its seq")
      assert.ok(result.hashesCompared > 0, 'some checkpoints were compared')
      const share = grants.c / total(grants)
      console.log(`grants in the window: ${JSON.stringify(grants)}; t2's share ${share.toFixed(3)} (weights: 2/3)`)
      // 2/3 with both tenants always waiting; lease order would give c about 1/3.
      assert.ok(share >= 0.55 && share <= 0.78, `t2 (weight 2) takes about two grants in three: ${JSON.stringify(grants)}`)
      assert.ok(grants.a > 0 && grants.b > 0, `t1's processes are served too: ${JSON.stringify(grants)}`)
    } finally {
      await cluster.close()
    }
  })
})
