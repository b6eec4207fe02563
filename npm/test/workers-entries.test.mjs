// A `workers` document (the scheduler seed's usine.yaml) hands each worker's
// declaration, as the scheduler does, wherever the types promise "the executor's
// entry": `preflight`, `lease.executor`, `roster.executors` (issue 43, "where rota
// still differs from the seeds by mistake": they were given `{ id }` only).

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Roster } from 'rota'

const workers = [
  { name: 'a', kind: 'docker', max_concurrent_attempts: 2 },
  { name: 'b', kind: 'docker', maxConcurrentAttempts: 1, image: 'usine:1' },
]
const a = { name: 'a', id: 'a', kind: 'docker', max_concurrent_attempts: 2, maxConcurrentAttempts: 2 }
const b = { name: 'b', id: 'b', kind: 'docker', maxConcurrentAttempts: 1, image: 'usine:1' }

test('a workers list: preflight, lease.executor and roster.executors get the worker declaration', async (t) => {
  const preflighted = []
  const roster = await Roster.create({
    document: { workers },
    probe: false,
    preflight: ({ executor, spec }) => {
      preflighted.push([executor, spec])
    },
  })
  t.after(() => roster.close())
  assert.deepEqual(preflighted.sort((x, y) => x[0].localeCompare(y[0])), [['a', a], ['b', b]])
  assert.deepEqual(roster.executors, [a, b])
  const lease = await roster.lease('coder')
  assert.equal(lease.executorId, 'a')
  assert.deepEqual(lease.executor, a)
  lease.release()
  // A reload's preflight gets the added worker's declaration from the new document.
  preflighted.length = 0
  await roster.reload({ workers: { ...Object.fromEntries(workers.map((w) => [w.name, w])), c: { kind: 'docker', max_concurrent_attempts: 3 } } })
  assert.deepEqual(preflighted, [['c', { name: 'c', id: 'c', kind: 'docker', max_concurrent_attempts: 3, maxConcurrentAttempts: 3 }]])
  assert.deepEqual(
    roster.executors.map((e) => [e.id, e.name, e.maxConcurrentAttempts]),
    [['a', 'a', 2], ['b', 'b', 1], ['c', 'c', 3]],
  )
})

test('an executors document still hands each entry as written', async (t) => {
  const entry = { id: 'x', harness: 'pi', roles: ['coder'], baseUrl: 'http://127.0.0.1:1' }
  const roster = await Roster.create({ document: { executors: [entry] }, probe: false })
  t.after(() => roster.close())
  assert.deepEqual(roster.executors, [entry])
  const lease = await roster.lease('coder')
  assert.deepEqual(lease.executor, entry)
  lease.release()
})
