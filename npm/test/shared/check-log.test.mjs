// The multi-process checker can fail: fabricated records and logs with the faults it
// looks for (no database needed for the wall-clock half; the log half runs on
// ROTA_PG_URL, with entries written by hand).

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Policy } from '../../src/node.js'
import { PgLogStore } from '../../src/shared/index.js'
import { checkLog, checkOverlaps } from './harness/check-log.mjs'

const URL_ = process.env.ROTA_PG_URL
const DOC = { executors: [{ id: 'a', harness: 'x', roles: ['coder'], slots: 1 }] }

const fakeLog = (grants) => ({
  policy: new Policy(DOC, undefined),
  fromSnapshot: null,
  grantsByLease: new Map(grants.map((g) => [g.lease, g])),
  leaseEnds: new Map(),
})
const rec = (t, pid, lease, ms, extra = {}) => ({ t, pid, lease, request: `i${pid}/${lease}`, executor: 'a', instance: `i${pid}`, ms, ...extra })

test('checkOverlaps finds two processes using a one-slot executor at once', () => {
  const log = fakeLog([
    { lease: 1, request: 'i1/1', executor: 'a', owner: 'i1' },
    { lease: 2, request: 'i2/2', executor: 'a', owner: 'i2' },
  ])
  const one = [rec('grant', 1, 1, 10), rec('release', 1, 1, 20)]
  const two = [rec('grant', 2, 2, 15), rec('release', 2, 2, 30)]
  assert.equal(checkOverlaps([one, two], log).overlaps.length, 1)
  // Back to back (a release and the next grant at one instant) is no overlap.
  const three = [rec('grant', 2, 2, 20), rec('release', 2, 2, 30)]
  assert.equal(checkOverlaps([one, three], log).overlaps.length, 0)
})

test('checkOverlaps finds a grant the log gave to someone else', () => {
  const log = fakeLog([{ lease: 1, request: 'i1/1', executor: 'a', owner: 'i9' }])
  assert.equal(checkOverlaps([[rec('grant', 1, 1, 10), rec('release', 1, 1, 20)]], log).notInLog.length, 1)
})

test('checkLog counts ends, grants per owner and rejected entries', { skip: URL_ ? false : 'ROTA_PG_URL is not set' }, async () => {
  const store = await PgLogStore.connect({ connectionString: URL_, roster: `check-${process.pid}-${Date.now()}` })
  try {
    await store.append([JSON.stringify({ type: 'genesis', log: 1, document: DOC, options: { preflight: false } })], { instance: 'i1' })
    await store.append(
      [
        '{"type":"lease","id":"i1/1","role":"coder","owner":"i1"}',
        '{"type":"lease","id":"i2/1","role":"coder","owner":"i2"}',
        '{"type":"lease","id":"i2/2","role":"coder","owner":"i2"}',
        '{"type":"release","lease":1}',
        '{"type":"bogus"}',
      ],
      { instance: 'i1' },
    )
    const r = await checkLog({ store, hashesAt: [2] })
    assert.deepEqual(r.grantsByOwner, { i1: 1, i2: 1 })
    assert.deepEqual(r.open, ['i2/2'])
    assert.equal(r.rejected.length, 1)
    assert.deepEqual(r.overGrants, [])
    assert.equal(r.hashes.size, 1)
  } finally {
    await store.close()
  }
})

test('checkOverlaps: a grant cut short by a kill at once is in use for no time', () => {
  const log = fakeLog([
    { lease: 1, request: 'i1/1', executor: 'a', owner: 'i1' },
    { lease: 2, request: 'i2/2', executor: 'a', owner: 'i2' },
  ])
  // Process 1's last record is its grant (killed right after): no interval to speak of.
  const one = [rec('grant', 1, 1, 10)]
  const two = [rec('grant', 2, 2, 15), rec('release', 2, 2, 30)]
  assert.equal(checkOverlaps([one, two], log).overlaps.length, 0)
})
