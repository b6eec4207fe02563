// The state file: the seed's format, atomic writes merged with other rosters' entries,
// a restart that reloads exclusions, and a corrupt or unreadable file moved aside and
// reported (never a crash, never a silent loss).

import assert from 'node:assert/strict'
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { Roster, memoryState } from 'rota'
import { document, executor, nextEvent, tempDir, virtualClock } from './helpers.mjs'

const roster = document(executor('a'), executor('b'), executor('c'))
const read = (path) => JSON.parse(readFileSync(path, 'utf8'))

test('exclusions are written in the seed format, merged with other rosters, and reloaded on restart', async (t) => {
  const dir = tempDir(t)
  const statePath = join(dir, 'state', 'roster-state.json')
  const clock = virtualClock()
  mkdirSync(join(dir, 'state'))
  // Another roster's entries share the file: live ones stay, expired ones go.
  writeFileSync(
    statePath,
    JSON.stringify({
      version: 1,
      exclusions: [
        { id: 'elsewhere', kind: 'manual', reason: 'theirs' },
        { id: 'old', kind: 'until', reason: 'expired', until: clock() - 1 },
      ],
    }),
  )
  const first = await Roster.create({ document: roster, statePath, now: clock, probe: false })
  first.exclude('a', { reason: 'maintenance' })
  first.report('b', { kind: 'usageLimit', message: 'limit reached', resetAt: clock() + 3_600_000 })
  first.report('c', { kind: 'authentication', message: 'not signed in' })
  await first.idle()
  const written = read(statePath)
  assert.equal(written.version, 1)
  assert.deepEqual(
    written.exclusions.map((e) => [e.id, e.kind]),
    [
      ['elsewhere', 'manual'],
      ['a', 'manual'],
      ['b', 'until'],
    ],
    'run exclusions are never written; other rosters keep theirs',
  )
  assert.equal(written.exclusions.find((e) => e.id === 'b').until, clock() + 3_600_000)
  assert.deepEqual(
    readdirSync(join(dir, 'state')),
    ['roster-state.json'],
    'no temp file left behind',
  )
  await first.close()

  // A restart reads them back; the run exclusion is gone with the run.
  clock.advance(60_000)
  const second = await Roster.create({ document: roster, statePath, now: clock, probe: false })
  t.after(() => second.close())
  const executors = second.snapshot().executors
  assert.equal(executors.find((e) => e.id === 'a').exclusion.kind, 'manual')
  assert.equal(executors.find((e) => e.id === 'b').exclusion.until, clock() + 3_540_000)
  assert.equal(executors.find((e) => e.id === 'c').exclusion, undefined)
  assert.equal(second.available('coder'), 1)

  // Resuming writes the file again; the other roster's entry is still there.
  second.resume('a')
  await second.idle()
  assert.deepEqual(
    read(statePath).exclusions.map((e) => e.id),
    ['elsewhere', 'b'],
  )
})

test('a burst of changes is written once per write, ending in the last state', async (t) => {
  const dir = tempDir(t)
  const statePath = join(dir, 'state.json')
  const many = document(...Array.from({ length: 50 }, (_, i) => executor(`e${i}`)))
  const r = await Roster.create({ document: many, statePath, probe: false })
  t.after(() => r.close())
  for (let i = 0; i < 50; i += 1) r.exclude(`e${i}`, { reason: `pause ${i}` })
  for (let i = 0; i < 50; i += 2) r.resume(`e${i}`)
  await r.idle()
  const ids = read(statePath).exclusions.map((e) => e.id)
  assert.deepEqual(
    ids,
    Array.from({ length: 25 }, (_, i) => `e${2 * i + 1}`),
  )
  assert.deepEqual(readdirSync(dir), ['state.json'])
})

test('a corrupt state file is moved aside and reported; the roster starts clean', async (t) => {
  const dir = tempDir(t)
  const statePath = join(dir, 'state.json')
  writeFileSync(statePath, '{"version": 1, "exclusions": [ {"id": "a", "kind": "man')
  const clock = virtualClock()
  const events = []
  const r = await Roster.create({ document: roster, statePath, now: clock, probe: false, onEvent: (e) => events.push(e) })
  t.after(() => r.close())
  const event = events.find((e) => e.name === 'stateCorrupt')
  assert.ok(event, 'reported as an event')
  assert.equal(event.level, 'warn')
  const aside = `${statePath}.corrupt-${clock()}`
  assert.equal(event.fields.movedTo, aside)
  assert.equal(readFileSync(aside, 'utf8'), '{"version": 1, "exclusions": [ {"id": "a", "kind": "man', 'kept, not lost')
  assert.equal(existsSync(statePath), false)
  assert.equal(r.available('coder'), 3, 'started clean')
  r.exclude('b', { reason: 'x' })
  await r.idle()
  assert.deepEqual(read(statePath).exclusions.map((e) => e.id), ['b'])
})

test('valid JSON the core cannot read as state is moved aside too', async (t) => {
  const dir = tempDir(t)
  const statePath = join(dir, 'state.json')
  writeFileSync(statePath, JSON.stringify({ version: 1, exclusions: [{ id: 'a', kind: 'forever', reason: '?' }] }))
  const clock = virtualClock()
  const corrupt = []
  const r = await Roster.create({ document: roster, statePath, now: clock, probe: false, onEvent: (e) => e.name === 'stateCorrupt' && corrupt.push(e) })
  t.after(() => r.close())
  assert.equal(corrupt.length, 1)
  assert.ok(existsSync(`${statePath}.corrupt-${clock()}`))
  // Another version of the format is not ours to read either.
  writeFileSync(statePath, JSON.stringify({ version: 7, exclusions: [] }))
  clock.advance(1)
  const again = []
  const other = await Roster.create({ document: roster, statePath, now: clock, probe: false, onEvent: (e) => again.push(e.name) })
  t.after(() => other.close())
  assert.ok(again.includes('stateCorrupt'))
  assert.ok(existsSync(`${statePath}.corrupt-${clock()}`))
})

test('an unreadable state path is reported and moved aside; a failed save is reported', async (t) => {
  const dir = tempDir(t)
  const statePath = join(dir, 'state.json')
  mkdirSync(statePath) // a directory where the file should be: EISDIR
  const clock = virtualClock()
  const events = []
  const r = await Roster.create({ document: roster, statePath, now: clock, probe: false, onEvent: (e) => events.push(e) })
  t.after(() => r.close())
  const corrupt = events.find((e) => e.name === 'stateCorrupt')
  assert.match(corrupt.message, /EISDIR/)
  assert.ok(existsSync(`${statePath}.corrupt-${clock()}`))

  // A state path under a file cannot be written: an event, and the roster goes on.
  writeFileSync(join(dir, 'plain'), 'x')
  const failing = await Roster.create({ document: roster, statePath: join(dir, 'plain', 'state.json'), now: clock, probe: false })
  t.after(() => failing.close())
  const failed = nextEvent(failing, 'stateSaveFailed')
  failing.exclude('a', { reason: 'x' })
  const event = await failed
  assert.equal(event.level, 'warn')
  assert.match(event.message, /could not save the roster state/)
  assert.equal(failing.available('coder'), 2)
  // Closing tries the kept write once more (and reports it again), before the temp
  // directory goes.
  const again = nextEvent(failing, 'stateSaveFailed')
  await failing.close()
  await again
})

test('a state adapter (the browser way): load at start, save with others kept', async (t) => {
  const clock = virtualClock()
  const store = memoryState({
    version: 1,
    exclusions: [
      { id: 'a', kind: 'manual', reason: 'paused before' },
      { id: 'zz', kind: 'manual', reason: 'another roster' },
    ],
  })
  const r = await Roster.create({ document: roster, state: store, now: clock, probe: false })
  t.after(() => r.close())
  assert.equal(r.snapshot().executors[0].exclusion.reason, 'paused before')
  r.exclude('b', { reason: 'now' })
  await r.idle()
  assert.deepEqual(
    store.value.exclusions.map((e) => e.id).sort(),
    ['a', 'b', 'zz'],
  )
})
