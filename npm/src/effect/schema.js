// The roster seed's Schema classes (@llm4ts/flow 2.9.1, Roster.ts), field for field, so
// code that builds or decodes them keeps working with its import changed; and its
// tagged error, `RosterExhausted`. Shapes only: every rule about them is the core's
// (helpers.js).

import * as Schema from 'effect/Schema'

export const roles = ['planner', 'coder', 'reviewer', 'judge', 'verifier']

export const Role = Schema.Literals(roles)

/** How long each exclusion lasts, as duration strings ("30 minutes"). */
export class Cooldown extends Schema.Class('Cooldown')({
  usageLimit: Schema.optionalKey(Schema.String),
  rateLimit: Schema.optionalKey(Schema.String),
  outage: Schema.optionalKey(Schema.String),
}) {}

/** A reasoning effort (the upstream's `Effort`, @llm4ts/core `Models.ts`). */
export const Effort = Schema.Literals(['low', 'medium', 'high', 'max'])

/** How an executor returns after a cooldown (rota's `recovery`). */
export const RecoveryMode = Schema.Literals(['all', 'probation'])
/** A budget (rota's): its fields as written; the core validates them. */
export const Budget = Schema.Record(Schema.String, Schema.Union([Schema.Number, Schema.String]))

/** One executor: a harness and a model, the roles it takes, its slots and priorities. */
export class ExecutorSpec extends Schema.Class('ExecutorSpec')({
  id: Schema.String,
  harness: Schema.String,
  model: Schema.optionalKey(Schema.String),
  flags: Schema.optionalKey(Schema.Record(Schema.String, Schema.String)),
  env: Schema.optionalKey(Schema.Record(Schema.String, Schema.String)),
  baseUrl: Schema.optionalKey(Schema.String),
  roles: Schema.Array(Schema.String),
  slots: Schema.optionalKey(Schema.Number),
  coderSlots: Schema.optionalKey(Schema.Number),
  priority: Schema.optionalKey(Schema.Union([Schema.Number, Schema.Record(Schema.String, Schema.Number)])),
  health: Schema.optionalKey(Schema.String),
  cooldown: Schema.optionalKey(Cooldown),
  disabled: Schema.optionalKey(Schema.Boolean),
  /**
   * The upstream's later field (its ADR 0029): the reasoning effort, one for every role
   * or per role with a `default`; the core checks the words (`effortOf`).
   */
  effort: Schema.optionalKey(Schema.Union([Effort, Schema.Record(Schema.String, Effort)])),
  /**
   * rota's recovery after a rate-limit or usage-limit cooldown: `'all'` or
   * `'probation'`, or `{ mode, maxBackoff, quietPeriod }`; the core checks it.
   */
  recovery: Schema.optionalKey(
    Schema.Union([
      RecoveryMode,
      Schema.Struct({
        mode: Schema.optionalKey(RecoveryMode),
        maxBackoff: Schema.optionalKey(Schema.Number),
        quietPeriod: Schema.optionalKey(Schema.String),
      }),
    ]),
  ),
  /** rota's `{ consecutiveFailures }`: `other` failures in a row that exclude it as an outage. */
  exclusion: Schema.optionalKey(Schema.Struct({ consecutiveFailures: Schema.optionalKey(Schema.Number) })),
  /** rota's: the account it shares usage and rate limits with. */
  account: Schema.optionalKey(Schema.String),
  /** rota's: `{ requestsPerMinute }` or `{ requests, per | perMs }`; the core checks it. */
  budget: Schema.optionalKey(Budget),
  /** rota's: its share of the grants among equal priorities (1 to 1000; default 1). */
  weight: Schema.optionalKey(Schema.Number),
}) {}

export class RosterDocument extends Schema.Class('RosterDocument')({
  executors: Schema.Array(ExecutorSpec),
  /** rota's: accounts by name, each with an optional budget its executors spend together. */
  accounts: Schema.optionalKey(Schema.Record(Schema.String, Schema.Struct({ budget: Schema.optionalKey(Budget) }))),
}) {}

export const ExclusionKind = Schema.Literals(['until', 'health', 'run', 'manual'])

/**
 * Why an executor is out of the pick-up round, and until when: `until` an instant,
 * `health` its health URL answers, `run` the end of this run, `manual` an operator's
 * resume.
 */
export class Exclusion extends Schema.Class('Exclusion')({
  id: Schema.String,
  reason: Schema.String,
  kind: ExclusionKind,
  until: Schema.optionalKey(Schema.Number),
}) {}

export const RosterStateVersion = 1

export class RosterState extends Schema.Class('RosterState')({
  exclusions: Schema.Array(Exclusion),
}) {}

/** No executor outside `avoid` can ever take `role`: `reasons` says why, one per executor. */
export class RosterExhausted extends Schema.TaggedError()('RosterExhausted', {
  role: Schema.String,
  reasons: Schema.Array(Schema.String),
}) {
  get message() {
    return `no executor can ever take ${this.role}: ${this.reasons.join('; ')}`
  }
}

/** The seed's `Info` event (`@llm4ts/flow/FlowEvents`): the same tag and field. */
export class Info extends Schema.TaggedClass()('Info', {
  message: Schema.String,
}) {}

/**
 * An `Exclusion` from the core's `{ id, kind, reason, until?, nextProbeAt? }` (other
 * fields dropped). A `health` one's `until` is its next probe time, as in the seed.
 */
export const exclusionOf = (id, { kind, reason, until, nextProbeAt }) => {
  const at = until ?? (kind === 'health' ? nextProbeAt : undefined)
  return Exclusion.make(at === undefined || at === null ? { id, kind, reason } : { id, kind, reason, until: at })
}
