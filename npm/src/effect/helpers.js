// The roster seed's pure helpers, each answered by rota's core (validate, merge, narrow,
// parseDuration, classify, and a throwaway Policy for what an executor resolves to), so
// there is one rule: these adapt the seed's shapes (ExecutorSpec, Exclusion, Duration)
// to the core's and back. A spec the core refuses (say `slots: 0`) throws its
// `RotaError` (INVALID_DOCUMENT): check documents with `rosterViolations` first.

import * as Duration from 'effect/Duration'
import { Policy, classifyFailure, defaultOptions, defaultRoles, failureFacts, merge, narrow, parseDuration as parseMs, validate } from 'rota'
import { Exclusion, RosterDocument, exclusionOf } from './schema.js'

const plain = (value) => JSON.parse(JSON.stringify(value))
const defaults = defaultOptions()
const coreRoles = defaultRoles()

export const isRole = (value) => coreRoles.includes(value)
export const rolesOf = (spec) => spec.roles.filter(isRole)
export const hasRole = (spec, role) => rolesOf(spec).includes(role)

/** `fn(policy)` on a Policy over `executors` alone (freed after). */
function withPolicy(executors, options, fn) {
  const policy = new Policy({ executors }, options)
  try {
    return fn(policy)
  } finally {
    policy.free()
  }
}

/** What the core resolves `spec` to (its snapshot entry: slots, roleCaps, priority). */
const resolved = (spec, override = {}) => withPolicy([{ ...plain(spec), ...override }], undefined, (policy) => policy.snapshot().executors[0])

export const slotsOf = (spec) => resolved(spec).slots

/** Slots coders may hold (the core's `coderSlots` default: one stays free for reasoning on an executor that does both). */
export const coderSlotsOf = (spec) => {
  const status = resolved(spec)
  return status.roleCaps.coder ?? status.slots
}

/** The executor's priority for `role` (lower first), as the core reads `priority`. */
export const priorityOf = (spec, role) => {
  const { coderSlots: _coderSlots, ...rest } = plain(spec)
  return resolved(rest, { roles: [role] }).priority[role]
}

/** The effort `role` runs at on this executor (the upstream's `effortOf`, ADR 0029), as the core resolves `effort`; undefined when it sets none. */
export const effortOf = (spec, role) => {
  const { coderSlots: _coderSlots, ...rest } = plain(spec)
  return withPolicy([{ ...rest, roles: [role] }], undefined, (policy) => policy.effortOf(rest.id, role) ?? undefined)
}

/** "30 minutes", "90s", "2h": the core's duration vocabulary; undefined when unreadable. */
export const parseDuration = (text) => {
  const ms = parseMs(text)
  return ms === undefined || ms === null ? undefined : Duration.millis(ms)
}

/**
 * The exclusion `spec` earns for `error` at `now`, by the core (the rules of a report,
 * with the spec's cooldowns and health URL); `recentRateLimits`: the rate limits within
 * the window, this one included.
 */
export const exclusionFor = (error, spec, now, recentRateLimits = 1) =>
  withPolicy([plain(spec)], { canProbe: spec.health !== undefined }, (policy) => {
    const failure = failureFacts(error, { now })
    const times = failure.tag === 'RateLimitError' ? Math.max(1, recentRateLimits) : 1
    let earned
    for (let i = 0; i < times && earned === undefined; i += 1) {
      const { outputs } = policy.handle({ type: 'report', now, executor: spec.id, failure })
      const event = outputs.find((o) => o.type === 'event' && o.name === 'excluded')
      if (event !== undefined) earned = exclusionOf(spec.id, event.fields)
    }
    if (earned?.kind === 'health' && earned.until === undefined) return Exclusion.make({ ...earned, until: now })
    return earned
  })

/** How long `kind` excludes `spec` (its `cooldown`, else the core's default), by the core. */
const cooldown = (spec, kind) =>
  withPolicy([{ ...plain(spec), health: undefined }], { canProbe: false }, (policy) => {
    const now = 1_000_000
    const failure = { kind, message: kind }
    let until
    for (let i = 0; i < defaults.rateLimitsToExclude && until === undefined; i += 1) {
      const { outputs } = policy.handle({ type: 'report', now, executor: spec.id, failure })
      until = outputs.find((o) => o.type === 'event' && o.name === 'excluded')?.fields.until
    }
    return Duration.millis(until - now)
  })

export const usageLimitCooldown = (spec) => cooldown(spec, 'usageLimit')
export const rateLimitCooldown = (spec) => cooldown(spec, 'rateLimit')
export const outageCooldown = (spec) => cooldown(spec, 'outage')

/** Rate limits in this window count towards an exclusion. */
export const rateLimitWindow = Duration.millis(defaults.rateLimitWindowMs)
/** Rate limits within the window that exclude an executor. */
export const rateLimitsToExclude = defaults.rateLimitsToExclude
/** How often a health-excluded executor is probed while someone waits. */
export const healthProbeInterval = Duration.millis(defaults.healthProbeIntervalMs)

/** Every violation of a roster document, in one pass (the core's `validate`, its messages). */
export const rosterViolations = (document) => validate(plain(document)).map((violation) => violation.message)

/** The seed's specs of the ids a core answer kept, in its order (the later document's spec for an id in both). */
const specsOf = (answer, ...documents) => {
  const byId = new Map()
  for (const document of documents) for (const spec of document?.executors ?? []) byId.set(spec.id, spec)
  return RosterDocument.make({ executors: answer.executors.map((entry) => byId.get(entry.id)) })
}

/** A repository roster over the user's (the core's `merge`): same id replaces, `disabled: true` removes, new ids add. */
export const mergeRosterDocuments = (user, repo) =>
  specsOf(merge(user === undefined ? null : plain(user), repo === undefined ? null : plain(repo)), user, repo)

/** Only the named executors (the core's `narrow`); an empty list keeps all. */
export const narrowRoster = (document, ids) => specsOf({ executors: narrow(plain(document), [...ids]).executors }, document)

/** Whether a failure message says the model is unavailable (the core's classifier and signals). */
export const isModelUnavailableMessage = (message) => classifyFailure(new Error(message)).kind === 'modelUnavailable'

/** The seed's wording of an exclusion ("until 2026-…: usage limit (…)"), by the core. */
export const describeExclusion = (exclusion) =>
  withPolicy([{ id: exclusion.id, harness: '-', roles: ['coder'], health: 'http://127.0.0.1/' }], { canProbe: true }, (policy) => {
    const now = exclusion.until === undefined ? 0 : Math.max(0, exclusion.until - 1)
    const input = { type: 'exclude', now, executor: exclusion.id, kind: exclusion.kind, reason: exclusion.reason }
    if (exclusion.until !== undefined) input.until = exclusion.until
    policy.handle(input)
    return policy.snapshot().executors[0].exclusion.description
  })
