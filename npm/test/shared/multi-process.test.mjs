// The shared roster across processes (issue 18, "Tests"): real worker processes
// (harness/worker.mjs) against one roster on PostgreSQL, checked from the log (folded
// with the raw Policy, harness/check-log.mjs) and from the workers' wall-clock records.
//
//   ROTA_PG_URL=$(scripts/postgres.sh start) node --test npm/test/shared/
//   ROTA_TEST_SEED=<n> replays the fault swarm; ROTA_KEEP_LOGS=1 keeps the JSONL files.
//
// Tests that stop the database start a server of their own (scripts/postgres.sh with
// its own ROTA_PG_DIR), so no other test's server is cut. Short TTLs throughout; every
// wait is for a condition, with a deadline.

import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Cluster, PrivatePostgres, monoMs, spread, until } from './harness/cluster.mjs'
import { describe as summary } from './harness/check-log.mjs'

const URL_ = process.env.ROTA_PG_URL
const skip = URL_ ? false : 'ROTA_PG_URL is not set: ROTA_PG_URL=$(scripts/postgres.sh start) node --test npm/test/shared/'

const TTL = 1500
const LEADER_TTL = 900
const SWEEP = 100
// Scheduling slack on a loaded 2-core machine: an append's round trip, a timer's lateness.
const SLACK = 400
const DEFAULTS = {
  callers: 8,
  'hold-ms': 5,
  'ttl-ms': TTL,
  'leader-ttl-ms': LEADER_TTL,
  'sweep-ms': SWEEP,
  'snapshot-every': 1_000_000,
  'checkpoint-ms': 100,
}

// mulberry32: a small seeded generator.
function random(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Every invariant of the log and the records; `open` requests only after every instance closed. */
function assertInvariants(result, { closed = true } = {}) {
  const text = summary(result, result.wall)
  assert.deepEqual(result.overGrants, [], `no executor above its slots in the log\n${text}`)
  assert.deepEqual(result.leaseGrantedTwice, [], `no lease id granted twice\n${text}`)
  assert.deepEqual(result.endedTwice, [], `no request ended twice\n${text}`)
  if (closed) assert.deepEqual(result.open, [], `every request ended\n${text}`)
  assert.deepEqual(result.wall.overlaps, [], `no wall-clock overlap above an executor's slots\n${text}\nthe first: ${JSON.stringify(result.wall.overlaps[0])}\nstops: ${JSON.stringify(result.wall.stops)}`)
  assert.deepEqual(result.wall.notInLog, [], `every grant a worker saw is the log's (lease, request, executor, owner)\n${text}`)
  assert.deepEqual(result.hashMismatches, [], `every checkpoint's stateHash is the log's at its seq\n${text}`)
  assert.ok(result.hashesCompared > 0, 'some checkpoints were compared')
  console.log(`${text}\nhashes compared: ${result.hashesCompared}; grants per owner: ${JSON.stringify(result.grantsByOwner)}`)
}

const leaderOf = (cluster) => cluster.live().find((w) => Cluster.last(w, (r) => r.t === 'checkpoint' || r.t === 'leader')?.isLeader === true)

async function withCluster(options, run) {
  const cluster = new Cluster({ defaults: DEFAULTS, ...options })
  try {
    return await run(cluster)
  } finally {
    await cluster.close()
  }
}

describe('shared roster, several processes', { skip, concurrency: 1 }, () => {
  test('three processes x 8 callers on 12 slots: no over-grant, every request ends once, fair', async () => {
    await withCluster({ url: URL_ }, async (cluster) => {
      const workers = []
      for (const name of ['a', 'b', 'c']) workers.push(await cluster.spawn(name))
      await cluster.untilGranting(workers, monoMs())
      // Fairness over a window in which all three run: from now until each has 150 grants
      // in it (about 2 s on an idle machine).
      const from = monoMs()
      const inWindow = (to = Infinity) => Object.fromEntries(workers.map((w) => [w.name, w.records().filter((r) => r.t === 'grant' && r.ms >= from && r.ms < to).length]))
      await until('150 grants per process', () => Object.values(inWindow()).every((n) => n >= 150), 60_000, 100)
      const to = monoMs()
      const points = await cluster.quiesce()
      assert.equal(new Set(points.map((p) => p.hash)).size, 1, 'every instance at the head has one stateHash')
      await cluster.stopAll()
      const result = await cluster.check()
      assertInvariants(result)
      assert.equal(result.rejected.length, 0, `no entry rejected: ${JSON.stringify(result.rejected.slice(0, 5))}`)
      // One queue (the log) serves all three, so none starves. Each instance's share
      // still follows its CPU share (a process the OS runs less asks again later and
      // holds longer): on a loaded 2-core machine that moved the spread up to 14 %;
      // starvation, what this catches, is far beyond 25 %.
      const grants = inWindow(to)
      assert.ok(spread(grants) <= 25, `grants per instance within 25 % of the mean while all three ran: ${JSON.stringify(grants)}`)
      // The log's grants per owner are the workers' (each instance is one owner here).
      assert.equal(Object.values(result.grantsByOwner).reduce((a, b) => a + b, 0), result.grants)
    })
  })

  test("two processes spend one account's budget: never over it, measured on the log's time", async () => {
    // Account 'acme' allows 6 grants in any 500 ms; two executors of it
    // with 4 slots each, and 8 callers per process, would take far more.
    const BUDGET = { requests: 6, perMs: 500 }
    const document = {
      accounts: { acme: { budget: BUDGET } },
      executors: ['x', 'y'].map((id) => ({ id, harness: 'pi', roles: ['coder'], slots: 4, account: 'acme' })),
    }
    await withCluster({ url: URL_ }, async (cluster) => {
      const workers = []
      for (const name of ['a', 'b']) workers.push(await cluster.spawn(name, { document: JSON.stringify(document) }))
      await cluster.untilGranting(workers, monoMs())
      // Some windows' worth of grants: at 6 per 500 ms, 40 take 3 s or more.
      await until('40 grants', () => workers.reduce((n, w) => n + w.records().filter((r) => r.t === 'grant').length, 0) >= 40, 60_000, 100)
      await cluster.quiesce()
      await cluster.stopAll()
      const result = await cluster.check()
      assertInvariants(result)
      const times = [...result.grantsByLease.values()].map((g) => g.now).sort((p, q) => p - q)
      assert.ok(times.length >= 40, `${times.length} grants`)
      // Any BUDGET.requests + 1 grants in a row span at least the window (the log's ms).
      const over = []
      for (let i = 0; i + BUDGET.requests < times.length; i++) {
        if (times[i + BUDGET.requests] - times[i] < BUDGET.perMs) over.push({ from: times[i], to: times[i + BUDGET.requests] })
      }
      assert.deepEqual(over, [], `never more than ${BUDGET.requests} grants within ${BUDGET.perMs} ms of the log's time`)
      assert.equal(Object.keys(result.grantsByOwner).length, 2, `both processes were granted: ${JSON.stringify(result.grantsByOwner)}`)
      // Tight: the budget was the limit (the waits ended at the window's room).
      const spans = []
      for (let i = 0; i + BUDGET.requests < times.length; i++) spans.push(times[i + BUDGET.requests] - times[i])
      assert.ok(Math.min(...spans) < BUDGET.perMs + 400, `the budget was the binding limit: ${Math.min(...spans)} ms`)
    })
  })

  test('kill -9 of a follower, then of the leader: expired within TTL + one sweep, a new epoch, the old epoch refused', async () => {
    await withCluster({ url: URL_ }, async (cluster) => {
      for (const name of ['a', 'b', 'c']) await cluster.spawn(name)
      await cluster.untilGranting()
      const leader = await until('a leader', () => leaderOf(cluster), 10_000)
      const store = await cluster.admin()

      // A follower.
      const follower = cluster.live().find((w) => w !== leader)
      const followerId = Cluster.instance(follower)
      cluster.signal(follower, 'SIGKILL')
      const killedAt = Date.now()
      await follower.exit
      const expiry = await until(
        `the expiry of ${followerId}`,
        async () => (await cluster.check()).expiries.find((e) => e.owner === followerId),
        TTL + SWEEP + 5_000,
        50,
      )
      assert.ok(expiry.now - killedAt <= TTL + SWEEP + SLACK, `the follower expired ${expiry.now - killedAt} ms after the kill (TTL ${TTL} + sweep ${SWEEP} + slack ${SLACK})`)
      assert.ok(expiry.epoch !== null, 'an expiry is a leader-only entry')
      console.log(`follower ${followerId} expired ${expiry.now - killedAt} ms after kill -9`)
      const since = monoMs()
      await cluster.untilGranting(cluster.live(), since)

      // The leader.
      const leaderId = Cluster.instance(leader)
      const before = await cluster.check()
      const oldEpoch = before.epochs.at(-1)?.epoch
      assert.ok(oldEpoch !== undefined, 'the leader appended with an epoch')
      cluster.signal(leader, 'SIGKILL')
      const leaderKilledAt = Date.now()
      await leader.exit
      const after = await until(
        `the expiry of the old leader ${leaderId}`,
        async () => {
          const r = await cluster.check()
          return r.expiries.some((e) => e.owner === leaderId) ? r : null
        },
        TTL + SWEEP + 5_000,
        50,
      )
      const leaderExpiry = after.expiries.find((e) => e.owner === leaderId)
      assert.ok(leaderExpiry.now - leaderKilledAt <= TTL + SWEEP + SLACK, `the leader expired ${leaderExpiry.now - leaderKilledAt} ms after the kill`)
      console.log(`leader ${leaderId} expired ${leaderExpiry.now - leaderKilledAt} ms after kill -9; epoch ${oldEpoch} -> ${leaderExpiry.epoch}`)
      assert.ok(leaderExpiry.epoch > oldEpoch, `a new epoch (${leaderExpiry.epoch} > ${oldEpoch})`)
      await assert.rejects(store.append(['{"type":"tick"}'], { instance: leaderId, epoch: oldEpoch }), { code: 'STALE_EPOCH' }, "the old leader's append is refused")

      await cluster.untilGranting(cluster.live(), monoMs())
      await cluster.quiesce()
      await cluster.stopAll()
      assertInvariants(await cluster.check())
    })
  })

  test('SIGSTOP longer than the TTL: the instance fences, its leases go to others, it rejoins after SIGCONT', async () => {
    await withCluster({ url: URL_ }, async (cluster) => {
      for (const name of ['a', 'b', 'c']) await cluster.spawn(name)
      await cluster.untilGranting()
      // A follower, so the test is about fencing rather than a takeover (the kill test has that).
      const leader = await until('a leader', () => leaderOf(cluster), 10_000)
      const paused = cluster.live().find((w) => w !== leader)
      const pausedId = Cluster.instance(paused)
      cluster.signal(paused, 'SIGSTOP')
      const stoppedAt = Date.now()
      const expired = await until(
        `the expiry of the stopped ${pausedId}`,
        async () => (await cluster.check()).expiries.find((e) => e.owner === pausedId),
        TTL + SWEEP + 5_000,
        50,
      )
      assert.ok(expired.now - stoppedAt <= TTL + SWEEP + SLACK, `expired ${expired.now - stoppedAt} ms after SIGSTOP`)
      // Its leases went to others: the others keep granting while it is stopped.
      const others = cluster.live().filter((w) => w !== paused)
      await cluster.untilGranting(others, monoMs())
      const result = await cluster.check()
      const releasedByExpiry = [...result.leaseEnds.entries()].filter(([, e]) => e.by === 'expireOwner' && e.seq === expired.seq).map(([lease]) => lease)
      assert.deepEqual(releasedByExpiry.sort(), [...expired.released].sort(), 'the expiry released what the stopped instance held')
      assert.ok(result.held.every((l) => l.owner !== pausedId), 'the stopped instance holds nothing in the log')

      const resumed = monoMs()
      process.kill(paused.pid, 'SIGCONT')
      // It notices (fenced), then rejoins as a new incarnation and grants again.
      await until('the resumed instance to fence', () => paused.records().some((r) => r.ms > resumed && ((r.t === 'fenced' && r.fenced) || r.code === 'FENCED' || (r.t === 'checkpoint' && r.fenced))), 10_000)
      const rejoined = await until(
        'the resumed instance to grant as a new incarnation',
        () => paused.records().find((r) => r.t === 'grant' && r.ms > resumed && r.instance !== pausedId),
        15_000,
      )
      assert.notEqual(rejoined.instance, pausedId)
      assert.equal(rejoined.instance.split(':')[0], pausedId.split(':')[0], 'the same name, a new incarnation')

      await cluster.quiesce()
      await cluster.stopAll()
      assertInvariants(await cluster.check())
    })
  })

  test('a late joiner starts from a snapshot and reaches the same stateHash', async () => {
    await withCluster({ url: URL_, defaults: { ...DEFAULTS, 'snapshot-every': 200 } }, async (cluster) => {
      for (const name of ['a', 'b']) await cluster.spawn(name)
      await cluster.untilGranting()
      const store = await cluster.admin()
      await until('a compaction', async () => (await store.head()).compactedThrough > 0, 30_000, 100)
      const { compactedThrough } = await store.head()
      const late = await cluster.spawn('late')
      const first = await until('the late joiner to checkpoint', () => Cluster.last(late, (r) => r.t === 'checkpoint'), 10_000)
      assert.ok(first.foldedSeq > compactedThrough, 'it did not fold from the genesis (the log was compacted)')
      await cluster.untilGranting([late], monoMs())
      const points = await cluster.quiesce()
      assert.equal(new Set(points.map((p) => p.hash)).size, 1, `one stateHash at seq ${points[0].foldedSeq}: ${JSON.stringify(points.map((p) => p.hash))}`)
      const result = await cluster.check() // from the latest snapshot: the log is compacted
      assert.ok(result.fromSnapshot !== null)
      // At the quiesced seq: the leader may append (a tick) between the quiesce and the check.
      const seq = points[0].foldedSeq
      assert.ok(result.fromSnapshot <= seq, `the checker's snapshot (seq ${result.fromSnapshot}) is not past the quiesced seq ${seq}`)
      assert.equal(result.hashes.get(seq), points[0].hash, `the checker's fold from the snapshot at seq ${result.fromSnapshot} agrees at seq ${seq} (the log's last: ${result.lastSeq})`)
      await cluster.stopAll()
      const closed = await cluster.check()
      assertInvariants(closed)
    })
  })

  test('the database stopped and started again: everyone fences, nobody is expired afterwards', async () => {
    const pg = new PrivatePostgres()
    const url = pg.start()
    try {
      await withCluster({ url }, async (cluster) => {
        const workers = []
        for (const name of ['a', 'b', 'c']) workers.push(await cluster.spawn(name))
        await cluster.untilGranting()
        const ids = workers.map((w) => Cluster.instance(w))
        const down = monoMs()
        pg.down()
        await until('every instance to fence', () => workers.every((w) => w.records().some((r) => r.ms > down && ((r.t === 'fenced' && r.fenced) || r.code === 'FENCED'))), TTL + 5_000)
        // Down for longer than a TTL: every heartbeat is stale by the time it is back.
        await until('a TTL of outage', () => monoMs() - down > TTL + 300, TTL + 1_000)
        pg.up()
        const up = monoMs()
        await cluster.untilGranting(workers, up, 20_000)
        // No instance expired: watch for a full TTL and a few sweeps after everyone is back.
        await until('a TTL after the restart', () => monoMs() - up > TTL + 4 * SWEEP, TTL + 2_000)
        const result = await cluster.check()
        assert.deepEqual(result.expiries, [], `nobody expired after the restart: ${JSON.stringify(result.expiries)}`)
        assert.deepEqual(workers.map((w) => Cluster.instance(w)), ids, 'every instance kept its id (an outage expires nobody)')
        await cluster.quiesce()
        await cluster.stopAll()
        assertInvariants(await cluster.check())
      })
    } finally {
      pg.stop()
    }
  })

  test('a seeded fault swarm: kills, pauses and outages, every invariant holding', async () => {
    const seed = Number(process.env.ROTA_TEST_SEED ?? Math.floor(Math.random() * 2 ** 31))
    console.log(`fault swarm: ROTA_TEST_SEED=${seed}`)
    const rnd = random(seed)
    const pick = (list) => list[Math.floor(rnd() * list.length)]
    const pg = new PrivatePostgres()
    const url = pg.start()
    const faults = []
    try {
      await withCluster({ url }, async (cluster) => {
        let spawned = 0
        for (const name of ['a', 'b', 'c']) await cluster.spawn(name, { 'hold-ms': 1 + Math.floor(rnd() * 10) })
        spawned = 3
        await cluster.untilGranting()
        for (let i = 0; i < 7; i++) {
          const kind = pick(['kill', 'kill', 'pause', 'pause', 'outage'])
          const live = cluster.live()
          if (kind === 'kill') {
            const victim = pick(live)
            faults.push(`kill ${victim.name}`)
            cluster.signal(victim, 'SIGKILL')
            await victim.exit
            await cluster.spawn(`n${++spawned}`, { 'hold-ms': 1 + Math.floor(rnd() * 10) })
          } else if (kind === 'pause') {
            const victim = pick(live)
            const ms = Math.floor((0.3 + rnd() * 1.5) * TTL)
            faults.push(`pause ${victim.name} ${ms} ms`)
            cluster.signal(victim, 'SIGSTOP')
            await sleep(ms) // the fault's own length, not a wait for a condition
            process.kill(victim.pid, 'SIGCONT')
          } else {
            const ms = Math.floor((0.2 + rnd() * 1.3) * TTL)
            faults.push(`outage ${ms} ms`)
            pg.down()
            await sleep(ms)
            pg.up()
          }
          // Between faults: the cluster grants again everywhere before the next one.
          await cluster.untilGranting(cluster.live(), monoMs(), 30_000)
        }
        await cluster.quiesce(30_000)
        await cluster.stopAll()
        const result = await cluster.check()
        assertInvariants(result)
        console.log(`fault swarm (seed ${seed}): ${faults.join(', ')}\n${summary(result, result.wall)}`)
      })
    } catch (error) {
      error.message = `fault swarm, ROTA_TEST_SEED=${seed} (${faults.join(', ')}): ${error.message}`
      throw error
    } finally {
      pg.stop()
    }
  })
})
