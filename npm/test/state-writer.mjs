// A roster process writing exclusions into a shared state file, for
// state-file.test.mjs (two processes into one file, kill -9 mid-write, EACCES).
//
//   node state-writer.mjs STATE_PATH PREFIX COUNT [once|loop]
//
// `once`: excludes PREFIX-0 .. PREFIX-(COUNT-1), one write each, waits until every
// write has landed (retrying through failures), closes, prints {"done":true}.
// `loop`: excludes and resumes its executors for ever (until killed).
// Prints every stateFile* event as a JSON line. ROTA_WRITER_GATE=1: waits for a line on
// stdin before writing (so that two writers overlap).

import { Roster } from 'rota'

const [statePath, prefix, count, mode = 'once'] = process.argv.slice(2)
const ids = Array.from({ length: Number(count) }, (_, i) => `${prefix}-${i}`)
const document = { executors: ids.map((id) => ({ id, harness: 'pi', roles: ['coder'] })) }
let failing = false
let recovered
const roster = await Roster.create({
  document,
  statePath,
  probe: false,
  stateRetry: { firstMs: 20, maxMs: 200 },
  onEvent: (e) => {
    if (!e.name.startsWith('stateFile')) return
    console.log(JSON.stringify({ event: e.name, message: e.message }))
    if (e.name === 'stateFileRecovered') {
      failing = false
      recovered?.()
    } else if (e.fields.retryInMs > 0) {
      // A write failed and will be retried (not the load's event at start).
      failing = true
    }
  },
})
console.log(JSON.stringify({ started: true }))
// Both writers of a trial start writing together: on a line on stdin (when piped).
if (!process.stdin.isTTY && process.env.ROTA_WRITER_GATE === '1') {
  await new Promise((resolve) => process.stdin.once('data', resolve))
  process.stdin.pause()
}

if (mode === 'loop') {
  for (let i = 0; ; i += 1) {
    const id = ids[i % ids.length]
    roster.exclude(id, { reason: `round ${i}` })
    await roster.idle()
    if (i % 3 === 0) {
      roster.resume(id)
      await roster.idle()
    }
  }
}

for (const id of ids) {
  roster.exclude(id, { reason: `${id} paused by ${process.pid}` })
  await roster.idle()
}
while (failing) await new Promise((resolve) => (recovered = resolve))
await roster.close()
console.log(JSON.stringify({ done: true }))
