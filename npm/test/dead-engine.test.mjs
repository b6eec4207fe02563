// A dead local engine leaves the round: a real `fetch` to a port where nothing listens
// (ECONNREFUSED in its `cause`) takes an executor with a health URL out as `health`
// and probes it; the same error on an executor without one excludes nothing (the
// seed's rule); the probe's 2xx brings the executor back to a waiting lease.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Roster, classifyFailure } from 'rota'
import { closedPort, document, executor, healthServer, nextEvent, virtualClock } from './helpers.mjs'

test('a refused connection takes an executor with a health URL out until its URL answers', async (t) => {
  const server = await healthServer(t)
  const clock = virtualClock()
  const r = await Roster.create({
    document: document(executor('local', { health: server.url }), executor('remote', { priority: 2 })),
    now: clock,
  })
  t.after(() => r.close())

  const port = await closedPort()
  const refused = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`).catch((error) => error)
  assert.equal(refused.cause?.code, 'ECONNREFUSED', 'a real refused connection')
  assert.deepEqual(classifyFailure(refused), { kind: 'other', rule: 'unreachable' })

  // Without a health URL: the seed's rule, nothing excluded.
  assert.equal(r.report('remote', refused), undefined)
  assert.equal(r.snapshot().executors[1].exclusion, undefined)

  const firstProbe = server.waitForRequest()
  const exclusion = r.report('local', refused)
  assert.equal(exclusion.kind, 'health')
  assert.match(exclusion.reason, /^serving engine unreachable \(ECONNREFUSED: fetch failed: .*ECONNREFUSED/)
  assert.equal(await firstProbe, '/health')
  await r.idle() // the 503 answer came back as probeResult(up: false)

  // remote serves meanwhile; the next request waits for local.
  const held = await r.lease('coder')
  assert.equal(held.executorId, 'remote')
  const waiting = r.lease('coder', { label: 'story' })
  await r.idle()
  assert.equal(r.snapshot().queue.length, 1)
  const why = r.explain({ role: 'coder' })
  assert.match(JSON.stringify(why), /serving engine unreachable/)

  // The engine is up again: the next probe (15 s later, someone waits) brings it back.
  server.state.status = 200
  const back = nextEvent(r, 'back')
  clock.advance(15_000)
  r.tick()
  await back
  const lease = await waiting
  assert.equal(lease.executorId, 'local')
  lease.release()
  held.release()
  assert.equal(r.snapshot().executors[0].exclusion, undefined)
})

test('a reset before any answer is unreachable too; an answer or a timeout is not', async (t) => {
  const r = await Roster.create({ document: document(executor('local', { health: 'http://127.0.0.1:9/health' })), probe: false })
  t.after(() => r.close())
  // Without probes (probe: false) the seed's rule stays: nothing excluded.
  const port = await closedPort()
  const refused = await fetch(`http://127.0.0.1:${port}/`).catch((error) => error)
  assert.equal(r.report('local', refused), undefined)
  assert.equal(classifyFailure(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })).rule, 'unreachable')
  assert.equal(classifyFailure(Object.assign(new Error('Bad Gateway'), { code: 'ECONNRESET', status: 502 })).rule, 'none')
  assert.equal(classifyFailure(Object.assign(new Error('connect ETIMEDOUT'), { code: 'ETIMEDOUT' })).rule, 'none')
})
