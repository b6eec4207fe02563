// Provisioned executors (each lease first creates a machine) and reload preflights:
// the core's createMachine/deleteMachine/preflight outputs go to the user's callbacks,
// whose results come back as inputs.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Roster } from 'rota'
import { document, executor, nextEvent, rejection, virtualClock } from './helpers.mjs'

/** A promise with its resolve/reject outside. */
function deferred() {
  let resolve
  let reject
  const promise = new Promise((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

function machineHost() {
  const host = { created: [], deleted: [], pending: [] }
  host.machines = {
    create: (request) => {
      host.created.push(request)
      const d = deferred()
      host.pending.push(d)
      return d.promise
    },
    delete: async ({ executor: id, hold }) => {
      host.deleted.push([id, hold])
    },
  }
  return host
}

const provisioned = document(executor('fly', { provision: { image: 'worker' }, slots: 2, kind: 'vm' }))

test('a lease on a provisioned executor creates a machine first; release deletes it', async (t) => {
  const host = machineHost()
  const r = await Roster.create({ document: provisioned, machines: host.machines, probe: false, options: { kinds: ['vm'] } })
  t.after(() => r.close())
  const leasing = r.lease('coder', { label: 'job-1' })
  assert.equal(host.created.length, 1)
  const request = host.created[0]
  assert.equal(request.executor, 'fly')
  assert.equal(request.role, 'coder')
  assert.deepEqual(request.spec.provision, { image: 'worker' })
  assert.ok(request.signal instanceof AbortSignal)
  assert.equal(r.snapshot().creating.length, 1)
  host.pending[0].resolve({ machine: 'm-1' })
  const lease = await leasing
  assert.deepEqual(lease.hold, { machine: 'm-1' })
  lease.release()
  await r.idle()
  assert.deepEqual(host.deleted, [['fly', { machine: 'm-1' }]])
})

test('a failed creation pauses the executor (30 s, doubling) and the request waits its turn', async (t) => {
  const host = machineHost()
  const clock = virtualClock()
  const r = await Roster.create({ document: provisioned, machines: host.machines, now: clock, probe: false })
  t.after(() => r.close())
  const leasing = r.lease('coder')
  const paused = nextEvent(r, 'provisionPaused')
  host.pending[0].reject(new Error('quota exceeded for machines'))
  const event = await paused
  assert.match(event.message, /quota exceeded for machines/)
  const pause = r.snapshot().executors[0].pause
  assert.equal(pause.failures, 1)
  assert.equal(pause.until, clock() + 30_000)
  assert.equal(r.snapshot().queue.length, 1, 'back in the queue')
  assert.equal(host.created.length, 1, 'no new machine while paused')
  clock.advance(30_000)
  r.tick()
  assert.equal(host.created.length, 2, 'tried again when the pause ended')
  host.pending[1].resolve('m-2')
  const lease = await leasing
  assert.equal(lease.hold, 'm-2')
  assert.equal(r.snapshot().executors[0].pause?.failures ?? 0, 0, 'a success clears the count')
  lease.release()
})

test('aborting a lease whose machine is being created deletes the machine when it arrives', async (t) => {
  const host = machineHost()
  const r = await Roster.create({ document: provisioned, machines: host.machines, probe: false })
  t.after(() => r.close())
  const controller = new AbortController()
  const leasing = r.lease('coder', { signal: controller.signal })
  controller.abort()
  assert.equal((await rejection(leasing)).name, 'AbortError')
  assert.equal(r.available('coder'), 2, 'the slot is free again')
  host.pending[0].resolve('m-late')
  await r.idle()
  assert.deepEqual(host.deleted, [['fly', 'm-late']])
})

test('without machines.create a provisioned lease fails its creation and the executor pauses', async (t) => {
  const clock = virtualClock()
  const r = await Roster.create({ document: provisioned, now: clock, probe: false })
  t.after(() => r.close())
  const paused = nextEvent(r, 'provisionPaused')
  const leasing = r.lease('coder', { timeoutMs: 1_000 })
  assert.match((await paused).message, /no machines.create callback/)
  clock.advance(1_000)
  r.tick()
  assert.equal((await rejection(leasing)).code, 'TIMEOUT')
})

test('preflight: a reload that adds an executor applies only when its preflight passes', async (t) => {
  const clock = virtualClock()
  const asked = []
  let verdict = false
  const r = await Roster.create({
    document: document(executor('a')),
    now: clock,
    probe: false,
    // Explicit options win over the driver's default (a startup preflight too).
    options: { preflight: false, preflightReloads: true },
    preflight: async ({ executor: id, spec }) => {
      asked.push([id, spec.harness])
      if (verdict === 'throw') throw new Error('image missing')
      return verdict
    },
  })
  t.after(() => r.close())
  const bigger = document(executor('a'), executor('b', { harness: 'codex' }))
  const refused = nextEvent(r, 'reloadRefused')
  await r.reload(bigger)
  assert.match((await refused).message, /b/)
  assert.deepEqual(asked, [['b', 'codex']])
  assert.equal(r.slots('coder'), 1, 'the running roster is as it was')
  assert.equal(r.snapshot().executors[0].preflight, undefined)

  verdict = 'throw'
  const refusedAgain = nextEvent(r, 'reloadRefused')
  await r.reload(bigger)
  assert.match((await refusedAgain).message, /image missing/)

  verdict = true
  const reloaded = nextEvent(r, 'reloaded')
  await r.reload(bigger)
  await reloaded
  assert.equal(r.slots('coder'), 2)
  assert.equal(r.snapshot().executors.find((e) => e.id === 'b').preflight.ok, true)
})

/** Waits (a few event-loop turns at most) until `condition` holds. */
async function until(condition) {
  for (let turn = 0; turn < 100 && !condition(); turn += 1) await new Promise((resolve) => setTimeout(resolve, 5))
  assert.ok(condition(), 'the condition never held')
}

function gatedDeletes() {
  const host = machineHost()
  host.deletes = []
  host.machines.delete = ({ executor: id, hold }) => {
    host.deleted.push([id, hold])
    const d = deferred()
    host.deletes.push(d)
    return d.promise
  }
  return host
}

const oneSlot = document(executor('fly', { provision: true, kind: 'vm' }))

test('a released machine holds its slot until machines.delete settles (issue 14)', async (t) => {
  const host = gatedDeletes()
  const r = await Roster.create({ document: oneSlot, machines: host.machines, probe: false })
  t.after(() => r.close())
  const first = r.lease('coder')
  host.pending[0].resolve('m-1')
  const lease = await first
  const second = r.lease('coder')
  lease.release()
  assert.deepEqual(host.deleted, [['fly', 'm-1']])
  await new Promise((resolve) => setTimeout(resolve, 20))
  assert.equal(host.created.length, 1, 'no new machine while the old one is deleted')
  assert.equal(r.snapshot().executors[0].leases[0].deleting, true)
  host.deletes[0].resolve()
  await until(() => host.created.length === 2)
  host.pending[1].resolve('m-2')
  assert.equal((await second).hold, 'm-2')
})

test('a failed deletion frees the slot with a warning naming the machine for a sweep', async (t) => {
  const host = gatedDeletes()
  const r = await Roster.create({ document: oneSlot, machines: host.machines, probe: false })
  t.after(() => r.close())
  const first = r.lease('coder')
  host.pending[0].resolve({ machine: 'm-1' })
  const lease = await first
  const second = r.lease('coder')
  const failed = nextEvent(r, 'machineDeleteFailed')
  lease.release()
  host.deletes[0].reject(new Error('provider timeout'))
  const event = await failed
  assert.equal(event.level, 'warn')
  assert.deepEqual(event.fields.hold, { machine: 'm-1' })
  assert.match(event.message, /provider timeout.*sweep/)
  await until(() => host.created.length === 2)
  host.pending[1].resolve('m-2')
  assert.equal((await second).hold, 'm-2')
})

test('given a preflight, Roster.create preflights every executor first; a failure rejects PREFLIGHT_FAILED', async () => {
  const asked = []
  const workers = { workers: [{ name: 'a', kind: 'docker' }, { name: 'b', kind: 'docker' }] }
  const error = await rejection(
    Roster.create({
      document: workers,
      probe: false,
      preflight: async ({ executor: id }) => {
        asked.push(id)
        if (id === 'b') throw new Error('no docker daemon')
      },
    }),
  )
  assert.equal(error.code, 'PREFLIGHT_FAILED')
  assert.equal(error.executor, 'b')
  assert.match(error.message, /no docker daemon/)
  assert.deepEqual(asked.sort(), ['a', 'b'])

  let release
  const gate = new Promise((resolve) => (release = resolve))
  let started = false
  const starting = Roster.create({
    document: workers,
    probe: false,
    preflight: async () => {
      await gate
    },
  }).then((r) => {
    started = true
    return r
  })
  await new Promise((resolve) => setTimeout(resolve, 20))
  assert.equal(started, false, 'the roster waits for its preflights')
  release()
  const r = await starting
  assert.equal(r.snapshot().executors.every((e) => e.preflight?.ok === true), true)
  // A reload that adds a worker is preflighted too, without preflightReloads.
  const preflighting = nextEvent(r, 'preflighting')
  await r.reload({ workers: [...workers.workers, { name: 'c', kind: 'docker' }] })
  assert.deepEqual((await preflighting).fields.executors, ['c'])
  await r.close()
})
