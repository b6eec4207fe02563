// The Roster driver: create (merge, narrow), leases, the fair queue, AbortSignal,
// timeoutMs, dispose, events, report/exclude/resume, reload, queries, close.

import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { Lease, Roster, RotaError } from 'rota'
import { document, executor, nextEvent, rejection, tempDir, virtualClock } from './helpers.mjs'

const create = (doc, extra = {}) => Roster.create({ document: doc, probe: false, ...extra })

test('create merges the repository roster over the user roster and narrows it', async (t) => {
  const dir = tempDir(t)
  const userPath = join(dir, 'roster.json')
  const repoPath = join(dir, 'repo-roster.json')
  writeFileSync(
    userPath,
    JSON.stringify(document(executor('a', { model: 'small' }), executor('b'), executor('c'), executor('d'))),
  )
  writeFileSync(
    repoPath,
    JSON.stringify({ executors: [executor('a', { model: 'big', custom: { x: 1 } }), { id: 'c', disabled: true }, executor('e')] }),
  )
  const roster = await Roster.create({
    rosterPath: userPath,
    repoRosterPath: repoPath,
    executors: ['a', 'b', 'e'],
    probe: false,
  })
  t.after(() => roster.close())
  assert.deepEqual(
    roster.executors.map((e) => [e.id, e.model]),
    [
      ['a', 'big'],
      ['b', undefined],
      ['e', undefined],
    ],
  )
  const lease = await roster.lease('coder')
  assert.ok(lease instanceof Lease)
  assert.equal(lease.executor.id, 'a')
  assert.equal(lease.executor.model, 'big', 'the lease carries the executor spec, as the seed')
  assert.deepEqual(lease.executor.custom, { x: 1 }, 'unknown fields pass through')
  lease.release()

  const commaList = await Roster.create({ rosterPath: userPath, executors: 'b, d', probe: false })
  assert.deepEqual(commaList.executors.map((e) => e.id), ['b', 'd'])
  await commaList.close()

  // A missing repository roster counts as absent; a missing user roster too.
  const onlyUser = await Roster.create({ rosterPath: userPath, repoRosterPath: join(dir, 'none.json'), probe: false })
  assert.equal(onlyUser.executors.length, 4)
  await onlyUser.close()
  const missing = await rejection(Roster.create({ rosterPath: join(dir, 'none.json') }))
  assert.equal(missing.code, 'INVALID_DOCUMENT')
  assert.match(missing.message, /does not exist/)
  writeFileSync(join(dir, 'broken.json'), '{ "executors": [')
  const broken = await rejection(Roster.create({ rosterPath: join(dir, 'broken.json'), repoRosterPath: join(dir, 'broken.json') }))
  assert.equal(broken.code, 'INVALID_DOCUMENT')
  assert.equal(broken.violations.length, 2, 'both unreadable files named at once')
})

test('lease, tryLease, release (idempotent), available, slots', async (t) => {
  const roster = await create(document(executor('a', { slots: 2 }), executor('b')))
  t.after(() => roster.close())
  assert.equal(roster.slots('coder'), 3)
  assert.equal(roster.available('coder'), 3)
  const first = await roster.lease('coder', { label: 'story-1' })
  const second = await roster.lease('coder')
  const third = await roster.tryLease('coder')
  assert.ok(third instanceof Lease)
  assert.equal(roster.available('coder'), 0)
  assert.equal(await roster.tryLease('coder'), undefined, 'tryLease: nothing free, no wait')
  assert.equal(roster.snapshot().queue.length, 0, 'a tryLease never waits')
  assert.deepEqual([first.executorId, second.executorId, third.executorId].sort(), ['a', 'a', 'b'])
  first.release()
  first.release()
  assert.equal(first.released, true)
  assert.equal(roster.available('coder'), 1, 'releasing twice frees one slot')
  second.release()
  third.release()
  assert.equal(roster.available('coder'), 3)
})

test("rules: 'upstream' (issue 43): prefer breaks ties only, coderSlots defaults to slots; each rule's own field wins", async (t) => {
  const executors = [
    executor('a', { roles: ['coder', 'reviewer'], slots: 2, priority: 0 }),
    executor('b', { priority: 5 }),
  ]
  const seed = await create({ executors })
  t.after(() => seed.close())
  assert.equal(seed.slots('coder'), 2, "the seed's default: a keeps a slot for reasoning")
  assert.equal((await seed.lease('coder', { prefer: 'b' })).executorId, 'b', "the seed's prefer beats a better priority")
  const upstream = await create({ rules: 'upstream', executors })
  t.after(() => upstream.close())
  assert.equal(upstream.document.rules, 'upstream')
  assert.equal(upstream.slots('coder'), 3, 'coderSlots defaults to slots')
  assert.equal((await upstream.lease('coder', { prefer: 'b' })).executorId, 'a', 'prefer does not beat a better free priority')
  const own = await create({ rules: 'upstream', prefer: 'first', coderSlotsDefault: 'slotsMinusOne', executors })
  t.after(() => own.close())
  assert.equal(own.slots('coder'), 2)
  assert.equal((await own.lease('coder', { prefer: 'b' })).executorId, 'b')
  const refused = await rejection(create({ rules: 'latest', executors }))
  assert.equal(refused.code, 'INVALID_DOCUMENT')
  assert.deepEqual(refused.violations, [{ path: 'rules', message: '`rules` is "seed" or "upstream"' }])
})

test('effort (issue 43): a lease carries the effort its role runs at; effortOf answers it, per role with a default', async (t) => {
  const roster = await create({
    executors: [
      executor('a', { roles: ['coder', 'judge'], slots: 2, coderSlots: 2, effort: { judge: 'max', default: 'low' } }),
      executor('b', { priority: 2 }),
    ],
  })
  t.after(() => roster.close())
  const coder = await roster.lease('coder')
  const judge = await roster.lease('judge')
  assert.deepEqual([coder.executorId, coder.effort], ['a', 'low'])
  assert.deepEqual([judge.executorId, judge.effort], ['a', 'max'])
  assert.equal(roster.effortOf('a', 'judge'), 'max')
  assert.equal(roster.effortOf('b', 'coder'), undefined)
  assert.throws(() => roster.effortOf('x', 'coder'), { code: 'UNKNOWN_EXECUTOR' })
  const other = await roster.lease('coder', { avoid: ['a'] })
  assert.equal(other.executorId, 'b')
  assert.ok(!('effort' in other), 'no effort set: the lease has none')
  const refused = await rejection(create({ executors: [executor('a', { effort: { planer: 'low', coder: 'hgih' } })] }))
  assert.equal(refused.code, 'INVALID_DOCUMENT')
  assert.deepEqual(refused.violations.map((v) => v.path), ['executors[0].effort.coder', 'executors[0].effort.planer'])
  assert.match(refused.violations[1].message, /unknown role 'planer' \(roles: planner, coder, reviewer, judge, verifier, or default\)/)
})

test("a usage limit's reset time read from its message (issue 43): report and classify, rules upstream", async (t) => {
  const clock = virtualClock(1_800_000_000_000) // 2027-01-15T08:00Z
  const roster = await create({ rules: 'upstream', executors: [executor('a'), executor('b')] }, { now: clock })
  t.after(() => roster.close())
  const message = "You've hit your session limit · resets 8:20am (Europe/Rome)"
  // 08:20 in Rome (CET, +1) is 07:20Z, tomorrow: the same instant on every host.
  assert.deepEqual(roster.classify(new Error(message)), { kind: 'usageLimit', rule: 'resetAt', resetAt: 1_800_084_000_000 })
  const exclusion = roster.report('a', { kind: 'usageLimit', message })
  assert.equal(exclusion.until, 1_800_084_000_000)
  // A zone the core does not know: the usage cooldown, and a warning naming the text.
  const unread = nextEvent(roster, 'resetTimeUnread')
  const cooled = roster.report('b', { kind: 'usageLimit', message: 'resets 8:20am (Mars/Olympus_Mons)' })
  assert.equal(cooled.until, 1_800_000_000_000 + 30 * 60_000)
  assert.equal((await unread).fields.text, '8:20am (Mars/Olympus_Mons)')
  // The seed's rules read no message.
  const seed = await create({ executors: [executor('a')] }, { now: clock })
  t.after(() => seed.close())
  assert.equal(seed.report('a', { kind: 'usageLimit', message }).until, 1_800_000_000_000 + 30 * 60_000)
})

test('1,000 concurrent lease() calls on 8 slots are all served, in lease order', async (t) => {
  const roster = await create(document(executor('a', { slots: 4 }), executor('b', { slots: 2 }), executor('c', { slots: 2 })))
  t.after(() => roster.close())
  assert.equal(roster.slots('coder'), 8)
  const order = []
  let holding = 0
  let most = 0
  const requests = Array.from({ length: 1_000 }, (_, i) =>
    roster.lease('coder', { label: `job-${i}` }).then(async (lease) => {
      order.push(i)
      holding += 1
      most = Math.max(most, holding)
      assert.ok(holding <= 8, 'never more leases than slots')
      await null // hold it across a turn
      holding -= 1
      lease.release()
    }),
  )
  assert.equal(roster.snapshot().queue.length, 992)
  await Promise.all(requests)
  assert.equal(order.length, 1_000)
  assert.deepEqual(order, [...order].sort((x, y) => x - y), 'granted in lease order')
  assert.equal(most, 8)
  assert.equal(roster.available('coder'), 8, 'no slot leaked')
  assert.equal(roster.snapshot().queue.length, 0)
})

test('rank and eventTime order the queue; the grant says how many it passed', async (t) => {
  const roster = await create(document(executor('a'), executor('b')))
  t.after(() => roster.close())
  const heldA = await roster.lease('coder')
  const heldB = await roster.lease('coder')
  const got = []
  const track = (name) => (lease) => {
    got.push([name, lease.executorId, lease.passed])
    return lease
  }
  const late = roster.lease('coder', { label: 'unranked' }).then(track('unranked'))
  const second = roster.lease('coder', { rank: 2 }).then(track('rank 2'))
  const first = roster.lease('coder', { rank: 1, eventTime: new Date(0) }).then(track('rank 1'))
  assert.deepEqual(
    roster.snapshot().queue.map((q) => q.rank ?? null),
    [1, 2, null],
  )
  heldA.release()
  heldB.release()
  ;(await first).release()
  ;(await second).release()
  ;(await late).release()
  assert.deepEqual(
    got.map(([name]) => name),
    ['rank 1', 'rank 2', 'unranked'],
  )
  // A request that no free slot can serve does not block those behind it, and the
  // one that goes past it says so.
  const onA = await roster.lease('coder', { prefer: 'a' })
  const onB = await roster.lease('coder', { prefer: 'b' })
  const stuck = roster.lease('coder', { avoid: ['a'] })
  const behind = roster.lease('coder')
  onA.release()
  const passing = await behind
  assert.equal(passing.executorId, 'a')
  assert.equal(passing.passed, 1)
  onB.release()
  assert.equal((await stuck).executorId, 'b')
})

test('AbortSignal: aborting a waiting lease cancels it (rejects with signal.reason), frees nothing it did not hold', async (t) => {
  const roster = await create(document(executor('a')))
  t.after(() => roster.close())
  const held = await roster.lease('coder')
  const controller = new AbortController()
  const waiting = roster.lease('coder', { signal: controller.signal })
  const behind = roster.lease('coder')
  assert.equal(roster.snapshot().queue.length, 2)
  controller.abort()
  const error = await rejection(waiting)
  assert.equal(error.name, 'AbortError')
  assert.equal(error, controller.signal.reason, 'the signal reason, as fetch rejects')
  assert.deepEqual(roster.snapshot().queue.map((q) => q.request).length, 1)
  held.release()
  const next = await behind
  assert.equal(next.executorId, 'a', 'the request behind the aborted one gets the slot')
  next.release()

  const already = await rejection(roster.lease('coder', { signal: AbortSignal.abort('stop') }))
  assert.equal(already, 'stop')
  // Aborting after the grant changes nothing.
  const late = new AbortController()
  const lease = await roster.lease('coder', { signal: late.signal })
  late.abort()
  assert.equal(lease.released, false)
  assert.equal(roster.available('coder'), 0)
  lease.release()
  assert.equal(roster.available('coder'), 1)
})

test('timeoutMs on virtual time: the tick past the deadline rejects TIMEOUT', async (t) => {
  const clock = virtualClock()
  const roster = await create(document(executor('a')), { now: clock })
  t.after(() => roster.close())
  const held = await roster.lease('coder')
  const waiting = roster.lease('coder', { timeoutMs: 30_000, label: 'story-9' })
  assert.equal(roster.snapshot().queue[0].deadline, clock() + 30_000)
  assert.equal(roster.snapshot().wakeAt, clock() + 30_000)
  clock.advance(29_999)
  roster.tick()
  assert.equal(roster.snapshot().queue.length, 1, 'an early tick is harmless')
  clock.advance(1)
  roster.tick()
  const error = await rejection(waiting)
  assert.equal(error.code, 'TIMEOUT')
  assert.equal(error.name, 'TimeoutError')
  assert.match(error.message, /story-9/)
  assert.equal(roster.snapshot().queue.length, 0)
  held.release()
})

test('timeoutMs on the real clock: the driver’s own timer fires it', async (t) => {
  const roster = await create(document(executor('a')))
  t.after(() => roster.close())
  const held = await roster.lease('coder')
  const started = Date.now()
  const error = await rejection(roster.lease('coder', { timeoutMs: 40 }))
  assert.equal(error.code, 'TIMEOUT')
  assert.ok(Date.now() - started >= 39, 'not before its deadline')
  held.release()
})

test('exhausted: no executor outside avoid can ever serve the role', async (t) => {
  const roster = await create(document(executor('a'), executor('b', { roles: ['coder', 'judge'] })))
  t.after(() => roster.close())
  const none = await rejection(roster.lease('planner'))
  assert.equal(none.code, 'EXHAUSTED')
  assert.equal(none.name, 'RosterExhausted')
  assert.equal(none.role, 'planner')
  const avoided = await rejection(roster.lease('judge', { avoid: ['b'] }))
  assert.equal(avoided.code, 'EXHAUSTED')
  assert.ok(avoided.reasons.length >= 1)
  assert.equal(roster.canEverServe('judge', ['b']), false)
  assert.equal(roster.canEverServe('judge'), true)
  // An executor out for the run ends waiters at once.
  const held = await roster.lease('judge')
  const waiting = roster.lease('judge', { avoid: ['a'] })
  roster.report('b', { kind: 'authentication', message: 'not signed in' })
  assert.equal((await rejection(waiting)).code, 'EXHAUSTED')
  held.release()
})

test('dispose symbols: Symbol.dispose / Symbol.asyncDispose release; the roster disposes by closing', async (t) => {
  // Node 20 defines them as the registered nodejs.* symbols; `using` needs tsc here
  // (test/fixture/using.ts runs it, lowered).
  assert.equal(typeof Symbol.dispose, 'symbol')
  assert.equal(typeof Symbol.asyncDispose, 'symbol')
  const roster = await create(document(executor('a')))
  const lease = await roster.lease('coder')
  assert.equal(roster.available('coder'), 0)
  lease[Symbol.dispose]()
  assert.equal(roster.available('coder'), 1)
  lease[Symbol.dispose]()
  assert.equal(roster.available('coder'), 1, 'disposing twice is harmless')
  const other = await roster.lease('coder')
  await other[Symbol.asyncDispose]()
  assert.equal(roster.available('coder'), 1)
  await roster[Symbol.asyncDispose]()
  assert.equal(roster.closed, true)
  t.after(() => roster.close())
})

test('events: onEvent and on("event") see every decision; off stops them', async (t) => {
  const seen = []
  const roster = await create(document(executor('a')), { onEvent: (e) => seen.push(e) })
  t.after(() => roster.close())
  const mine = []
  const listener = (e) => mine.push(e.name)
  roster.on('event', listener)
  const outputs = []
  roster.on('output', (o) => outputs.push(o.type))
  const held = await roster.lease('coder', { label: 'story-1' })
  const waiting = roster.lease('coder', { label: 'story-2' })
  held.release()
  ;(await waiting).release()
  roster.off('event', listener)
  roster.exclude('a', { reason: 'maintenance' })
  // A plain release is a debug event (the scheduler seed's "Worker slot released").
  assert.deepEqual(mine, ['granted', 'waiting', 'released', 'granted', 'released'])
  assert.ok(seen.some((e) => e.name === 'excluded' && e.level === 'warn'))
  const waitingEvent = seen.find((e) => e.name === 'waiting')
  assert.match(waitingEvent.message, /waiting for an executor to take coder for story-2: a busy/)
  assert.equal(typeof waitingEvent.time, 'number')
  assert.ok(outputs.includes('granted') && outputs.includes('waiting'))
  // (A listener that throws: test/defects.test.mjs.)
  roster.resume('a')
  assert.equal(roster.snapshot().executors[0].exclusion, undefined)
})

test('report classifies real errors and returns the exclusion earned', async (t) => {
  const clock = virtualClock()
  const roster = await create(
    document(executor('a'), executor('b', { cooldown: { rateLimit: '1 minute' } }), executor('c'), executor('d')),
    { now: clock },
  )
  t.after(() => roster.close())
  // Usage limit with a reset time: until it.
  const reset = clock() + 2 * 3_600_000
  const usage = roster.report('a', { _tag: 'UsageLimitError', message: 'Claude AI usage limit reached', resetAt: new Date(reset) })
  assert.equal(usage.kind, 'until')
  assert.equal(usage.until, reset)
  // Three rate limits within the window: the rate cooldown.
  const http429 = Object.assign(new Error('429 Too Many Requests'), { status: 429 })
  assert.equal(roster.report('b', http429), undefined)
  assert.equal(roster.report('b', http429), undefined)
  const rate = roster.report('b', http429)
  assert.equal(rate.kind, 'until')
  assert.equal(rate.until, clock() + 60_000)
  // A Retry-After on a rate limit excludes until then, at once; a repeat changes nothing.
  const withRetry = Object.assign(new Error('slow down'), { status: 429, headers: new Headers({ 'retry-after': '120' }) })
  assert.equal(roster.report('c', withRetry).until, clock() + 120_000)
  assert.equal(roster.report('c', withRetry), undefined)
  // Model unavailable: out for the run.
  const model = roster.report('d', new Error("There's an issue with the selected model (claude-9)."))
  assert.equal(model.kind, 'run')
  // A quality failure excludes nothing.
  roster.resume('a')
  assert.equal(roster.report('a', new Error('the tests failed')), undefined)
  assert.equal(roster.snapshot().executors[0].exclusion, undefined)
  // Expiry happens on the tick that passes it.
  clock.advance(60_000)
  const back = nextEvent(roster, 'back', (e) => e.fields.executors.includes('b'))
  roster.tick()
  await back
  assert.equal(roster.snapshot().executors[1].exclusion, undefined)
})

test('exclude (both forms) and resume; a weaker exclusion never replaces a stronger one', async (t) => {
  const clock = virtualClock()
  const roster = await create(document(executor('a'), executor('b')), { now: clock })
  t.after(() => roster.close())
  roster.exclude('a', { reason: 'maintenance', until: new Date(clock() + 60_000) })
  let a = roster.snapshot().executors[0].exclusion
  assert.equal(a.kind, 'manual')
  assert.equal(a.until, clock() + 60_000)
  roster.exclude({ id: 'b', kind: 'run', reason: 'broken' })
  roster.report('b', { kind: 'usageLimit', message: 'limit', resetAt: clock() + 1_000 })
  assert.equal(roster.snapshot().executors[1].exclusion.kind, 'run', 'run lasts the run')
  assert.equal(roster.available('coder'), 0)
  roster.resume('a')
  a = roster.snapshot().executors[0].exclusion
  assert.equal(a, undefined)
  assert.equal(roster.available('coder'), 1)
})

test('reload: added executors serve waiters at once; a bad document changes nothing; plan changes nothing', async (t) => {
  const roster = await create(document(executor('a')))
  t.after(() => roster.close())
  const held = await roster.lease('coder')
  const waiting = roster.lease('coder')
  const next = document(executor('a'), executor('b'))
  const plan = roster.plan(next)
  assert.deepEqual(plan.added, ['b'])
  assert.deepEqual(plan.granted.map((g) => g.executor), ['b'])
  assert.equal(roster.snapshot().queue.length, 1, 'plan changed nothing')
  const before = roster.snapshot()
  assert.equal((await rejection(roster.reload({ executors: [{ id: 'b' }] }))).code, 'INVALID_DOCUMENT')
  assert.deepEqual(roster.snapshot(), before)
  await roster.reload(next)
  const lease = await waiting
  assert.equal(lease.executorId, 'b')
  assert.equal(lease.executor.harness, 'pi')
  // Removing an executor drains it: its lease runs on, it takes no new one.
  await roster.reload(document(executor('b')))
  assert.equal(roster.snapshot().executors.find((e) => e.id === 'a').draining, true)
  held.release()
  assert.equal(roster.snapshot().executors.find((e) => e.id === 'a'), undefined, 'gone with its last lease')
  lease.release()
})

test('reload() without a document re-reads the roster files', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, 'roster.json')
  writeFileSync(path, JSON.stringify(document(executor('a'))))
  const roster = await Roster.create({ rosterPath: path, probe: false })
  t.after(() => roster.close())
  writeFileSync(path, JSON.stringify(document(executor('a'), executor('b', { slots: 3 }))))
  await roster.reload()
  assert.equal(roster.slots('coder'), 4)
  writeFileSync(path, '{ nope')
  assert.equal((await rejection(roster.reload())).code, 'INVALID_DOCUMENT')
  assert.equal(roster.slots('coder'), 4)
})

test('a narrowed roster stays narrowed across reloads, and a reload may drop a named executor', async (t) => {
  const roster = await create(document(executor('a'), executor('b'), executor('c')), { executors: ['a', 'b'] })
  t.after(() => roster.close())
  assert.deepEqual(roster.executors.map((e) => e.id), ['a', 'b'])
  await roster.reload(document(executor('a'), executor('b', { slots: 2 }), executor('c'), executor('d')))
  assert.deepEqual(roster.executors.map((e) => e.id), ['a', 'b'])
  assert.equal(roster.slots('coder'), 3)
  await roster.reload(document(executor('b'), executor('c')))
  assert.deepEqual(roster.executors.map((e) => e.id), ['b'])
})

test('narrowing with an unknown id ignores it, as the seed does, with a warning naming it', async (t) => {
  const events = []
  const roster = await create(document(executor('a'), executor('b')), {
    executors: ['a', 'zz'],
    onEvent: (e) => events.push(e),
  })
  t.after(() => roster.close())
  assert.deepEqual(roster.executors.map((e) => e.id), ['a'])
  const warning = events.find((e) => e.name === 'narrowIgnored')
  assert.equal(warning?.level, 'warn')
  assert.deepEqual(warning.fields.executors, ['zz'])
  assert.match(warning.message, /executor 'zz' is not in the roster; narrowing ignores it/)
})

test('a literal secret in env is a warning event at create and on reload, naming its place, never the value', async (t) => {
  const events = []
  const secret = 'sk-ant-api03-abcdefghijklmnop'
  const roster = await create(document(executor('a', { env: { ANTHROPIC_API_KEY: secret, HOME: '/home/u' } }), executor('b')), {
    onEvent: (e) => events.push(e),
  })
  t.after(() => roster.close())
  const warnings = events.filter((e) => e.name === 'literalSecret')
  assert.equal(warnings.length, 1, JSON.stringify(events))
  assert.equal(warnings[0].level, 'warn')
  assert.equal(warnings[0].fields.path, 'executors[0].env.ANTHROPIC_API_KEY')
  assert.match(warnings[0].message, /literal env\.ANTHROPIC_API_KEY .*\$\{VAR\} reference/)
  assert.ok(!JSON.stringify(events).includes(secret), 'the value never shows')
  // A reference is no warning; the document runs either way.
  await roster.reload(document(executor('a', { env: { ANTHROPIC_API_KEY: '${ANTHROPIC_API_KEY}' } }), executor('b', { env: { GITHUB_TOKEN: 'ghp_0123456789abcdef' } })))
  const after = events.filter((e) => e.name === 'literalSecret').slice(1)
  assert.deepEqual(after.map((e) => e.fields.path), ['executors[1].env.GITHUB_TOKEN'])
  assert.equal(roster.slots('coder'), 2)
})

test('report returns the exclusion it put in force, from the core (the seed shape)', async (t) => {
  const roster = await create(document(executor('a'), executor('b')))
  t.after(() => roster.close())
  assert.deepEqual(roster.report('a', { kind: 'authentication', message: 'expired' }), {
    id: 'a',
    kind: 'run',
    reason: 'not signed in (expired)',
  })
  // A weaker one beside a run exclusion changes nothing: undefined.
  assert.equal(roster.report('a', { kind: 'outage', message: 'ECONNREFUSED' }), undefined)
  const until = roster.report('b', { kind: 'usageLimit', message: 'limit', retryAfterMs: 60_000 })
  assert.equal(until.kind, 'until')
  assert.equal(typeof until.until, 'number')
})

test('queries: snapshot, explain (hypothetical and waiting), occupy', async (t) => {
  const roster = await create(document(executor('a', { slots: 2 }), executor('b', { roles: ['planner'] })))
  t.after(() => roster.close())
  const one = await roster.lease('coder')
  const two = await roster.lease('coder')
  const waiting = roster.lease('coder', { label: 'w' })
  const snapshot = roster.snapshot()
  assert.equal(snapshot.queue[0].label, 'w')
  assert.equal(snapshot.executors[0].leases.length, 2)
  const why = roster.explain('coder')
  assert.equal(why.executors.find((e) => e.id === 'a').ok, false)
  assert.match(why.executors.find((e) => e.id === 'b').reasons.join(), /role/)
  const forWaiter = roster.explain({ role: 'coder', request: snapshot.queue[0].request })
  assert.equal(forWaiter.canEverServe, true)
  // Work already running after a restart takes a slot, even beyond capacity.
  const occupied = roster.occupy('a', { role: 'coder', hold: { pid: 42 } })
  assert.equal(occupied.occupied, true)
  assert.deepEqual(occupied.hold, { pid: 42 })
  assert.equal(roster.snapshot().executors[0].busy, 3)
  one.release()
  two.release()
  occupied.release()
  ;(await waiting).release()
  assert.equal(roster.available('coder'), 2)
})

test('close: waiters reject CLOSED, later calls reject CLOSED, leases release harmlessly', async () => {
  const roster = await create(document(executor('a')))
  const held = await roster.lease('coder')
  const waiting = roster.lease('coder', { timeoutMs: 60_000 })
  const trying = roster.lease('coder')
  await roster.close()
  assert.equal((await rejection(waiting)).code, 'CLOSED')
  assert.equal((await rejection(trying)).code, 'CLOSED')
  assert.equal((await rejection(roster.tryLease('coder'))).code, 'CLOSED')
  held.release()
  await roster.close()
  assert.equal(roster.closed, true)
})

test('the timer never holds a process open, except for a lease with timeoutMs', async () => {
  const { spawnSync } = await import('node:child_process')
  const { dirname } = await import('node:path')
  const { fileURLToPath } = await import('node:url')
  const cwd = dirname(dirname(fileURLToPath(import.meta.url))) // where `rota` resolves
  const run = (code) =>
    spawnSync(process.execPath, ['--input-type=module', '-e', code], { cwd, encoding: 'utf8', timeout: 20_000 })
  const idle = run(`
    import { Roster } from 'rota'
    const r = await Roster.create({ document: { executors: [{ id: 'a', harness: 'pi', roles: ['coder'], health: 'http://127.0.0.1:9/h' }] } })
    r.exclude('a', { reason: 'an hour', until: Date.now() + 3_600_000 })
    if (r.snapshot().wakeAt === undefined) throw new Error('expected a wake-up')
    console.log('left with a timer armed')`)
  assert.equal(idle.status, 0, idle.stderr)
  assert.equal(idle.signal, null, 'exited on its own, without waiting an hour')
  assert.match(idle.stdout, /left with a timer armed/)
  const waiting = run(`
    import { Roster } from 'rota'
    const r = await Roster.create({ document: { executors: [{ id: 'a', harness: 'pi', roles: ['coder'] }] }, probe: false })
    await r.lease('coder')
    r.lease('coder', { timeoutMs: 200 }).catch((error) => console.log('settled', error.code))`)
  assert.equal(waiting.status, 0, waiting.stderr)
  assert.match(waiting.stdout, /settled TIMEOUT/, 'the process stayed until the lease timed out')
})
