// The roster seed side by side with rota/effect (issue 44, "Tests"): the seed's own
// `Roster.ts` (@llm4ts/flow 2.9.1, from the seeds directory) runs against
// @llm4ts/flow@2.7.2's `Persistence` and `FlowEvents` and effect (its peer,
// 4.0.0-rc.115), with small local stand-ins for the two imports 2.7.2 lacks
// (`RosterExhausted`, `isOutage`). The same scenarios run on the seed and on
// rota/effect under a TestClock; their observable outcomes (leases, events, reports,
// exclusions, the state file) must be equal, except where README's "Where rota differs
// from the roster seed, on purpose" names the difference (each such case below says
// which bullet).

import assert from 'node:assert/strict'
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { pathToFileURL } from 'node:url'

const project = process.env.ROTA_TEST_PROJECT ?? process.cwd()
const devModules = process.env.ROTA_DEV_MODULES ?? join(import.meta.dirname, '..', 'node_modules')
const packageRoot = process.env.ROTA_PACKAGE_ROOT ?? join(import.meta.dirname, '..')
const link = join(project, 'node_modules', 'effect')
if (!existsSync(link)) {
  mkdirSync(dirname(link), { recursive: true })
  symlinkSync(join(process.env.ROTA_EFFECT_MODULES ?? devModules, 'effect'), link, 'dir')
}

/** The seeds directory: ROTA_SEEDS, else `shared/seeds` beside the checkout (or its worktree's parent). */
const seedsDir = [process.env.ROTA_SEEDS, join(packageRoot, '..', '..', 'shared', 'seeds'), join(packageRoot, '..', '..', '..', 'shared', 'seeds')].find(
  (dir) => dir !== undefined && existsSync(dir),
)
const effectVersion = JSON.parse(readFileSync(join(link, 'package.json'), 'utf8')).version
const seedPeer = JSON.parse(readFileSync(join(devModules, '@llm4ts', 'flow', 'package.json'), 'utf8')).peerDependencies.effect
const skip =
  seedsDir === undefined
    ? 'the seeds directory is not found (set ROTA_SEEDS)'
    : effectVersion !== seedPeer
      ? `the seed runs on @llm4ts/flow@2.7.2's peer effect ${seedPeer}, not ${effectVersion}`
      : false

const Effect = await import('effect/Effect')
const Fiber = await import('effect/Fiber')
const DateTime = await import('effect/DateTime')
const TestClock = await import('effect/testing/TestClock')
const rota = await import('rota/effect')

/** The seed's Roster.ts, compiled by esbuild, its four relative imports pointed at 2.7.2 and the stand-ins. */
async function loadSeed() {
  const file = (await import('node:fs')).readdirSync(seedsDir).find((name) => name.startsWith('000_'))
  const text = readFileSync(join(seedsDir, file), 'utf8')
  const lines = text.split('\n')
  const start = lines.findIndex((line) => line.startsWith('@@'))
  const source = lines
    .slice(start + 1)
    .filter((line) => line.startsWith('+'))
    .map((line) => line.slice(1))
    .join('\n')
  const esbuild = (await import(pathToFileURL(join(devModules, 'esbuild', 'lib', 'main.js')).href)).default
  let { code } = esbuild.transformSync(source, { loader: 'ts', format: 'esm', target: 'es2022' })
  const dir = join(project, 'test', 'seed-roster')
  mkdirSync(dir, { recursive: true })
  const flow = (name) => pathToFileURL(join(devModules, '@llm4ts', 'flow', 'dist', `${name}.js`)).href
  code = code
    .replace('"./FlowError.ts"', '"./FlowError.js"')
    .replace('"./TransientRetry.ts"', '"./TransientRetry.js"')
    .replace('"./FlowEvents.ts"', JSON.stringify(flow('FlowEvents')))
    .replace('"./Persistence.ts"', JSON.stringify(flow('Persistence')))
  // Stand-ins for what @llm4ts/flow 2.7.2 lacks, written from the seed's description:
  // the tagged failure of a lease nothing can ever serve, and "the serving engine
  // itself is down" (the signals of its upstream's isOutage; never a context overflow).
  writeFileSync(
    join(dir, 'FlowError.js'),
    `import * as Schema from 'effect/Schema'
export class RosterExhausted extends Schema.TaggedError()('RosterExhausted', { role: Schema.String, reasons: Schema.Array(Schema.String) }) {}
`,
  )
  writeFileSync(
    join(dir, 'TransientRetry.js'),
    `const outage = ['engine is recovering', 'engine_recovering', 'backend is unhealthy', 'runtime_unavailable', 'server is shutting down', 'server_shutdown', 'failed to load model', 'engine protocol startup was aborted']
const overflow = ['exceeds the maximum number of tokens', 'input token count exceeds', 'context length exceeded', 'maximum context length', 'prompt is too long', 'request too large']
export const isOutage = (error) => {
  const message = String(error?.message ?? '').toLowerCase()
  return !overflow.some((s) => message.includes(s)) && outage.some((s) => message.includes(s))
}
`,
  )
  writeFileSync(join(dir, 'Roster.js'), code)
  const seed = await import(pathToFileURL(join(dir, 'Roster.js')).href)
  return seed
}

const seed = skip ? undefined : await loadSeed()
const memoryFiles = () => {
  const files = {}
  return {
    files,
    read: (path) => Effect.sync(() => files[path]),
    writeAtomic: (path, contents) => Effect.sync(() => void (files[path] = contents)),
    append: (path, contents) => Effect.sync(() => void (files[path] = (files[path] ?? '') + contents)),
    remove: (path) => Effect.sync(() => void delete files[path]),
    hashSha256: () => Effect.die('unused'),
  }
}

/** One real event-loop turn (promise callbacks run; no time passes). */
const settle = Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
const plain = (value) => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)))

/**
 * Runs `scenario(api, record)` on one side (`api`: the seed's module or rota/effect)
 * under a TestClock at 0; returns what it recorded and every event published.
 */
async function outcome(api, scenario, options = {}) {
  const published = []
  const record = []
  const events = { publish: (event) => Effect.sync(() => published.push(`${event._tag}: ${event.message}`)) }
  await Effect.runPromise(
    Effect.gen(function* () {
      yield* scenario({ api, events, record: (...values) => record.push(plain(values)), ...options })
    }).pipe(Effect.scoped, Effect.provide(TestClock.layer())),
  )
  return { record, published }
}

async function sideBySide(scenario, options) {
  const seedOutcome = await outcome(seed, scenario, options?.())
  const rotaOutcome = await outcome(rota, scenario, options?.())
  return { seed: seedOutcome, rota: rotaOutcome }
}

const specs = (api, ...entries) => entries.map((fields) => api.ExecutorSpec.make({ harness: 'pi', roles: ['coder'], ...fields }))
const leaseId = (roster, role, options) => Effect.scoped(Effect.map(roster.lease(role, options), (lease) => lease.executor.id))

test('leases by priority, round-robin among equals, prefer, avoid', { skip }, async () => {
  const { seed: s, rota: r } = await sideBySide(({ api, events, record }) =>
    Effect.gen(function* () {
      const roster = yield* api.makeRoster({ executors: specs(api, { id: 'a' }, { id: 'b' }, { id: 'c', priority: 2 }), events })
      record('round', yield* leaseId(roster, 'coder'), yield* leaseId(roster, 'coder'), yield* leaseId(roster, 'coder'))
      record('prefer', yield* leaseId(roster, 'coder', { prefer: 'c' }))
      record('avoid', yield* leaseId(roster, 'coder', { avoid: ['a', 'b'], label: 'story-9' }))
      const held = yield* Effect.scoped(
        Effect.gen(function* () {
          const one = yield* roster.lease('coder')
          const two = yield* roster.lease('coder')
          const three = yield* roster.lease('coder')
          record('held', [one, two, three].map((l) => l.executor.id), yield* roster.available('coder'), yield* roster.tryLease('coder'))
          return yield* roster.snapshot
        }),
      )
      record('snapshot', held.map((x) => [x.executor.id, x.busy, x.busyCoders]), roster.slots('coder'))
    }),
  )
  assert.deepEqual(r.record, s.record)
  assert.deepEqual(r.published, s.published)
})

test('a wait under TestClock: the waiter gets the executor when its usage limit resets (resetAt), not before', { skip }, async () => {
  const { seed: s, rota: r } = await sideBySide(({ api, events, record }) =>
    Effect.gen(function* () {
      const roster = yield* api.makeRoster({ executors: specs(api, { id: 'a' }), events })
      const resetAt = DateTime.makeUnsafe(45 * 60_000)
      record('report', yield* roster.report('a', { _tag: 'UsageLimitError', message: 'resets at 00:45', resetAt }))
      let got
      const waiter = yield* Effect.forkChild(Effect.map(leaseId(roster, 'coder', { label: 'story-1' }), (id) => (got = id)))
      yield* settle
      yield* TestClock.adjust('44 minutes')
      yield* settle
      record('at 44m', got)
      yield* TestClock.adjust('1 minute')
      yield* Fiber.join(waiter)
      record('at 45m', got)
    }),
  )
  assert.deepEqual(r.record, s.record)
  assert.deepEqual(r.published, s.published)
})

test('rate limits: three within ten minutes exclude for the rate cooldown', { skip }, async () => {
  const { seed: s, rota: r } = await sideBySide(({ api, events, record }) =>
    Effect.gen(function* () {
      const roster = yield* api.makeRoster({ executors: specs(api, { id: 'a', cooldown: { rateLimit: '2 minutes' } }), events })
      const rate = { _tag: 'RateLimitError', message: 'rate limited' }
      record(yield* roster.report('a', rate))
      yield* TestClock.adjust('11 minutes')
      record(yield* roster.report('a', rate))
      yield* TestClock.adjust('1 minute')
      record(yield* roster.report('a', rate))
      record(yield* roster.report('a', rate))
      record(yield* roster.available('coder'))
      yield* TestClock.adjust('2 minutes')
      record(yield* roster.available('coder'))
    }),
  )
  assert.deepEqual(r.record, s.record)
  // The seed says nothing of an expiry seen by a query (README: "Exclusions expire on the
  // input that passes their time, always with an event"): rota says "a back in the round".
  assert.deepEqual(r.published.filter((line) => !line.endsWith('a back in the round')), s.published)
  assert.deepEqual(r.published.at(-1), 'Info: roster: a back in the round')
})

test('an outage without a health URL waits out the outage cooldown; exhaustion names every executor', { skip }, async () => {
  const { seed: s, rota: r } = await sideBySide(({ api, events, record }) =>
    Effect.gen(function* () {
      const roster = yield* api.makeRoster({ executors: specs(api, { id: 'a' }, { id: 'b', roles: ['coder', 'judge'] }), events })
      record(yield* roster.report('a', { _tag: 'ProviderError', message: 'the engine is recovering' }))
      record(yield* roster.report('b', { _tag: 'ProviderError', message: 'HTTP 500 internal error' }))
      record(yield* roster.report('b', { _tag: 'AuthenticationError', message: 'OAuth token has expired.' }))
      record(yield* roster.canEverServe('coder'), yield* roster.canEverServe('judge'))
      const judge = yield* Effect.scoped(roster.lease('judge')).pipe(Effect.flip)
      record(judge._tag, judge.role, judge.reasons)
      record(yield* roster.report('a', { _tag: 'AuthenticationError', message: 'not signed in' }))
      const coder = yield* Effect.scoped(roster.lease('coder', { avoid: [] })).pipe(Effect.flip)
      record(coder._tag, coder.reasons)
    }),
  )
  assert.deepEqual(r.record, s.record)
  assert.deepEqual(r.published, s.published)
})

test('an outage with a health URL and a probe: probed while a lease waits, back when it answers', { skip }, async () => {
  const options = () => {
    const answers = { up: false, calls: 0 }
    return { answers, probe: (url) => Effect.sync(() => ((answers.calls += 1), answers.up)) }
  }
  const { seed: s, rota: r } = await sideBySide(
    ({ api, events, record, probe, answers }) =>
      Effect.gen(function* () {
        const roster = yield* api.makeRoster({ executors: specs(api, { id: 'a', health: 'http://engine/health' }), events, probe })
        record(yield* roster.report('a', { _tag: 'ProviderError', message: 'the engine is recovering' }))
        let got
        const waiter = yield* Effect.forkChild(Effect.map(leaseId(roster, 'coder'), (id) => (got = id)))
        yield* settle
        yield* TestClock.adjust('15 seconds')
        yield* settle
        record('down', got, answers.calls > 0)
        answers.up = true
        yield* TestClock.adjust('15 seconds')
        yield* Fiber.join(waiter)
        record('up', got)
      }),
    options,
  )
  // The health exclusion's `until` is its next probe time. The seed's is "now" (it probes
  // only inside a waiting lease); rota probes at once, whoever asks, and next on its idle
  // interval (README: "Health probes follow their schedule whoever asks").
  const [[seedReport], [rotaReport]] = [s.record.shift(), r.record.shift()]
  assert.equal(seedReport.until, 0)
  assert.equal(rotaReport.until, 60_000)
  assert.deepEqual({ ...rotaReport, until: 0 }, seedReport)
  assert.deepEqual(r.record, s.record)
  assert.deepEqual(r.published, s.published)
})

test('the state file across a restart: the same bytes, read back by the other side', { skip }, async () => {
  const path = '.llm4ts/roster-state.json'
  const write = async (api, files) =>
    outcome(api, ({ events, record }) =>
      Effect.gen(function* () {
        const state = api.makeRosterStateStore(files, path)
        const roster = yield* api.makeRoster({ executors: specs(api, { id: 'a' }, { id: 'b' }, { id: 'c' }), events, state })
        yield* roster.exclude(api.Exclusion.make({ id: 'a', kind: 'manual', reason: 'ops' }))
        yield* roster.report('b', { _tag: 'UsageLimitError', message: 'limit' })
        yield* roster.report('c', { _tag: 'AuthenticationError', message: 'expired' })
        record(files.files[path])
      }),
    )
  const seedFiles = memoryFiles()
  const rotaFiles = memoryFiles()
  const s = await write(seed, seedFiles)
  const r = await write(rota, rotaFiles)
  assert.equal(rotaFiles.files[path], seedFiles.files[path])
  assert.deepEqual(r.published, s.published)
  // A restart on the other side's file restores the same exclusions.
  const restart = (api, files) =>
    outcome(api, ({ events, record }) =>
      Effect.gen(function* () {
        const roster = yield* api.makeRoster({ executors: specs(api, { id: 'a' }, { id: 'b' }, { id: 'c' }), events, state: api.makeRosterStateStore(files, path) })
        record((yield* roster.snapshot).map((x) => [x.executor.id, x.exclusion === undefined ? null : plain(x.exclusion)]))
      }),
    )
  assert.deepEqual((await restart(rota, seedFiles)).record, (await restart(seed, rotaFiles)).record)
})
