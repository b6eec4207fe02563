// CommonJS callers: Node 20.19+ loads the ESM entry through require() (no top-level
// await in the Node entry, so require(esm) works).
const assert = require('node:assert/strict')
const { test } = require('node:test')

test('require("rota") gives the same API', async () => {
  const rota = require('rota')
  assert.equal(typeof rota.Roster.create, 'function')
  const policy = new rota.Policy({ executors: [{ id: 'a', harness: 'pi', roles: ['coder'] }] })
  assert.equal(policy.handle({ type: 'lease', now: 1, id: 'r1', role: 'coder' }).outputs[0].type, 'granted')
  const roster = await rota.Roster.create({ document: { executors: [{ id: 'a', harness: 'pi', roles: ['coder'] }] }, probe: false })
  const lease = await roster.lease('coder')
  assert.equal(lease.executorId, 'a')
  lease.release()
  await roster.close()
})
