// Folds a shared roster's log with the npm package's raw Policy, exactly as
// sql/PROTOCOL.md says, and prints `<seq> <stateHash>` after every entry: the Node
// half of the cross-host test in ../shared_roster.rs.
//
//   node fold.mjs LOG.jsonl    (one {"seq","now","entry"} per line, from seq 1)
import { readFileSync } from 'node:fs'
import { Policy } from '../../../npm/src/node.js'

const lines = readFileSync(process.argv[2], 'utf8').split('\n').filter((l) => l !== '')
let policy
const isGenesis = (entry) => {
  try {
    return JSON.parse(entry)?.type === 'genesis'
  } catch {
    return false
  }
}
for (const line of lines) {
  const { seq, now, entry } = JSON.parse(line)
  if (seq === 1) {
    const genesis = JSON.parse(entry)
    if (genesis.type !== 'genesis' || genesis.log !== 1) throw new Error(`seq 1 is not a log-1 genesis: ${entry}`)
    policy = new Policy(genesis.document, genesis.options)
  } else if (!isGenesis(entry)) {
    // The entry's bytes after its first, behind the log's `now`; a rejection changes nothing.
    policy.handleJson(`{"now":${now},` + entry.slice(1))
  }
  process.stdout.write(`${seq} ${policy.stateHash()}\n`)
}
