// The state file: the seed's format, atomic writes merged with other rosters' entries,
// a restart that reloads exclusions, a corrupt file set aside and reported, an
// unreadable one left alone and retried (never a crash, never a silent loss).
// state-file.test.mjs has the interop with the seed's own code and the shared-file,
// kill -9, EACCES and ENOSPC trials.

import assert from 'node:assert/strict'
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { Roster, memoryState, stateFile } from 'rota'
import { START, document, executor, nextEvent, tempDir, virtualClock } from './helpers.mjs'

const roster = document(executor('a'), executor('b'), executor('c'))
/** The exclusions of a state file (the seed's envelope). */
const read = (path) => {
  const file = JSON.parse(readFileSync(path, 'utf8'))
  assert.equal(file.schemaVersion, 1)
  return file.value
}
/** Where a corrupt file is set aside at `now`. */
const aside = (path, now) => `${path}.corrupt-${new Date(now).toISOString().replaceAll(':', '')}`

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
  const event = events.find((e) => e.name === 'stateFileCorrupt')
  assert.ok(event, 'reported as an event')
  assert.equal(event.level, 'warn')
  assert.equal(event.fields.movedTo, aside(statePath, clock()))
  assert.equal(readFileSync(aside(statePath, clock()), 'utf8'), '{"version": 1, "exclusions": [ {"id": "a", "kind": "man', 'kept, not lost')
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
  const r = await Roster.create({ document: roster, statePath, now: clock, probe: false, onEvent: (e) => e.name === 'stateFileCorrupt' && corrupt.push(e) })
  t.after(() => r.close())
  assert.equal(corrupt.length, 1)
  assert.match(corrupt[0].message, /value.exclusions\[0\]: kind: unknown variant `forever`|exclusions\[0\]: kind/)
  assert.ok(existsSync(aside(statePath, clock())))
  // Another version of the format is not ours to read either.
  writeFileSync(statePath, JSON.stringify({ version: 7, exclusions: [] }))
  clock.advance(1)
  const again = []
  const other = await Roster.create({ document: roster, statePath, now: clock, probe: false, onEvent: (e) => again.push(e.name) })
  t.after(() => other.close())
  assert.ok(again.includes('stateFileCorrupt'))
  assert.ok(existsSync(aside(statePath, clock())))
})

test('a { version: 1 } object without exclusions is set aside, never read as empty and written over (issue 43)', async (t) => {
  const dir = tempDir(t)
  const statePath = join(dir, 'state.json')
  const theirs = JSON.stringify({ version: 1, data: { exclusions: [{ id: 'a', kind: 'manual', reason: 'kept' }] } })
  writeFileSync(statePath, theirs)
  const clock = virtualClock()
  const corrupt = []
  const r = await Roster.create({ document: roster, statePath, now: clock, probe: false, onEvent: (e) => e.name === 'stateFileCorrupt' && corrupt.push(e) })
  t.after(() => r.close())
  assert.equal(corrupt.length, 1)
  assert.match(corrupt[0].message, /`exclusions` is missing/)
  assert.equal(readFileSync(aside(statePath, clock()), 'utf8'), theirs, 'kept, not lost')
  r.exclude('b', { reason: 'x' })
  await r.idle()
  assert.deepEqual(read(statePath).exclusions.map((e) => e.id), ['b'])
  assert.equal(readFileSync(aside(statePath, clock()), 'utf8'), theirs, 'still kept after a write')
})

test('stateFile.restore: a { version: 1 } object without exclusions, or no text at all, is an error, not an empty restore', () => {
  assert.throws(() => stateFile.restore('{"version": 1, "data": {}}', START), (e) => e.code === 'STATE_FILE_CORRUPT')
  assert.throws(() => stateFile.restore('{"version": 1}', START), (e) => e.code === 'STATE_FILE_CORRUPT')
  assert.throws(() => stateFile.restore({}, START), (e) => e.code === 'INVALID_INPUT')
  assert.deepEqual(stateFile.restore('{"version": 1, "exclusions": []}', START), { version: 1, exclusions: [] })
})

test('an unreadable state path is left alone, reported, and retried until the write lands', async (t) => {
  const dir = tempDir(t)
  const statePath = join(dir, 'state.json')
  mkdirSync(statePath) // a directory where the file should be: EISDIR
  const clock = virtualClock()
  const events = []
  const r = await Roster.create({ document: roster, statePath, now: clock, probe: false, stateRetry: { firstMs: 5, maxMs: 20 }, onEvent: (e) => events.push(e) })
  t.after(() => r.close())
  const unreadable = events.find((e) => e.name === 'stateFileUnreadable')
  assert.match(unreadable.message, /EISDIR/)
  assert.equal(events.some((e) => e.name === 'stateFileCorrupt'), false, 'not set aside')

  // Writes wait (and retry) while it cannot be read; nothing is created beside it.
  const failed = nextEvent(r, 'stateFileUnreadable')
  r.exclude('a', { reason: 'x' })
  const event = await failed
  assert.equal(event.level, 'warn')
  assert.ok(event.fields.retryInMs > 0)
  const again = nextEvent(r, 'stateFileUnreadable')
  await again
  assert.deepEqual(
    readdirSync(dir).filter((n) => n.includes('.corrupt-') || n.includes('.tmp-')),
    [],
    'no corrupt copy per attempt, no temp file',
  )
  // Once the path is a file's again, the kept entry is written.
  const recovered = nextEvent(r, 'stateFileRecovered')
  rmSync(statePath, { recursive: true })
  await recovered
  assert.deepEqual(read(statePath).exclusions.map((e) => e.id), ['a'])

  // A state path under a file cannot be written: an event, and the roster goes on.
  writeFileSync(join(dir, 'plain'), 'x')
  const failing = await Roster.create({ document: roster, statePath: join(dir, 'plain', 'state.json'), now: clock, probe: false })
  t.after(() => failing.close())
  const writeFailed = nextEvent(failing, 'stateFileWriteFailed')
  failing.exclude('a', { reason: 'x' })
  const failure = await writeFailed
  assert.match(failure.message, /could not save the roster state/)
  assert.equal(failing.available('coder'), 2)
  // Closing tries the kept write once more (and reports it again), before the temp
  // directory goes.
  const last = nextEvent(failing, 'stateFileWriteFailed')
  await failing.close()
  await last
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
