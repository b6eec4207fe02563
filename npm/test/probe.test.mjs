// Health probes against a real HTTP server on 127.0.0.1: an outage excludes an
// executor until its health URL answers 2xx; probes follow the core's schedule on
// virtual time; one per executor at a time; a probe that hangs times out.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Roster } from 'rota'
import { closedPort, document, executor, healthServer, nextEvent, virtualClock } from './helpers.mjs'

test('an outage waits for the health URL; a waiting lease gets the executor when it answers', async (t) => {
  const server = await healthServer(t)
  const clock = virtualClock()
  const r = await Roster.create({
    // A refused connection is an outage because this document says so (not the seed's).
    document: { ...document(executor('local', { health: server.url })), signals: { outage: ['ECONNREFUSED'] } },
    now: clock,
  })
  t.after(() => r.close())
  const held = await r.lease('coder')

  // A real connection failure, classified: outage → health exclusion → a probe now.
  const port = await closedPort()
  const refused = await fetch(`http://127.0.0.1:${port}/v1/chat`).catch((error) => error)
  const firstProbe = server.waitForRequest()
  const exclusion = r.report('local', refused)
  assert.equal(exclusion.kind, 'health')
  assert.equal(await firstProbe, '/health')
  held.release()

  const waiting = r.lease('coder', { label: 'story' })
  await r.idle() // the 503 answer came back as probeResult(up: false)
  assert.equal(server.state.requests, 1)
  assert.equal(r.snapshot().executors[0].exclusion.kind, 'health')
  assert.equal(r.snapshot().queue.length, 1, 'still waiting')

  // Next probe: 15 s later while someone waits. The engine is up again.
  server.state.status = 200
  const back = nextEvent(r, 'back')
  clock.advance(14_999)
  r.tick()
  await r.idle()
  assert.equal(server.state.requests, 1, 'not before its time')
  clock.advance(1)
  r.tick()
  await back
  assert.equal(server.state.requests, 2)
  const lease = await waiting
  assert.equal(lease.executorId, 'local')
  lease.release()
  assert.equal(r.snapshot().executors[0].exclusion, undefined)
})

test('one probe per executor at a time; a probe that hangs times out as down', async (t) => {
  const server = await healthServer(t)
  server.state.hang = true
  const clock = virtualClock()
  const events = []
  const r = await Roster.create({
    document: document(executor('a', { health: server.url }), executor('b', { health: `${server.base}/other` })),
    now: clock,
    probeTimeoutMs: 100,
    onEvent: (e) => events.push(e),
  })
  t.after(() => r.close())
  const both = [server.waitForRequest(), server.waitForRequest()]
  r.report('a', { kind: 'outage', message: 'connection refused' })
  r.report('b', { kind: 'outage', message: 'connection refused' })
  await Promise.all(both)
  // Time passes while the probes hang: no second probe of the same executor.
  for (let i = 0; i < 5; i += 1) {
    clock.advance(60_000)
    r.tick()
  }
  assert.equal(server.state.requests, 2)
  assert.equal(server.state.maxInFlight, 2, 'one per executor')
  assert.equal(r.snapshot().executors[0].probeInFlight, true)
  await r.idle() // both time out after 100 ms (real time) and answer up: false
  assert.equal(events.filter((e) => e.name === 'probeFailed').length, 2)
  assert.equal(r.snapshot().executors[0].probeInFlight, false)
  assert.equal(r.snapshot().executors[0].exclusion.kind, 'health')
})

test('a custom probe function gets the URL and a signal', async (t) => {
  const clock = virtualClock()
  const calls = []
  const r = await Roster.create({
    document: document(executor('a', { health: 'http://engine.internal/health' })),
    now: clock,
    probe: async (url, { signal, executor: id }) => {
      calls.push([url, id, signal instanceof AbortSignal])
      return true
    },
  })
  t.after(() => r.close())
  const back = nextEvent(r, 'back')
  r.report('a', Object.assign(new Error('502: engine is recovering'), { status: 502 }))
  await back
  assert.deepEqual(calls, [['http://engine.internal/health', 'a', true]])
})

test('probe: false: an outage waits out the outage cooldown (the seed’s fallback)', async (t) => {
  const clock = virtualClock()
  const r = await Roster.create({
    document: document(executor('a', { health: 'http://127.0.0.1:9/health', cooldown: { outage: '2 minutes' } })),
    now: clock,
    probe: false,
  })
  t.after(() => r.close())
  const exclusion = r.report('a', new Error('server is shutting down'))
  assert.equal(exclusion.kind, 'until')
  assert.equal(exclusion.until, clock() + 120_000)
})

test('the default probe follows no redirect: a 302 is down (the core’s probe rule)', async (t) => {
  const server = await healthServer(t)
  server.state.status = 302
  server.state.headers = { location: '/elsewhere' }
  const clock = virtualClock()
  const events = []
  const r = await Roster.create({
    document: document(executor('a', { health: server.url })),
    now: clock,
    onEvent: (e) => events.push(e),
  })
  t.after(() => r.close())
  const probed = server.waitForRequest()
  assert.equal(r.report('a', new Error('engine is recovering')).kind, 'health')
  assert.equal(await probed, '/health')
  await r.idle()
  assert.equal(server.state.requests, 1, 'the redirect was not followed')
  assert.equal(r.snapshot().executors[0].exclusion.kind, 'health', 'still out')
  assert.ok(events.some((e) => e.name === 'probeDown'), events.map((e) => e.name).join(', '))
})
