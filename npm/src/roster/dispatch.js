// Who acts on each of the core's outputs (sql/PROTOCOL.md, "Who acts on an output"),
// one path for both logs: caller outputs and machines concern their `owner` (the
// instance that issued the request; with none named, the one that appended the entry),
// an owner's expiry is acted on by the instance that appended it, probes by the leader,
// a state file's writes by whoever has one. A log in memory names no owner and is its
// own leader: there this instance acts on every output.

import { closed } from '../errors.js'
import { exhaustedError, timeoutError } from './requests.js'

/** Where an entry of a log in memory was folded: appended by this instance, no seq. */
export const HERE = Object.freeze({ seq: undefined, appender: undefined, expire: undefined })

/**
 * One entry per output type of the protocol but `granted` (the output of every lease:
 * `dispatch` settles it first, its owner's). An output of a type not here is said as a
 * warn `unknownOutput` event, never dropped without a word.
 */
/** A caller output: its request settles as `how` says, when this instance owns it. */
const caller = (how) => (d, output) => {
  const pending = output.owner === d.me ? d.ledger.settle(output.request) : undefined
  if (pending !== undefined) how(pending, output, d.roster.policy())
}

const HANDLERS = new Map([
  ['exhausted', caller((pending, output, policy) => pending.reject(exhaustedError(policy, output, pending)))],
  ['timedOut', caller((pending, output, policy) => pending.reject(timeoutError(policy, output.request, pending, undefined, output.reasons)))],
  ['unavailable', caller((pending) => pending.resolve(undefined))],
  ['cancelled', caller((pending) => pending.reject(pending.abortReason ?? closed('the roster closed before a lease was granted')))],
  ['waiting', (d, output) => output.owner === d.me && d.ledger.waiting(output)],
  // The leader's (a log in memory is always its own leader).
  ['probe', (d, { executor, url }) => d.roster.log().probe(executor, url)],
  ['createMachine', (d, output) => (output.owner ?? d.at.appender) === d.me && d.machines.create(output)],
  [
    'deleteMachine',
    (d, output) => {
      // An expiry's outputs name the gone owner: the instance that appended it acts.
      const at = d.at
      if ((at.expire !== undefined ? at.appender : (output.owner ?? at.appender)) === d.me) d.machines.delete(output)
    },
  ],
  // An output with no owner: the instance that appended the entry (a log whose genesis
  // predates the fixed `preflightReloads: false` may still ask for preflights).
  ['preflight', (d, output) => d.at.appender === d.me && d.preflights.run(output)],
  ['startFailed', (d, output) => d.at.appender === d.me && d.preflights.failed(output)],
  // A shared log is its own persistence: only a state file writes these.
  ['persist', (d, { ids, state }) => d.state?.persist({ ids, state })],
  ['event', (d, output) => d.announce.core(output, d.now, d.at.seq)],
])

export class Dispatcher {
  /** This instance's id as the owner of its requests (undefined for a log in memory: outputs name none). */
  me = undefined
  /** Where the entry being folded came from ({ seq, appender, expire }), and its time. */
  at = HERE
  now = 0

  /** `roster`: its side (Roster.js `#side`): granted(output, now), policy(), log(). */
  constructor({ roster, ledger, announce, machines, preflights, state }) {
    this.roster = roster
    this.granted = roster.granted
    this.ledger = ledger
    this.announce = announce
    this.machines = machines
    this.preflights = preflights
    this.state = state
  }

  /** The outputs of an entry folded at `now`, appended as `at` says (in memory: here). */
  fold(outputs, now, at = HERE) {
    this.now = now
    this.at = at
    for (const output of outputs) this.dispatch(output)
    this.at = HERE
  }

  /** One output of the entry being folded. */
  dispatch(output) {
    if (this.announce.listened) this.announce.output(output, this.at.seq)
    // A grant, the output of every lease, without the table's lookup and call.
    if (output.type === 'granted') {
      if (output.owner === this.me) this.granted(output, this.now)
      return undefined
    }
    const handle = HANDLERS.get(output.type)
    if (handle !== undefined) return handle(this, output)
    return this.announce.emit('warn', 'unknownOutput', `roster: the core gave an output of type ${JSON.stringify(output.type)}, which this driver does not know`, {
      type: output.type,
    })
  }
}
