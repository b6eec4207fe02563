// The state file against the seed's own code and under stress:
// - interop with @llm4ts/flow@2.7.2's saveVersioned/loadVersioned (the seed roster's
//   persistence), both ways, byte for byte;
// - two Node processes x 25 exclusions into one file: every entry present;
// - a writer killed (SIGKILL) again and again mid-write: the file always parses, and
//   the next start leaves no temp file and no lock behind;
// - EACCES: a writer running as `nobody` (setpriv) facing a file it cannot read: left
//   alone, retried, written once readable, nothing lost;
// - ENOSPC: a 64 KiB tmpfs filled up (mount needs root): retried, written once there
//   is room, nothing lost.
// A random test prints its seed; ROTA_KILL_SEED replays it.

import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { readFile, rename, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { test } from 'node:test'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { Roster, stateFile } from 'rota'
import { document, executor, nextEvent, tempDir, virtualClock } from './helpers.mjs'

const WRITER = fileURLToPath(new URL('./state-writer.mjs', import.meta.url))

// The seed's persistence, a dev dependency of the package (this file may run from a
// fresh project where only the tarball is installed: run.mjs says where the package is).
const devModules = process.env.ROTA_PACKAGE_ROOT
  ? join(process.env.ROTA_PACKAGE_ROOT, 'node_modules')
  : fileURLToPath(new URL('../node_modules/', import.meta.url))
const devImport = (path) => import(pathToFileURL(join(devModules, path)).href)
const Effect = await devImport('effect/dist/Effect.js')
const Schema = await devImport('effect/dist/Schema.js')
const { loadVersioned, saveVersioned } = await devImport('@llm4ts/flow/dist/Persistence.js')

// ---- the seed's schema (Roster.ts, the roster seed) and a PlainFileStore over node:fs ----

const ExclusionKind = Schema.Literals(['until', 'health', 'run', 'manual'])
class Exclusion extends Schema.Class('Exclusion')({
  id: Schema.String,
  reason: Schema.String,
  kind: ExclusionKind,
  until: Schema.optionalKey(Schema.Number),
}) {}
class RosterState extends Schema.Class('RosterState')({ exclusions: Schema.Array(Exclusion) }) {}
const RosterStateVersion = 1

const files = {
  read: (path) => Effect.promise(() => readFile(path, 'utf8').catch((e) => (e.code === 'ENOENT' ? undefined : Promise.reject(e)))),
  writeAtomic: (path, contents) => Effect.promise(() => writeFile(`${path}.seed-tmp`, contents).then(() => rename(`${path}.seed-tmp`, path))),
  append: () => Effect.die('unused'),
  remove: () => Effect.die('unused'),
  hashSha256: () => Effect.die('unused'),
}
const seedLoad = (path) => Effect.runPromise(loadVersioned(files, path, RosterStateVersion, RosterState))
const seedSave = (path, exclusions) =>
  Effect.runPromise(saveVersioned(files, path, RosterStateVersion, RosterState, RosterState.make({ exclusions: exclusions.map((e) => Exclusion.make(e)) })))
const plain = (state) => state.exclusions.map((e) => ({ ...e }))

test('rota writes what the seed loads, byte for byte what the seed itself would write', async (t) => {
  const dir = tempDir(t)
  const statePath = join(dir, 'roster-state.json')
  const clock = virtualClock()
  const r = await Roster.create({ document: document(executor('a'), executor('b'), executor('c')), statePath, now: clock, probe: false })
  const reason = 'paused: "quoted" \\ back \u2028 日本語 🚀 \u0001 end'
  r.exclude('a', { reason })
  r.report('b', { kind: 'usageLimit', message: 'limit reached', resetAt: clock() + 3_600_000 })
  r.report('c', { kind: 'authentication', message: 'not signed in' })
  await r.close()

  const loaded = await seedLoad(statePath)
  assert.deepEqual(plain(loaded), [
    { id: 'a', reason, kind: 'manual' },
    { id: 'b', reason: loaded.exclusions[1].reason, kind: 'until', until: clock() + 3_600_000 },
  ])
  const again = join(dir, 'seed-wrote.json')
  await seedSave(again, plain(loaded))
  assert.equal(readFileSync(statePath, 'utf8'), readFileSync(again, 'utf8'), 'the same bytes as saveVersioned')
})

test('the seed writes what rota restores; rota keeps the entries it does not own and the seed loads the result', async (t) => {
  const dir = tempDir(t)
  const statePath = join(dir, 'roster-state.json')
  const clock = virtualClock()
  await seedSave(statePath, [
    { id: 'a', reason: 'operator pause', kind: 'manual' },
    { id: 'other-roster', reason: 'theirs', kind: 'until', until: clock() + 60_000 },
    { id: 'b', reason: 'ended', kind: 'until', until: clock() - 1 },
    { id: 'local', reason: 'engine down', kind: 'health', until: clock() },
  ])
  const events = []
  const r = await Roster.create({ document: document(executor('a'), executor('b')), statePath, now: clock, probe: false, onEvent: (e) => events.push(e.name) })
  const a = r.snapshot().executors.find((e) => e.id === 'a')
  assert.equal(a.exclusion?.kind, 'manual', 'the seed file restores')
  assert.equal(a.exclusion?.reason, 'operator pause')
  assert.ok(!events.some((name) => name.startsWith('stateFile')), `no state-file event: ${events}`)
  r.exclude('b', { reason: 'now mine' })
  await r.close()
  const loaded = await seedLoad(statePath)
  assert.deepEqual(
    plain(loaded).map((e) => e.id),
    ['a', 'other-roster', 'local', 'b'],
    "the other roster's entries kept in place, the ended one gone, mine written",
  )
})

test("rota's earlier format is read and rewritten in the seed's", async (t) => {
  const dir = tempDir(t)
  const statePath = join(dir, 'state.json')
  writeFileSync(statePath, JSON.stringify({ version: 1, exclusions: [{ id: 'a', reason: 'old', kind: 'manual' }] }))
  const r = await Roster.create({ document: document(executor('a'), executor('b')), statePath, probe: false })
  assert.equal(r.snapshot().executors[0].exclusion?.reason, 'old')
  r.exclude('b', { reason: 'new' })
  await r.close()
  assert.deepEqual(plain(await seedLoad(statePath)).map((e) => e.id), ['a', 'b'])
})

// ---- processes ------------------------------------------------------------------------

/** Runs the writer fixture (`script`: a copy of it elsewhere); its exit and JSON lines. */
function writer(args, { user, gate = false, script = WRITER } = {}) {
  const command = user === undefined ? process.execPath : 'setpriv'
  const argv = user === undefined ? [script, ...args] : ['--reuid', user, '--regid', user, '--clear-groups', process.execPath, script, ...args]
  const child = spawn(command, argv, {
    stdio: [gate ? 'pipe' : 'ignore', 'pipe', 'inherit'],
    env: { ...process.env, ROTA_WRITER_GATE: gate ? '1' : '0' },
  })
  const lines = []
  const waiters = []
  createInterface({ input: child.stdout }).on('line', (line) => {
    const value = JSON.parse(line)
    lines.push(value)
    for (const w of [...waiters]) if (w.test(value)) waiters.splice(waiters.indexOf(w), 1) && w.resolve(value)
  })
  let ended = false
  const exited = new Promise((resolve) =>
    child.on('exit', (code, signal) => {
      ended = true
      for (const w of waiters.splice(0)) w.reject(new Error(`the writer ended (${code ?? signal}) first: ${JSON.stringify(lines)}`))
      resolve({ code, signal, lines })
    }),
  )
  const line = (test) =>
    new Promise((resolve, reject) => {
      const found = lines.find(test)
      if (found) resolve(found)
      else if (ended) reject(new Error(`the writer ended first: ${JSON.stringify(lines)}`))
      else waiters.push({ test, resolve, reject })
    })
  return { child, exited, line }
}

const entriesOf = (path) => stateFile.parse(readFileSync(path, 'utf8')).exclusions.map((e) => e.id)
const leftovers = (dir) => readdirSync(dir).filter((n) => n.includes('.tmp-') || n.endsWith('.lock'))

test('two processes x 25 exclusions into one file: every entry is there', { timeout: 120_000 }, async (t) => {
  const dir = tempDir(t)
  const statePath = join(dir, 'shared.json')
  const writers = [writer([statePath, 'p1', '25'], { gate: true }), writer([statePath, 'p2', '25'], { gate: true })]
  await Promise.all(writers.map((w) => w.line((l) => l.started)))
  for (const w of writers) w.child.stdin.end('go\n')
  const runs = await Promise.all(writers.map((w) => w.exited))
  for (const run of runs) assert.equal(run.code, 0, JSON.stringify(run))
  const ids = entriesOf(statePath)
  const want = ['p1', 'p2'].flatMap((p) => Array.from({ length: 25 }, (_, i) => `${p}-${i}`))
  assert.deepEqual([...ids].sort(), want.sort(), `${ids.length} of 50 entries`)
  assert.deepEqual(leftovers(dir), [])
})

/** splitmix32-ish: a small seeded generator (the seed is printed). */
function random(seed) {
  let s = seed >>> 0
  return () => {
    s = (s + 0x9e3779b9) >>> 0
    let z = s
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0
    return ((z ^ (z >>> 16)) >>> 0) / 2 ** 32
  }
}

test('a writer killed with SIGKILL mid-write again and again: the file always parses, the next start cleans up', { timeout: 180_000 }, async (t) => {
  const seed = Number(process.env.ROTA_KILL_SEED ?? Math.floor(Math.random() * 2 ** 32))
  console.log(`kill -9 loop seed ${seed} (replay: ROTA_KILL_SEED=${seed})`)
  const next = random(seed)
  const dir = tempDir(t)
  const statePath = join(dir, 'killed.json')
  for (let round = 0; round < 12; round += 1) {
    const run = writer([statePath, `k${round % 3}`, '10', 'loop'])
    await run.line((l) => l.started)
    await new Promise((resolve) => setTimeout(resolve, 20 + Math.floor(next() * 200)))
    run.child.kill('SIGKILL')
    const { signal } = await run.exited
    assert.equal(signal, 'SIGKILL')
    if (existsSync(statePath)) {
      assert.doesNotThrow(() => stateFile.parse(readFileSync(statePath, 'utf8')), `round ${round} (seed ${seed}): the file parses`)
    }
  }
  // The next start: the killed writers' temp files and lock are gone, the file loads.
  const events = []
  const r = await Roster.create({ document: document(executor('k0-0')), statePath, probe: false, onEvent: (e) => events.push(e.name) })
  assert.deepEqual(leftovers(dir), [], `seed ${seed}`)
  assert.ok(!events.includes('stateFileCorrupt'), `seed ${seed}: ${events}`)
  r.exclude('k0-0', { reason: 'after' })
  await r.close()
  assert.ok(entriesOf(statePath).includes('k0-0'))
  assert.deepEqual(leftovers(dir), [])
})

const canSetpriv = spawnSync('setpriv', ['--reuid', '65534', '--regid', '65534', '--clear-groups', 'true']).status === 0

test('EACCES: a writer that cannot read the file leaves it alone, retries, and writes everything once it can', { timeout: 120_000, skip: !canSetpriv && 'setpriv cannot run as nobody here' }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rota-eacces-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  chmodSync(dir, 0o777)
  // `nobody` may not reach this package where it is (a private temp dir): a copy of the
  // installed package and the writer, readable by all.
  const app = join(dir, 'app')
  const installed = join(fileURLToPath(import.meta.resolve('rota')), '..', '..')
  cpSync(installed, join(app, 'node_modules', 'rota'), { recursive: true })
  writeFileSync(join(app, 'package.json'), '{"type":"module"}')
  cpSync(WRITER, join(app, 'state-writer.mjs'))
  const statePath = join(dir, 'private.json')
  await seedSave(statePath, [{ id: 'root-only', reason: "another user's", kind: 'manual' }])
  chmodSync(statePath, 0o600) // root's: `nobody` cannot read it
  const before = readFileSync(statePath)
  const run = writer([statePath, 'n', '25'], { user: '65534', script: join(app, 'state-writer.mjs') })
  await run.line((l) => l.event === 'stateFileUnreadable' && /EACCES/.test(l.message) && / retrying /.test(l.message))
  await run.line((l) => l.event === 'stateFileUnreadable' && / retrying /.test(l.message))
  assert.deepEqual(readFileSync(statePath), before, 'not written over')
  assert.deepEqual(readdirSync(dir).filter((n) => n.includes('.corrupt-')), [], 'not set aside')
  chmodSync(statePath, 0o644)
  const { code, lines } = await run.exited
  assert.equal(code, 0, JSON.stringify(lines))
  assert.ok(lines.some((l) => l.event === 'stateFileRecovered'))
  assert.deepEqual(leftovers(dir), [])
  const ids = entriesOf(statePath)
  assert.deepEqual([...ids].sort(), ['root-only', ...Array.from({ length: 25 }, (_, i) => `n-${i}`)].sort())
})

function mountTmpfs(dir) {
  return spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir]).status === 0
}

test('ENOSPC: a full disk fails the writes, they are retried, and every entry lands once there is room', { timeout: 60_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'rota-enospc-'))
  if (!mountTmpfs(dir)) {
    rmSync(dir, { recursive: true, force: true })
    t.skip('cannot mount a tmpfs here (needs root)')
    return
  }
  t.after(() => {
    spawnSync('umount', [dir])
    rmSync(dir, { recursive: true, force: true })
  })
  const statePath = join(dir, 'state.json')
  const clock = virtualClock()
  const ids = Array.from({ length: 25 }, (_, i) => `s-${i}`)
  const r = await Roster.create({ document: document(...ids.map((id) => executor(id))), statePath, now: clock, probe: false, stateRetry: { firstMs: 10, maxMs: 50 } })
  t.after(() => r.close())
  // Fill the disk (the filler's last write fails with ENOSPC).
  const filler = join(dir, 'filler')
  assert.throws(() => writeFileSync(filler, Buffer.alloc(128 * 1024, 1)), /ENOSPC/)
  const failed = nextEvent(r, 'stateFileWriteFailed')
  for (const id of ids) r.exclude(id, { reason: `${id}: disk full` })
  assert.match((await failed).message, /ENOSPC/)
  assert.equal(existsSync(statePath), false)
  const recovered = nextEvent(r, 'stateFileRecovered')
  rmSync(filler)
  await recovered
  assert.deepEqual(entriesOf(statePath), ids)
  assert.deepEqual(leftovers(dir), [], 'no temp file left by the failed writes')
})
