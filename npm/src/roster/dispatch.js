// The one output dispatcher, for both logs. Who acts on an output of a shared log's
// entry is the core's rule (sql/PROTOCOL.md, "Who acts on an output"; `Policy.logJson`
// `actors`, one per output: `{ instance }`, `leader`, `everyone` or `nobody`): the
// fold passes them in `at.actors`, and this instance acts on an output only when the
// core names it. A log in memory has one instance, its own leader: it acts on every
// output (`at.actors` undefined).

import { closed } from '../errors.js'
import { exhaustedError, timeoutError } from './requests.js'

/** Where an entry of a log in memory was folded: appended by this instance, no seq, no actors. */
export const HERE = Object.freeze({ seq: undefined, appender: undefined, actors: undefined })

/** A caller output: its request settles as `how` says. */
const caller = (how) => (d, output) => {
  const pending = d.ledger.settle(output.request)
  if (pending !== undefined) how(pending, output, d.roster.policy())
}

/**
 * One entry per output type of the protocol but `granted` (the output of every lease:
 * `dispatch` settles it first). An output of a type not here is said as a warn
 * `unknownOutput` event, never dropped without a word.
 */
const HANDLERS = new Map([
  ['exhausted', caller((pending, output, policy) => pending.reject(exhaustedError(policy, output, pending)))],
  ['timedOut', caller((pending, output, policy) => pending.reject(timeoutError(policy, output.request, pending, undefined, output.reasons)))],
  ['unavailable', caller((pending) => pending.resolve(undefined))],
  ['cancelled', caller((pending) => pending.reject(pending.abortReason ?? closed('the roster closed before a lease was granted')))],
  ['waiting', (d, output) => {
    d.ledger.waiting(output)
    // The executors whose budget had no room: the budget-wait metric.
    if (output.spent !== undefined) for (const executor of output.spent) d.roster.budgetWaited(executor, output.role)
  }],
  ['probe', (d, { executor, url }) => d.roster.log().probe(executor, url)],
  ['createMachine', (d, output) => d.machines.create(output)],
  ['deleteMachine', (d, output) => d.machines.delete(output)],
  ['preflight', (d, output) => d.preflights.run(output)],
  ['startFailed', (d, output) => d.preflights.failed(output)],
  // Only a state file writes these (a shared log's are nobody's: it is its own persistence).
  ['persist', (d, { ids, state }) => d.state?.persist({ ids, state })],
  ['event', (d, output) => d.announce.core(output, d.now, d.at.seq)],
])

export class Dispatcher {
  /** This instance's id as the owner of its requests (undefined for a log in memory: outputs name none). */
  me = undefined
  /** Where the entry being folded came from ({ seq, appender, actors }), and its time. */
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
    const actors = at.actors
    for (let i = 0; i < outputs.length; i++) {
      if (actors === undefined || this.#named(actors[i])) this.dispatch(outputs[i])
      else if (this.announce.listened) this.announce.output(outputs[i], at.seq)
    }
    this.at = HERE
  }

  /** Whether the core's actor for an output names this instance. */
  #named(actor) {
    if (actor === 'everyone') return true
    if (actor === 'leader') return this.roster.log().isLeader
    return actor?.instance !== undefined && actor.instance === this.me
  }

  /** One output this instance acts on. */
  dispatch(output) {
    if (this.announce.listened) this.announce.output(output, this.at.seq)
    // A grant, the output of every lease, without the table's lookup and call.
    if (output.type === 'granted') {
      this.granted(output, this.now)
      return undefined
    }
    const handle = HANDLERS.get(output.type)
    if (handle !== undefined) return handle(this, output)
    return this.announce.emit('warn', 'unknownOutput', `roster: the core gave an output of type ${JSON.stringify(output.type)}, which this driver does not know`, {
      type: output.type,
    })
  }
}
