// Errors that explain (issue 16, item 3) and the abort conventions (item 4).

import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { test } from 'node:test'
import { Roster, RotaError } from 'rota'
import { document, executor, projectScript, rejection, thrown, virtualClock } from './helpers.mjs'

const create = (doc, options = {}) => Roster.create({ document: doc, probe: false, ...options })

test('TIMEOUT says why: the last waiting report and the explain at the deadline', async (t) => {
  const clock = virtualClock()
  const roster = await create(document(executor('a'), executor('b')), { now: clock })
  t.after(() => roster.close())
  const held = await roster.lease('coder', { prefer: 'a' })
  roster.exclude('b', { reason: 'maintenance' })
  const waiting = roster.lease('coder', { timeoutMs: 8_000, label: 'story-3' })
  clock.advance(8_000)
  roster.tick()
  const error = await rejection(waiting)
  assert.equal(error.code, 'TIMEOUT')
  // The core's reasons at the deadline (its timedOut output), as its waiting report says them.
  assert.equal(error.message, 'no executor took coder for story-3 within 8000 ms: a busy; b paused: maintenance')
  assert.deepEqual(error.reasons, ['a busy', 'b paused: maintenance'])
  assert.equal(error.explain.role, 'coder')
  assert.equal(error.explain.executors.length, 2)
  assert.match(error.report, /a busy/)
  held.release()
})

test('EXHAUSTED names the true reason when every executor is avoided', async (t) => {
  const roster = await create(document(executor('a'), executor('b'), executor('j', { roles: ['judge'] })))
  t.after(() => roster.close())
  const avoided = await rejection(roster.lease('coder', { avoid: ['a', 'b'] }))
  assert.equal(avoided.code, 'EXHAUSTED')
  assert.deepEqual(avoided.reasons, ['a: avoided by the request', 'b: avoided by the request'])
  assert.match(avoided.message, /no executor can ever take coder: a: avoided by the request; b: avoided by the request/)
  assert.doesNotMatch(avoided.message, /no executor in the roster takes this role/)
  // With truly no executor taking the role the core's words stay.
  const none = await rejection(roster.lease('planner'))
  assert.deepEqual(none.reasons, ['no executor in the roster takes this role'])
  // A pin to an avoided executor: the core's own reason.
  const pinned = await rejection(roster.lease('coder', { pin: 'a', avoid: ['a'] }))
  assert.match(pinned.message, /a is both the pin and avoided/)
})

test('bad arguments are coded errors: signal: {}, on("event", 5), an unknown failure kind', async (t) => {
  const roster = await create(document(executor('a')))
  t.after(() => roster.close())
  const signal = await rejection(roster.lease('coder', { signal: {} }))
  assert.ok(signal instanceof RotaError)
  assert.equal(signal.code, 'INVALID_INPUT')
  assert.match(signal.message, /signal must be an AbortSignal/)
  assert.equal((await rejection(roster.lease('coder', { signal: null }))).code, 'INVALID_INPUT')
  assert.equal(roster.snapshot().queue.length, 0, 'nothing was queued')
  for (const [name, listener] of [['event', 5], ['event', undefined], ['evnt', () => {}]]) {
    const error = thrown(() => roster.on(name, listener))
    assert.equal(error.code, 'INVALID_INPUT', `on(${name}, ${typeof listener})`)
  }
  const kind = thrown(() => roster.report('a', { kind: 'ratelimit', message: 'slow down' }))
  assert.equal(kind.code, 'INVALID_INPUT')
  assert.match(kind.message, /unknown failure kind "ratelimit": one of usageLimit, rateLimit/)
  assert.equal(roster.snapshot().executors[0].recentRateLimits, 0, 'nothing was reported')
  // A real Error with some `kind` property is still classified.
  assert.equal(roster.report('a', Object.assign(new Error('boom'), { kind: 'network' })), undefined)
})

test('an aborted lease rejects with signal.reason; AbortSignal.timeout() is a TIMEOUT', async (t) => {
  const roster = await create(document(executor('a')))
  t.after(() => roster.close())
  const held = await roster.lease('coder')
  const controller = new AbortController()
  const reason = new Error('the user left')
  const waiting = roster.lease('coder', { signal: controller.signal })
  controller.abort(reason)
  assert.equal(await rejection(waiting), reason)
  // The default reason: a DOMException named AbortError.
  const plain = new AbortController()
  const next = roster.lease('coder', { signal: plain.signal })
  plain.abort()
  const error = await rejection(next)
  assert.equal(error, plain.signal.reason)
  assert.equal(error.name, 'AbortError')
  // Already aborted: the same.
  assert.equal(await rejection(roster.lease('coder', { signal: AbortSignal.abort('stop') })), 'stop')
  // A timeout signal: TIMEOUT with reasons, its DOMException as the cause.
  const timedOut = await rejection(roster.lease('coder', { signal: AbortSignal.timeout(20), label: 'x' }))
  assert.equal(timedOut.code, 'TIMEOUT')
  assert.equal(timedOut.cause?.name, 'TimeoutError')
  assert.match(timedOut.message, /no executor took coder for x: a: busy/)
  assert.equal(roster.snapshot().queue.length, 0)
  held.release()
})

test('a process whose only pending work is a lease with a signal stays alive until it settles', (t) => {
  const script = projectScript(t, 'signal-only.mjs',
    `import { Roster } from 'rota'
const roster = await Roster.create({ document: { executors: [{ id: 'a', harness: 'pi', roles: ['coder'] }] }, probe: false })
await roster.lease('coder')
try {
  await roster.lease('coder', { signal: AbortSignal.timeout(150) })
} catch (error) {
  console.log('settled', error.code)
}
`)
  const run = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 20_000 })
  assert.equal(run.stderr, '')
  assert.equal(run.status, 0, 'not exit code 13 (an unsettled top-level await)')
  assert.equal(run.stdout.trim(), 'settled TIMEOUT')
})
