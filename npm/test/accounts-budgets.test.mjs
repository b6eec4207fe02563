// Accounts and budgets through the Roster API as a user
// would: a 429 on one of two executors of an account excludes both; a budget makes a
// lease wait until its window has room, then the tick at that instant grants it.

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Roster, check } from 'rota'
import { executor, nextOutput, virtualClock } from './helpers.mjs'

const create = (doc, extra = {}) => Roster.create({ document: doc, probe: false, ...extra })

test('a 429 on one of two executors of an account excludes both, with one end; another account stays', async (t) => {
  const clock = virtualClock()
  const roster = await create(
    {
      executors: [
        executor('claude-a', { account: 'claude-max' }),
        executor('claude-b', { account: 'claude-max' }),
        executor('other'),
      ],
    },
    { now: clock, options: { rateLimitsToExclude: 1 } },
  )
  t.after(() => roster.close())
  const lease = await roster.lease('coder', { prefer: 'claude-a' })
  assert.equal(lease.executorId, 'claude-a')
  const excluded = []
  roster.on('event', (e) => e.name === 'excluded' && excluded.push(e.fields))
  const http429 = Object.assign(new Error('429 Too Many Requests'), { status: 429 })
  const exclusion = roster.report(lease.executorId, http429)
  assert.equal(exclusion.kind, 'until')
  assert.equal(exclusion.until, clock() + 10 * 60_000)
  assert.match(exclusion.reason, /\(account 'claude-max'\)$/)
  assert.deepEqual(
    excluded.map((f) => [f.executor, f.until]),
    [
      ['claude-a', exclusion.until],
      ['claude-b', exclusion.until],
    ],
  )
  const byId = Object.fromEntries(roster.snapshot().executors.map((x) => [x.id, x]))
  assert.equal(byId['claude-b'].exclusion.until, exclusion.until)
  assert.equal(byId.other.exclusion, undefined)
  const explained = roster.explain('coder')
  assert.match(explained.executors[1].reasons[0], /account 'claude-max'/)
  lease.release()
  // The next lease goes to the executor outside the account.
  const next = await roster.lease('coder')
  assert.equal(next.executorId, 'other')
  next.release()
})

test('at the threshold (three within ten minutes) the account window counts reports on both', async (t) => {
  const clock = virtualClock()
  const roster = await create({ executors: [executor('a', { account: 'k' }), executor('b', { account: 'k' })] }, { now: clock })
  t.after(() => roster.close())
  const http429 = Object.assign(new Error('429 Too Many Requests'), { status: 429 })
  assert.equal(roster.report('a', http429), undefined)
  clock.advance(1_000)
  assert.equal(roster.report('b', http429), undefined)
  clock.advance(1_000)
  const third = roster.report('a', http429)
  assert.equal(third.reason, "3 rate limits within 10m (account 'k')")
  assert.equal(roster.snapshot().executors[1].exclusion.until, third.until)
})

test('a budget: the lease beyond it waits, tryLease is unavailable, explain says when, the tick at room grants', async (t) => {
  const clock = virtualClock()
  const roster = await create(
    { executors: [executor('a', { slots: 3, budget: { requests: 2, per: '1 minute' } })] },
    { now: clock },
  )
  t.after(() => roster.close())
  const first = await roster.lease('coder')
  const second = await roster.lease('coder')
  assert.equal(await roster.tryLease('coder'), undefined)
  const waited = nextOutput(roster, 'waiting')
  const waiting = roster.lease('coder', { id: 'third' })
  assert.match((await waited).report, /^a spent its budget: room at /)
  const room = new Date(clock() + 60_000).toISOString()
  assert.deepEqual(roster.explain({ role: 'coder', request: 'third' }).executors[0].reasons, [`budget: room at ${room}`])
  first.release() // a release refunds nothing
  assert.equal(roster.available('coder'), 0)
  clock.advance(60_000)
  roster.tick()
  const third = await waiting
  assert.equal(third.executorId, 'a')
  second.release()
  third.release()
})

test('check warns of an account listed under accounts that no executor names', () => {
  const { violations, warnings } = check({
    accounts: { acme: { budget: { requestsPerMinute: 50 } }, spare: {} },
    executors: [executor('a', { account: 'acme' })],
  })
  assert.deepEqual(violations, [])
  assert.deepEqual(warnings, [
    { path: 'accounts.spare', message: "account 'spare' is listed, and no executor names it (`account`)", event: 'unusedAccount' },
  ])
})
