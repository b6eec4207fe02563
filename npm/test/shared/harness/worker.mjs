#!/usr/bin/env node
// One instance of a shared roster as its own process, for the multi-process tests, the
// demo and the benchmark: N callers lease a role in a loop and hold each lease, and
// every grant and release goes to a JSONL file with both clocks, so a checker can look
// for wall-clock overlaps across processes (process.hrtime is CLOCK_MONOTONIC: one
// clock for every process on the machine).
//
//   node worker.mjs --url postgres://... --roster NAME --log FILE [options]
//
//   --name NAME            instance name (default <hostname>-<pid>)
//   --callers N            concurrent callers (default 8)
//   --hold-ms MS           how long each lease is held (default 5; 0 = one setImmediate)
//   --duration-ms MS       stop leasing after MS (default: until SIGTERM)
//   --count N              stop leasing after N grants in all
//   --role ROLE            the role leased (default coder)
//   --try                  tryLease instead of lease (a miss is retried after a setImmediate)
//   --timeout-ms MS        timeoutMs of each lease
//   --tenant NAME          the tenant of every lease (fairness: "tenants")
//   --affinity KEY         the affinity key of every lease
//   --rate-limited         reports each lease's executor rate-limited (an HTTP 429,
//                          Retry-After 600) before releasing it
//   --document FILE|JSON   the roster document (default: 4 executors x 3 coder slots)
//   --ttl-ms, --leader-ttl-ms, --sweep-ms, --snapshot-every, --poll-ms
//                          the shared roster's options (sql/PROTOCOL.md, "Defaults")
//   --checkpoint-ms MS     how often {foldedSeq, hash} is logged (default 250)
//
// Signals: SIGTERM (or SIGINT) stops leasing, closes the roster and exits 0; SIGUSR1
// stops leasing and keeps the roster open (checkpoints go on: the tests wait for every
// instance to reach the same foldedSeq and compare hashes); SIGUSR2 logs a checkpoint.
//
// Records (one JSON object a line; `wall` is Date.now(), `mono` hrtime in ns as a
// string, `ms` the same in ms as a number):
//   start      {pid, instance}
//   grant      {caller, n, instance, request, lease, executor, waitMs, settledMs (when the
//              fold settled it, on the `ms` clock)}
//   release    {caller, instance, request, lease, executor, heldMs, fenced}
//   error      {caller, code, message}
//   fenced     {fenced: true|false, instance}     (transitions, polled every 10 ms)
//   leader     {isLeader, instance}               (transitions)
//   checkpoint {foldedSeq, hash, instance, isLeader, fenced}
//   idle {grants}; done {grants, cpuMs (the process's user + system CPU), foldedSeq}

import { openSync, readFileSync, writeSync } from 'node:fs'
import { hostname } from 'node:os'
import { parseArgs } from 'node:util'
import { setTimeout as sleep } from 'node:timers/promises'
import { Roster } from '../../../src/node.js'

export const DEFAULT_DOCUMENT = {
  executors: [0, 1, 2, 3].map((i) => ({ id: `e${i}`, harness: 'bench', roles: ['coder'], slots: 3 })),
}

const { values: args } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.ROTA_PG_URL },
    roster: { type: 'string' },
    log: { type: 'string' },
    name: { type: 'string' },
    callers: { type: 'string', default: '8' },
    'hold-ms': { type: 'string', default: '5' },
    'duration-ms': { type: 'string' },
    count: { type: 'string' },
    role: { type: 'string', default: 'coder' },
    try: { type: 'boolean', default: false },
    'timeout-ms': { type: 'string' },
    tenant: { type: 'string' },
    affinity: { type: 'string' },
    'rate-limited': { type: 'boolean', default: false },
    document: { type: 'string' },
    'ttl-ms': { type: 'string' },
    'leader-ttl-ms': { type: 'string' },
    'sweep-ms': { type: 'string' },
    'snapshot-every': { type: 'string' },
    'poll-ms': { type: 'string' },
    'checkpoint-ms': { type: 'string', default: '250' },
  },
})

const num = (name) => (args[name] === undefined ? undefined : Number(args[name]))
if (!args.url || !args.roster || !args.log) {
  console.error('worker.mjs: --url (or ROTA_PG_URL), --roster and --log are required')
  process.exit(2)
}

const fd = openSync(args.log, 'a')
const t0 = process.hrtime.bigint()
// Written at once (no buffer): a kill -9 loses nothing already logged.
function log(record) {
  const mono = process.hrtime.bigint()
  writeSync(fd, `${JSON.stringify({ ...record, pid: process.pid, wall: Date.now(), mono: String(mono), ms: Number(mono) / 1e6 })}\n`)
}

function readDocument(text) {
  if (text === undefined) return DEFAULT_DOCUMENT
  return JSON.parse(text.trimStart().startsWith('{') ? text : readFileSync(text, 'utf8'))
}

const shared = { connectionString: args.url, roster: args.roster }
if (args.name !== undefined) shared.name = args.name
for (const [flag, key] of [
  ['ttl-ms', 'ttlMs'],
  ['leader-ttl-ms', 'leaderTtlMs'],
  ['sweep-ms', 'sweepMs'],
  ['snapshot-every', 'snapshotEvery'],
  ['poll-ms', 'pollMs'],
]) {
  if (args[flag] !== undefined) shared[key] = Number(args[flag])
}

const callers = num('callers')
const holdMs = num('hold-ms')
const count = num('count')
const durationMs = num('duration-ms')
const timeoutMs = num('timeout-ms')
const role = args.role

// A start can fail for reasons the tests cause (the database down, the machine so busy
// that the first heartbeat is late): logged, and tried again for up to 20 s.
let roster
for (let attempt = 1, giveUpAt = Date.now() + 20_000; ; attempt++) {
  try {
    roster = await Roster.create({ shared, document: readDocument(args.document), probe: false })
    break
  } catch (error) {
    log({ t: 'error', caller: -1, code: error?.code, message: `Roster.create (attempt ${attempt}): ${error?.message ?? error}` })
    if (Date.now() > giveUpAt) {
      console.error(`worker.mjs: Roster.create failed: ${error?.stack ?? error}`)
      process.exit(1)
    }
    await sleep(200)
  }
}
log({ t: 'start', instance: roster.instance })

// When each grant was settled: its output is dispatched in the fold, where the lease()
// promise resolves. A pause (SIGSTOP) can fall between that and the caller's
// continuation, which then logs the grant after the pause: the lease was in use from
// the settle, and the checker cuts it at the stop.
const settledAt = new Map()
roster.on('output', (output) => {
  if (output.type === 'granted' && output.owner === roster.instance) settledAt.set(output.request, Number(process.hrtime.bigint()) / 1e6)
})

let leasing = true
let grants = 0
const endAt = durationMs === undefined ? Infinity : Date.now() + durationMs

const checkpoint = () => {
  try {
    log({ t: 'checkpoint', foldedSeq: roster.foldedSeq, hash: roster.stateHash(), instance: roster.instance, isLeader: roster.isLeader, fenced: roster.fenced })
  } catch (error) {
    log({ t: 'error', caller: -1, code: error?.code, message: `checkpoint: ${error?.message ?? error}` })
  }
}

// Transitions of fenced/isLeader, and checkpoints, on timers of their own.
let wasFenced = roster.fenced
let wasLeader = roster.isLeader
const watch = setInterval(() => {
  if (roster.fenced !== wasFenced) {
    wasFenced = roster.fenced
    log({ t: 'fenced', fenced: wasFenced, instance: roster.instance })
  }
  if (roster.isLeader !== wasLeader) {
    wasLeader = roster.isLeader
    log({ t: 'leader', isLeader: wasLeader, instance: roster.instance })
  }
}, 10)
const checkpoints = setInterval(checkpoint, num('checkpoint-ms'))

const hold = () => (holdMs > 0 ? sleep(holdMs) : new Promise((resolve) => setImmediate(resolve)))

async function caller(index) {
  let n = 0
  while (leasing && Date.now() < endAt && (count === undefined || grants < count)) {
    const asked = process.hrtime.bigint()
    let lease
    try {
      const options = timeoutMs === undefined ? {} : { timeoutMs }
      if (args.tenant !== undefined) options.tenant = args.tenant
      if (args.affinity !== undefined) options.affinity = args.affinity
      lease = args.try ? await roster.tryLease(role, options) : await roster.lease(role, options)
    } catch (error) {
      log({ t: 'error', caller: index, code: error?.code, message: String(error?.message ?? error) })
      // FENCED, CLOSED, a timeout: wait a little rather than spin, then ask again.
      await sleep(20)
      continue
    }
    if (lease === undefined) {
      await new Promise((resolve) => setImmediate(resolve))
      continue
    }
    const got = process.hrtime.bigint()
    grants++
    n++
    const instance = roster.instance
    const settledMs = settledAt.get(lease.request)
    settledAt.delete(lease.request)
    log({ t: 'grant', caller: index, n, instance, request: lease.request, lease: lease.id, executor: lease.executorId, waitMs: Number(got - asked) / 1e6, settledMs })
    await hold()
    if (args['rate-limited']) {
      const http429 = Object.assign(new Error('429 Too Many Requests'), { status: 429, headers: { 'retry-after': '600' } })
      try {
        await roster.report(lease.executorId, http429)
      } catch (error) {
        log({ t: 'error', caller: index, code: error?.code, message: `report: ${error?.message ?? error}` })
      }
    }
    log({ t: 'release', caller: index, instance, request: lease.request, lease: lease.id, executor: lease.executorId, heldMs: Number(process.hrtime.bigint() - got) / 1e6, fenced: roster.fenced })
    lease.release()
  }
}

let loops = Promise.all(Array.from({ length: callers }, (_, i) => caller(i)))

// Callers finish the lease they hold; one still waiting is given up on after a while
// (close cancels it).
async function stopLeasing(ms = 3000) {
  leasing = false
  let timer
  await Promise.race([loops, new Promise((resolve) => (timer = setTimeout(resolve, ms)))])
  clearTimeout(timer)
}

let closing = false
async function shutdown(signal) {
  if (closing) return
  closing = true
  await stopLeasing()
  checkpoint()
  try {
    let timer
    const late = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('close took over 10 s')), 10_000)))
    await Promise.race([roster.close(), late])
    clearTimeout(timer)
  } catch (error) {
    log({ t: 'error', caller: -1, code: error?.code, message: `close: ${error?.message ?? error}` })
  }
  clearInterval(watch)
  clearInterval(checkpoints)
  const cpu = process.cpuUsage()
  log({ t: 'done', grants, signal, cpuMs: (cpu.user + cpu.system) / 1000, foldedSeq: roster.foldedSeq })
  process.exit(0)
}

process.on('SIGTERM', () => shutdown('SIGTERM'))
process.on('SIGINT', () => shutdown('SIGINT'))
process.on('SIGUSR1', async () => {
  await stopLeasing()
  checkpoint()
  log({ t: 'idle', grants })
})
process.on('SIGUSR2', checkpoint)

await loops
if (leasing) {
  // The duration or count is reached: close and exit on our own.
  await shutdown('end')
}
