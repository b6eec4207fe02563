// `rota/effect`: the roster seed's surface (@llm4ts/flow 2.9.1, `Roster.ts`) over rota's
// one Node roster, for Effect v4 programs: change the import line and keep the code.
// `effect` (>= 4.0.0 < 5) is an optional peer dependency of the package.

export {
  Budget,
  Cooldown,
  Effort,
  Exclusion,
  ExclusionKind,
  ExecutorSpec,
  Info,
  RecoveryMode,
  Role,
  RosterDocument,
  RosterExhausted,
  RosterState,
  RosterStateVersion,
  roles,
} from './schema.js'
export {
  coderSlotsOf,
  describeExclusion,
  effortOf,
  exclusionFor,
  hasRole,
  healthProbeInterval,
  isModelUnavailableMessage,
  isRole,
  mergeRosterDocuments,
  narrowRoster,
  outageCooldown,
  parseDuration,
  priorityOf,
  rateLimitCooldown,
  rateLimitWindow,
  rateLimitsToExclude,
  rolesOf,
  rosterViolations,
  slotsOf,
  usageLimitCooldown,
} from './helpers.js'
export { makeRosterStateStore } from './state.js'
export { makeRoster } from './roster.js'
export { WorkerSlots, WorkersReloadRefused, layer as workerSlotsLayer, makeWorkerSlots } from './worker-slots.js'
