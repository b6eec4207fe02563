// Types of the npm package `rota`: the roster document, the core's inputs and outputs,
// the snapshot, errors, and the Roster driver. Hand-written to match
// core/src/{protocol,status,document,error}.rs; checked with `tsc --noEmit` in the tests,
// and the protocol half against the core itself (npm/test/types-protocol.test.mjs: the
// input fields the core's wire table accepts, the outputs, events and snapshots of the
// conformance vectors).

// ---- the roster document -----------------------------------------------------------

/** One of the document's roles: the seed's five unless the document declares its own. */
export type Role = string

/**
 * The roles of a document type: its declared `roles` (a literal list), the seed's five
 * for a literal document without `roles`, or `string` when the type does not say (a
 * `RosterDocument`, a file). `Roster.create({ document })` narrows `Roster<R>` by it,
 * so a misspelt role fails to compile.
 */
export type RolesOf<D> = D extends { readonly roles: readonly (infer R extends string)[] }
  ? string extends R
    ? string
    : R
  : 'roles' extends keyof D
    ? string
    : SeedRole

/** The seed's five roles. */
export type SeedRole = 'planner' | 'coder' | 'reviewer' | 'judge' | 'verifier'

/** A duration string of a roster file: "30 minutes", "90s", "2h", "1.5 hours". */
export type DurationString = string

/** How long each exclusion lasts. Defaults: usageLimit 30 minutes, rateLimit 10 minutes, outage 5 minutes. */
export interface Cooldown {
  usageLimit?: DurationString | undefined
  rateLimit?: DurationString | undefined
  outage?: DurationString | undefined
}

/**
 * One executor: a harness and a model (or a worker machine), its roles, slots and priorities.
 * What `preflight`, `lease.executor` and `roster.executors` get of a `workers` document is
 * the worker's declaration (`name`, `kind`, `maxConcurrentAttempts`, …, as the scheduler
 * reads usine.yaml), with its `id` (the name); it has no `harness`.
 */
export interface ExecutorSpec {
  id: string
  /** A CLI harness (`pi`, `claude`, `codex`, `opencode` …) or an API provider. */
  harness: string
  model?: string | undefined
  flags?: Record<string, string> | undefined
  /** Environment for the harness process; secrets only as `${VAR}` references. */
  env?: Record<string, string> | undefined
  /** Endpoint for an API harness. */
  baseUrl?: string | undefined
  roles: readonly Role[]
  /** Leases it takes at once (default 1). */
  slots?: number | undefined
  /** The scheduler seed's name for `slots` (an accepted alias). */
  maxConcurrentAttempts?: number | undefined
  /** Slots coders may use; default `slots - 1` on an executor that also reasons. */
  coderSlots?: number | undefined
  /** A cap per role. */
  roleSlots?: Record<Role, number> | undefined
  /** Lower first. A number for every role, or per role with a `default` (default 1). */
  priority?: number | ({ default?: number | undefined } & Record<Role, number>) | undefined
  /**
   * The reasoning effort a harness runs at (the upstream's ADR 0029): one for every
   * role, or per role with a `default`, as `priority`. A role it names none for has none
   * (the harness keeps its own default). `lease.effort`, `roster.effortOf(id, role)`.
   */
  effort?: Effort | ({ default?: Effort | undefined } & Partial<Record<Role, Effort>>) | undefined
  /** A URL that answers 2xx when the executor's serving engine is up. */
  health?: string | undefined
  cooldown?: Cooldown | undefined
  /** How it returns after a rate-limit or usage-limit cooldown; its fields win over the document's. */
  recovery?: Recovery | undefined
  /** `consecutiveFailures`: its own count of `other` failures in a row that exclude it (0: never); wins over the document's. */
  exclusion?: ExclusionRule | undefined
  /** In a repository roster: removes the user roster's entry with this id. */
  disabled?: boolean | undefined
  /** Each lease first creates a machine (the host's `machines.create`). */
  provision?: unknown
  /** Opaque to the core; checked against `options.kinds`. */
  kind?: string | undefined
  /**
   * The account (or API key) it shares a quota with: executors of one account share
   * usage-limit and rate-limit exclusions (same end) and the rate-limit window; outage,
   * health, authentication and model-unavailable exclusions stay per executor.
   */
  account?: string | undefined
  /** At most so many leases granted in any window on this executor (no default: unlimited). */
  budget?: Budget | undefined
  /**
   * Its share of the grants among free executors of equal priority (default 1; a whole
   * number from 1 to 1000): a smooth weighted round-robin, e.g. 3 and 1 give 3:1.
   */
  weight?: number | undefined
  /** Fields the core does not use pass through to the host. */
  [field: string]: unknown
}

export interface RosterDocument {
  /** This schema's location for editors: `./node_modules/rota/roster.schema.json` (the core keeps it as an unknown field). */
  $schema?: string | undefined
  /** Declares the role list (default: the seed's five). */
  roles?: readonly Role[] | undefined
  executors: readonly ExecutorSpec[]
  /** Extends the seed's signal lists that failures are classified with. */
  signals?: Signals | undefined
  /** Which of the equal free executors takes a request (wins over the options'). */
  choice?: Choice | undefined
  /** A request nothing can ever serve (wins over the options'). */
  unservable?: Unservable | undefined
  /**
   * The roster seed's rules (`'seed'`, @llm4ts/flow 2.9.1, the default) or its
   * upstream's later ones (`'upstream'`: `prefer: 'tieBreak'` and `coderSlotsDefault:
   * 'slots'` at once). Each rule's own field wins over it.
   */
  rules?: Rules | undefined
  /**
   * What a lease's `prefer` does: `'first'` (taken first while free, whatever its
   * priority) or `'tieBreak'` (taken only while its priority for the role is no worse
   * than the best free executor's). Absent: by `rules`.
   */
  prefer?: PreferRule | undefined
  /**
   * An executor's `coderSlots` when it gives none: `'slotsMinusOne'` (one slot stays
   * free for reasoning on an executor that codes and reasons) or `'slots'`. Absent: by `rules`.
   */
  coderSlotsDefault?: CoderSlotsDefault | undefined
  /**
   * `'numbered'`: each lease takes the lowest clone number free on its executor, from 1
   * (`lease.clone`, `cloneName(id, n)`: `codex#2`). `'unnumbered'`: none. Absent: by `rules`.
   */
  clones?: ClonesRule | undefined
  /**
   * `'typed'`: a waited grant's event has `waitedMs`, `released` its role and label,
   * `back`/`resumed` a `why`. `'plain'`: the seed's fields. Absent: by `rules`.
   */
  leaseEvents?: LeaseEventsRule | undefined
  /**
   * Where a usage limit's reset time comes from: `'reported'` (a report's own
   * `resetAt` only) or `'message'` (also its message: "resets 8:20am (Europe/Rome)",
   * "try again at 2:30 PM", when the report gives no `resetAt`). Absent: by `rules`.
   */
  resetTime?: ResetTime | undefined
  /**
   * How long an idle lease `affinity` key is remembered on the executor of its last
   * grant (a duration: "10 minutes", "90s"; default 10 minutes; refreshed by each grant).
   */
  affinityTtl?: string | undefined
  /**
   * How an executor returns when a rate-limit or usage-limit exclusion ends (its time
   * passed, or its health check answered): `'all'` (every slot at once, the default)
   * or `'probation'` (one slot until a lease granted after its return is released with
   * no failure reported since; a rate or usage limit on probation excludes again for
   * the cooldown times a doubled multiplier, at most `maxBackoff`, halving after each
   * `quietPeriod` in the round). An executor's own `recovery` wins, field by field.
   */
  recovery?: Recovery | undefined
  /**
   * `consecutiveFailures`: that many `other` failures on an executor with no release
   * without a failure between take it out as an outage (health-probed when it has a
   * `health` URL, else the outage cooldown). Absent or 0: never.
   */
  exclusion?: ExclusionRule | undefined
  /**
   * Accounts by name (an executor's `account`), each with an optional `budget` that
   * every executor of the account spends together. An executor may name an account
   * not listed here (it then has no account budget); a listed account no executor
   * names is an `unusedAccount` warning.
   */
  accounts?: Record<string, { budget?: Budget | undefined }> | undefined
  /**
   * A floor under every role: at most this share of a role's slots may be out of the
   * round through rate-limit, outage and failures-in-a-row exclusions (`'50%'`); one
   * that would take more is held back (an `exclusionHeldBack` warn event) and the
   * executor stays in. Per role with `default`: `{ coder: '100%', default: '50%' }`.
   * Usage-limit, authentication and model-unavailable exclusions always apply. No default: no floor.
   */
  maxExcluded?: Percent | Record<string, Percent> | undefined
  /**
   * The order a role's waiting requests are served in: `'leaseOrder'` (default: rank,
   * event time, arrival) or `'tenants'` (across the leases' `tenant`s by weighted fair
   * queuing, within a tenant in lease order).
   */
  fairness?: Fairness | undefined
  /** Tenant weights for `fairness: 'tenants'` (a whole number from 1 to 20; a tenant not listed weighs 1). */
  tenants?: Record<string, { weight?: number | undefined }> | undefined
  [field: string]: unknown
}

/** A whole percentage, `'0%'` to `'100%'`. */
export type Percent = `${number}%`

/** `'leaseOrder'` (default) or `'tenants'`. */
export type Fairness = 'leaseOrder' | 'tenants'

/** `'all'` (default) or `'probation'`. */
export type RecoveryMode = 'all' | 'probation'
/** A mode, or a record of it with the multiplier's cap and its quiet period. */
export type Recovery =
  | RecoveryMode
  | {
      mode?: RecoveryMode | undefined
      /** The most times its cooldown a failure on probation lasts (1–1024, default 8). */
      maxBackoff?: number | undefined
      /** The multiplier halves after each such period in the round (default: the cooldown of the failure's kind). */
      quietPeriod?: DurationString | undefined
    }
export interface ExclusionRule {
  /** `other` failures in a row that exclude an executor as an outage (0–1000; 0, the default: never). */
  consecutiveFailures?: number | undefined
}

/**
 * A budget: at most `requestsPerMinute` grants in any minute, or `requests` in any
 * window of `per` (a duration: "90s", "1 minute") or `perMs`. A sliding window of grant
 * times: a grant counts at its grant time, a release refunds nothing. A lease beyond
 * it waits in its place until the window has room (`tryLease`: unavailable).
 */
export type Budget =
  | { requestsPerMinute: number }
  | { requests: number; per: string }
  | { requests: number; perMs: number }

/** A reasoning effort (the upstream's `Effort`). */
export type Effort = 'low' | 'medium' | 'high' | 'max'
export type ResetTime = 'reported' | 'message'
export type Rules = 'seed' | 'upstream'
export type PreferRule = 'first' | 'tieBreak'
export type CoderSlotsDefault = 'slotsMinusOne' | 'slots'
export type ClonesRule = 'unnumbered' | 'numbered'
export type LeaseEventsRule = 'plain' | 'typed'
/** A clone's name: `codex#2` for executor `codex`, clone 2. */
export declare function cloneName(id: string, n: number): string


/** Signals added to the seed's (which always apply); matched case-insensitively. */
export interface Signals {
  /** Outage texts, matched in a failure's message and its error code (`"ECONNREFUSED"`). */
  outage?: string[] | undefined
  /** Model-unavailable texts, matched in the message. */
  modelUnavailable?: string[] | undefined
  /** HTTP statuses that mean an outage (none by default). */
  outageStatuses?: number[] | undefined
}

/** One thing wrong with a document, and where (`executors[2].slots`). */
export interface Violation {
  path: string
  message: string
}

// ---- options -------------------------------------------------------------------------

/** The core's options; every field has the seeds' default. */
export interface PolicyOptions {
  /** Whether the host probes health URLs (the driver sets it from `probe`). */
  canProbe?: boolean | undefined
  /** Probe interval of a health exclusion while a request waits that it could serve (15 s). */
  healthProbeIntervalMs?: number | undefined
  /** Probe interval while nobody waits for it (60 s). */
  idleProbeIntervalMs?: number | undefined
  /** Rate limits in this window count towards an exclusion (10 minutes). */
  rateLimitWindowMs?: number | undefined
  /** Rate limits within the window that exclude an executor (3). */
  rateLimitsToExclude?: number | undefined
  /** First pause after a failed machine creation; doubles per failure (30 s). */
  provisionFirstPauseMs?: number | undefined
  /** Longest pause after failed machine creations (10 minutes). */
  provisionMaxPauseMs?: number | undefined
  /**
   * The host answers `preflight` outputs: every executor is preflighted before the
   * roster serves, and a failure stops the start (`startFailed`). The driver sets it
   * when given a `preflight` function (false).
   */
  preflight?: boolean | undefined
  /** Executors that a reload adds or grows must pass a preflight first (absent: `preflight`). */
  preflightReloads?: boolean | undefined
  /**
   * Which of the equal free executors takes a request: `'roundRobin'` (the one leased
   * least recently), `'declared'` (the first declared) or `'leastBusy'` (the fewest of the
   * role's leases in use relative to its slots for the role; ties by recency). Absent: the document's
   * `choice`, else `'declared'` for a scheduler `workers` document, `'roundRobin'` otherwise.
   */
  choice?: Choice | undefined
  /**
   * A request nothing can ever serve: `'exhaust'` ends it (EXHAUSTED), `'wait'` keeps it
   * waiting until a slot, a reload or a cancel. Absent: the document's `unservable`, else
   * `'wait'` for a scheduler `workers` document, `'exhaust'` otherwise.
   */
  unservable?: Unservable | undefined
  /** The executor kinds the host can run (null: any). */
  kinds?: string[] | null | undefined
  /**
   * The least severe `event` output emitted (`'debug'`: every event). `'warn'` leaves
   * out the info events of every grant and release, for hot loops that do not log them;
   * decisions and effects are outputs whatever the level.
   */
  minEventLevel?: Level | undefined
  /**
   * What `expireOwner` does with the gone owner's leases: `'release'` (the default: every
   * lease released, a machine deleted before its slot frees), `'keepMachines'` (leases
   * holding a machine are kept: their work runs on without the owner) or `'keep'`.
   */
  expiredOwnerLeases?: ExpiredOwnerLeases | undefined
}

export type ExpiredOwnerLeases = 'release' | 'keepMachines' | 'keep'

export type Choice = 'roundRobin' | 'declared' | 'leastBusy'
export type Unservable = 'exhaust' | 'wait'

// ---- inputs ----------------------------------------------------------------------------

export type FailureKind =
  | 'usageLimit'
  | 'rateLimit'
  | 'authentication'
  | 'outage'
  | 'modelUnavailable'
  | 'other'

/**
 * A failed call, as facts the core classifies (the seed's rules), or with its `kind`
 * already decided (an explicit kind wins, except over a model-unavailable message).
 */
export interface Failure {
  kind?: FailureKind | undefined
  /** An @llm4ts/core error's `_tag`: `UsageLimitError`, `RateLimitError`, `AuthenticationError`, `ProviderError`, … */
  tag?: string | undefined
  /** The HTTP status (100–599). */
  status?: number | undefined
  /** An error code: `ECONNREFUSED`, `UND_ERR_SOCKET`, … */
  code?: string | undefined
  message?: string | undefined
  /** A usage limit's reset instant (epoch ms). */
  resetAt?: number | undefined
  /** A `Retry-After` in ms from now: sets the exclusion's end. */
  retryAfterMs?: number | undefined
}

/** Which rule decided a failure's kind. */
export type ClassificationRule =
  | 'modelUnavailableSignal'
  | 'kind'
  | 'tag'
  | 'resetAt'
  | 'status'
  | 'contextOverflow'
  | 'outageSignal'
  | 'outageStatus'
  /** A call that could not reach its engine (no status; `ECONNREFUSED`, `ECONNRESET`, `EHOSTUNREACH`, `EHOSTDOWN`, `ENETUNREACH`): kind `other`, but a report of it on an executor with a `health` URL takes it out as `health`. */
  | 'unreachable'
  | 'none'

export interface Classification {
  kind: FailureKind
  rule: ClassificationRule
  /** A usage limit's reset instant (epoch ms) read from its message (`resetTime: 'message'`). */
  resetAt?: number
}

export type ExclusionKind = 'until' | 'health' | 'run' | 'manual'

/** An exclusion as the state file holds it (the seed's format). */
export interface Exclusion {
  id: string
  reason: string
  kind: ExclusionKind
  /** Epoch ms: the end for `until` and `manual`; for `health`, the next probe. */
  until?: number
}

/** The state file: `{ version: 1, exclusions: [...] }`. */
export interface PersistedState {
  version: 1
  exclusions: Exclusion[]
}

export interface LeaseRequestInput {
  now: number
  /** Unique among live requests. */
  id: string
  role: Role
  avoid?: string[] | undefined
  prefer?: string | undefined
  pin?: string | undefined
  rank?: number | undefined
  eventTime?: number | undefined
  label?: string | undefined
  /** What the call is for beyond its role (a review lens); at most 4,096 bytes. */
  purpose?: string | undefined
  /** Who the work is for (`fairness: 'tenants'`); at most 1,024 bytes. None: the tenant `default`. */
  tenant?: string | undefined
  /** Give up at this instant (epoch ms). Not with `timeoutMs`. */
  deadline?: number | undefined
  /** Give up this long after the input's `now` (the log's time). Not with `deadline`. */
  timeoutMs?: number | undefined
  /** The executor holding this context's coder, taken when no other can serve (a `tryLease` never borrows). */
  borrow?: string | undefined
  /** A cache key (at most 1,024 bytes, non-empty): the executor of its last grant is preferred while free, in the round and no worse in priority. */
  affinity?: string | undefined
  /** The instance that issued it (a shared roster's): its lease and every output about it name it. */
  owner?: string | undefined
}

/** One input to the core. Every input carries `now` (epoch ms). */
export type Input =
  | ({ type: 'lease' } & LeaseRequestInput)
  | ({ type: 'tryLease' } & LeaseRequestInput)
  | { type: 'cancel'; now: number; id: string }
  | { type: 'release'; now: number; lease: number }
  | { type: 'occupy'; now: number; id: string; executor: string; role?: Role | undefined; hold?: unknown; owner?: string | undefined }
  | { type: 'report'; now: number; executor: string; failure: Failure }
  | { type: 'exclude'; now: number; executor: string; kind?: ExclusionKind | undefined; reason?: string | undefined; until?: number | undefined }
  | { type: 'resume'; now: number; executor: string }
  | { type: 'probeResult'; now: number; executor: string; up: boolean }
  | { type: 'machineCreated'; now: number; id: string; hold: unknown; checked?: unknown }
  | { type: 'machineFailed'; now: number; id: string; message?: string | undefined; reason?: string | undefined }
  | { type: 'machineDeleted'; now: number; lease: number; ok: boolean; error?: string | undefined }
  | { type: 'reload'; now: number; document: RosterDocument }
  | { type: 'preflightResult'; now: number; executor: string; ok: boolean; error?: string | undefined }
  | { type: 'restore'; now: number; state: PersistedState }
  | { type: 'tick'; now: number }
  /** An owner is gone: its requests cancelled, its creations dropped, its leases released or kept (`expiredOwnerLeases`). */
  | { type: 'expireOwner'; now: number; owner: string }
  /** Drop a machine creation nobody will answer, without pausing the executor. */
  | { type: 'dropCreation'; now: number; id: string }
  /** A log's version marker: UNSUPPORTED_VERSION unless this core folds `log` (1); else nothing changes. */
  | { type: 'version'; now: number; log: number }

export type InputType = Input['type']

// ---- outputs ---------------------------------------------------------------------------

export type Level = 'debug' | 'info' | 'warn'

export interface GrantedOutput {
  type: 'granted'
  request: string
  lease: number
  executor: string
  /** Its clone number on the executor (`clones: 'numbered'`). */
  clone?: number
  role: Role
  hold?: unknown
  /** Earlier waiting requests (lease order) of the roles this executor takes, which it passed. */
  passed: number
  /** True for an `occupy`. */
  occupied?: true
  /** On the request's `borrow` executor without a slot (it holds none, frees none). */
  borrowed?: true
  /** On the request's `borrow` executor (not independent), and why. */
  because?: Because
  /** The request's owner, when it has one. */
  owner?: string
}

/**
 * Why a request went to its `borrow` executor: nobody outside `avoid` can ever serve
 * the role, every executor in the round that takes it is held by coders, or every other
 * one is out of the round.
 */
export type Because = 'nobody' | 'held' | 'out'

/** One output of the core: a decision, an effect to carry out, or an event. */
export type Output =
  | GrantedOutput
  | { type: 'exhausted'; request: string; role: Role; reasons: string[]; owner?: string }
  | { type: 'timedOut'; request: string; reasons: string[]; owner?: string }
  | { type: 'unavailable'; request: string; owner?: string }
  | { type: 'cancelled'; request: string; owner?: string }
  | { type: 'waiting'; request: string; role: Role; report: string; ahead: number; spent?: string[]; owner?: string }
  | { type: 'probe'; executor: string; url: string }
  | { type: 'createMachine'; request: string; executor: string; owner?: string }
  | { type: 'deleteMachine'; executor: string; hold: unknown; lease?: number; owner?: string }
  | { type: 'preflight'; executor: string }
  | { type: 'startFailed'; executor: string; error: string }
  | { type: 'persist'; ids: string[]; state: PersistedState }
  | ({ type: 'event' } & CoreEvent)

export type OutputType = Output['type']

/** What `Policy.handle` returns: every output of the input and the next wake-up. */
export interface StepResult {
  outputs: Output[]
  /** When the core wants a `tick` (epoch ms), or null. */
  wakeAt: number | null
}

// ---- status ----------------------------------------------------------------------------

export interface ExclusionStatus {
  kind: ExclusionKind
  reason: string
  until?: number
  since: number
  /** For `health`: when the next probe is due. */
  nextProbeAt?: number
  /** A timed exclusion that takes over when this one ends (the later end wins). */
  thenUntil?: number
  /** The seed's description: "until 2026-…: usage limit (…)". */
  description: string
}

export interface PauseStatus {
  failures: number
  until: number
  message: string
  blocked: boolean
  /** The seed's pause record: why (`check`: a failed capability check), failed at, retry at (ISO). */
  reason: string
  failedAt: string
  retryAt: string
}

export interface LeaseStatus {
  lease: number
  request: string
  role?: Role
  label?: string
  purpose?: string
  /** The tenant its request named. */
  tenant?: string
  /** Its clone number (`clones: 'numbered'`). */
  clone?: number
  hold?: unknown
  since: number
  occupied: boolean
  /** Released; its machine is being deleted, and the slot frees after (`machineDeleted`). */
  deleting?: true
  /** On its request's `borrow` executor without a slot. */
  borrowed?: true
  /** On its request's `borrow` executor (not independent), and why. */
  because?: Because
  /** The instance its request came from (a shared roster's). */
  owner?: string
}

export interface PreflightRecord {
  at: number
  ok: boolean
  error?: string
}

export interface ExecutorStatus {
  id: string
  harness: string
  model?: string
  roles: Role[]
  slots: number
  roleCaps: Record<Role, number>
  priority: Record<Role, number>
  busy: number
  busyByRole: Record<Role, number>
  exclusion?: ExclusionStatus
  pause?: PauseStatus
  draining: boolean
  provision: boolean
  leases: LeaseStatus[]
  preflight?: PreflightRecord
  probeInFlight: boolean
  recentRateLimits: number
  /** Back from a rate or usage cooldown on probation: one slot (`recovery: 'probation'`). */
  probation?: true
  /** The multiplier a failure on probation's cooldown starts from now, when above 1. */
  backoff?: number
  /** `other` failures since the last release without one (`exclusion.consecutiveFailures`). */
  failuresInARow?: number
}

export interface QueuedRequest {
  request: string
  role: Role
  rank?: number
  eventTime?: number
  label?: string
  purpose?: string
  /** The tenant it named. */
  tenant?: string
  pin?: string
  avoid?: string[]
  prefer?: string
  deadline?: number
  /** Earlier waiting requests (lease order) of the roles that compete with this one for an executor. */
  ahead: number
  waitingSince: number
  owner?: string
}

export interface CreatingRequest {
  request: string
  executor: string
  role: Role
  since: number
  owner?: string
}

export interface PendingReloadStatus {
  since: number
  awaiting: string[]
}

export interface Snapshot {
  now: number
  roles: Role[]
  executors: ExecutorStatus[]
  /** Waiting requests, in lease order. */
  queue: QueuedRequest[]
  creating: CreatingRequest[]
  pendingReload?: PendingReloadStatus
  wakeAt?: number
}

export interface ExplainRequest {
  role: Role
  avoid?: string[] | undefined
  prefer?: string | null | undefined
  pin?: string | null | undefined
  /** A waiting request's id: explain that one. */
  request?: string | null | undefined
  /** A hypothetical request's affinity key (`Explanation.affinity` says what it does). */
  affinity?: string | null | undefined
}

export interface ExecutorExplanation {
  id: string
  ok: boolean
  /** Why not: "lacks the role", "busy (2 of 2 slots)" … */
  reasons: string[]
  priority?: number
}

export interface Explanation {
  role: Role
  pick?: string
  canEverServe: boolean
  /** The explained waiting request's purpose, when it has one. */
  purpose?: string
  /** The explained waiting request's tenant (when it names one, or tenants are served fairly). */
  tenant?: string
  /** Its tenant's turn among the role's waiting tenants, in words (`fairness: 'tenants'`). */
  turn?: string
  /** What the request's affinity key does now, in words, when it has one. */
  affinity?: string
  executors: ExecutorExplanation[]
}

export interface Plan {
  added: string[]
  draining: string[]
  leaving: string[]
  resized: { id: string; from: number; to: number; running: number }[]
  changed: string[]
  granted: { request: string; executor: string }[]
  exhausted: string[]
  preflight: string[]
}

// ---- errors ----------------------------------------------------------------------------

/** The core's codes. */
export type CoreErrorCode =
  | 'INVALID_DOCUMENT'
  | 'UNKNOWN_ROLE'
  | 'UNKNOWN_LEASE'
  | 'UNKNOWN_REQUEST'
  | 'DUPLICATE_REQUEST'
  | 'UNKNOWN_EXECUTOR'
  | 'INVALID_INPUT'
  | 'INVALID_OPTIONS'
  | 'INVALID_STATE'
  | 'UNSUPPORTED_VERSION'

/** The driver's codes: how a lease request ends without a lease. */
/** FENCED and INVALID_LOG: a shared roster's (an instance that lost its log; a log that does not start with a genesis). */
export type DriverErrorCode = 'EXHAUSTED' | 'TIMEOUT' | 'ABORT_ERR' | 'CLOSED' | 'PREFLIGHT_FAILED' | 'FENCED' | 'INVALID_LOG' | 'NOT_IN_BUILD'

export type ErrorCode = CoreErrorCode | DriverErrorCode

export declare const ERROR_CODES: readonly ErrorCode[]

/**
 * Every error the package throws is an `Error` with a stable `code`; `instanceof
 * RotaError` holds for all of them (also those built inside the WebAssembly module).
 */
export declare class RotaError extends Error {
  constructor(code: ErrorCode, message: string, fields?: object, options?: { cause?: unknown })
  readonly code: ErrorCode
  /** For INVALID_DOCUMENT: every violation. */
  readonly violations?: Violation[]
  /** For EXHAUSTED and TIMEOUT. */
  readonly role?: Role
  readonly request?: string
  /** For EXHAUSTED (name `RosterExhausted`) and TIMEOUT: one reason per executor ("a: busy (1 of 1 slots)"). */
  readonly reasons?: string[]
  /** For EXHAUSTED and TIMEOUT: the core's `explain` of the request when it ended. */
  readonly explain?: Explanation
  /** For TIMEOUT (name `TimeoutError`): `timeoutMs` (absent for an `AbortSignal.timeout()` signal, then `cause` is its reason). */
  readonly timeoutMs?: number
  /** For TIMEOUT: the request's last waiting report ("a busy; b out until …"). */
  readonly report?: string
}

// ---- the raw policy --------------------------------------------------------------------

/**
 * The core itself: a deterministic, sans-IO state machine. Feed one input at a time;
 * each call returns every output and the next wake-up. Throws RotaError on a rejected
 * input, and then nothing changed.
 */
export declare class Policy {
  constructor(document: RosterDocument, options?: PolicyOptions)
  handle(input: Input): StepResult
  /** The JSON-text step every host shares: `{"outputs":…,"wakeAt":…}` or `{"error":…}`; never throws. */
  handleJson(input: string): string
  /** The last input's time (epoch ms). */
  readonly now: number
  /** The next wake-up (epoch ms), or undefined. */
  readonly wakeAt: number | undefined
  snapshot(): Snapshot
  available(role: Role): number
  slots(role: Role): number
  canEverServe(role: Role, avoid?: string[]): boolean
  /** Slots for `role` on the executors in the round, held or not. */
  capacity(role: Role): number
  /** `'held'` (every executor in the round outside `avoid` is held by coders), `'out'` (none is in the round), or undefined. */
  independenceBlocked(role: Role, avoid?: string[]): 'held' | 'out' | undefined
  /** The effort `role` runs at on `executor` (its `effort`), or undefined when it sets none. */
  effortOf(executor: string, role: Role): Effort | undefined
  explain(request: ExplainRequest): Explanation
  plan(document: RosterDocument): Plan
  exportState(): unknown
  /** A copy in the same state (a checkpoint to step from again), as `importState(exportState())` gives. */
  clone(): Policy
  /** A policy from `exportState()`'s value; throws `INVALID_STATE`. Node only: the browser build throws `NOT_IN_BUILD` (it leaves the import out for its download size; `clone()` is its checkpoint). */
  static importState(state: unknown): Policy
  document(): RosterDocument
  /** The kind a report of `failure` would get with this document's signals (a reset time in its message read at `now`, default the last input's). */
  classify(failure: Failure, now?: number): Classification
  /** The state's hash (FNV-1a 64 of the canonical export, 16 hex digits): replicas that folded the same inputs agree on it. */
  stateHash(): string
  /** Frees the WebAssembly memory now (otherwise the garbage collector does). */
  free(): void
}

// ---- document utilities ----------------------------------------------------------------

/** Every violation of a document (empty when valid). */
export declare function validate(document: unknown, kinds?: string[] | null): Violation[]
/** A warning of `check`, and the warn event a roster announces it under. */
export interface CheckWarning extends Violation {
  /** `literalSecret` (a literal secret in `env`), `unknownField` (an unknown field close to a known one: "did you mean") or `unusedAccount` (an account under `accounts` no executor names). */
  event: 'literalSecret' | 'unknownField' | 'unusedAccount'
}
/** `validate`'s violations and, beside them, warnings of a document that stays valid (a literal secret in `env`, a misspelt field). */
export declare function check(document: unknown, kinds?: string[] | null): { violations: Violation[]; warnings: CheckWarning[] }
/** The document with every `env` value that is not a `${VAR}` reference replaced by "[redacted]". */
export declare function redact<D>(document: D): D
/** A repository roster over the user's: same id replaces, `disabled: true` removes, new ids add. */
export declare function merge(
  user: RosterDocument | null | undefined,
  repo: RosterDocument | null | undefined,
): RosterDocument
/** Only the named executors (a list, or "a,b"); an empty list keeps all. */
export declare function narrow(document: RosterDocument, ids?: string[] | string): RosterDocument
/** Milliseconds, or undefined when unreadable. */
export declare function parseDuration(text: string): number | undefined
export declare function formatDuration(ms: number): string
export declare function defaultOptions(): Required<PolicyOptions>
export declare function defaultRoles(): SeedRole[]
/** The core's crate version. */
export declare const coreVersion: string

// ---- failure classification ------------------------------------------------------------

export declare const FAILURE_KINDS: readonly FailureKind[]

/**
 * The facts of a failed call (an Error and its `cause` chain, a fetch Response, an
 * axios-style error, an @llm4ts/core tagged error: `_tag`, `resetAt` DateTime,
 * `retryAfter` Duration), for the core to classify. No classification here.
 */
export declare function failureFacts(error: unknown, options?: { now?: number }): Failure
/**
 * The core's classification of `failureFacts(error)`; `signals` extends the seed's lists;
 * `resetTime: 'message'` reads a usage limit's reset time from its message at `now`
 * (default the clock's): the answer's `resetAt`.
 */
export declare function classifyFailure(
  error: unknown,
  options?: { now?: number; signals?: Signals; resetTime?: ResetTime },
): Classification
/** The core's probe rule: 2xx is up; redirects are not followed (a 3xx is down). */
export declare function probeIsUp(status: number): boolean
/** `Retry-After` (seconds or HTTP-date) in ms from `now`. */
export declare function parseRetryAfter(value: string | number | null | undefined, now?: number): number | undefined

// ---- the driver ------------------------------------------------------------------------

/**
 * The core's events by name, with their fields. Levels (as of this version): debug —
 * a request's lifecycle (waiting, granted, creatingMachine, cancelled, unavailable,
 * occupied, released) and failureIgnored, exclusionKept, probeIgnored, probeDown,
 * deletingMachine, preflightIgnored; warn — timedOut, exhausted, roleOut,
 * occupiedBeyondCapacity, occupiedUnknown, excluded, provisionPaused, reloadRefused,
 * machineDeleteFailed, startFailed, resetTimeUnread, and waiting for a pin the roster does not declare;
 * info — the rest. `label` is the request's, when it has one.
 */
export interface CoreEventFields {
  unavailable: { request: string; label?: string }
  waiting: {
    request: string
    role: Role
    ahead: number
    queued: number
    positionSource: 'rank' | 'none'
    position?: number
    pin?: string
    label?: string
    purpose?: string
    tenant?: string
  }
  creatingMachine: { request: string; executor: string; role: Role; passed: number; label?: string }
  granted: {
    request: string
    lease: number
    executor: string
    role: Role
    passed: number
    label?: string
    purpose?: string
    /** The tenant its request named. */
    tenant?: string
    clone?: number
    /** How long the request waited, in ms (`leaseEvents: 'typed'`, a request that waited). */
    waitedMs?: number
    /** On the request's `borrow` executor without a slot (present only then). */
    borrowed?: true
    /** On the request's `borrow` executor (not independent), and why. */
    because?: Because
    /** The request's affinity key, when its memory chose this executor again. */
    affinity?: string
  }
  /**
   * `choice: 'leastBusy'` or weights chose `executor` among equal free executors (before
   * its `granted`): its `inUse` of `slots` for `role`, and its `weight` when weights chose.
   */
  chosen: { executor: string; role: Role; inUse: number; slots: number; weight?: number }
  cancelled: { request: string; label?: string }
  /** `reasons`: each executor's state at the deadline ("a busy", "b until …"). */
  timedOut: { request: string; reasons: string[]; label?: string }
  exhausted: { request: string; role: Role; label?: string }
  /** `clone`: the ended lease's, with `clones: 'numbered'`. */
  left: { executor: string; clone?: number }
  /** `role`, `label`: with `leaseEvents: 'typed'` or a purpose; `borrowed`: a borrowed lease's release. */
  released: { executor: string; lease: number; clone?: number; role?: Role; label?: string; purpose?: string; borrowed?: true }
  deletingMachine: { executor: string; hold: unknown; lease: number }
  machineDeleteFailed: { executor: string; hold: unknown; lease?: number; error?: string }
  /** `clone`: the ended lease's, with `clones: 'numbered'`. */
  retired: { executor: string; running: number; slots: number; clone?: number }
  /** `clone`: the occupying work's, with `clones: 'numbered'`. */
  occupied: { executor: string; lease: number; running: number; slots: number; clone?: number }
  occupiedBeyondCapacity: { executor: string; lease: number; running: number; slots: number; clone?: number }
  occupiedUnknown: { executor: string; lease: number }
  failureIgnored: { executor: string }
  /** An `other` failure counted towards `exclusion.consecutiveFailures` (`count` in a row). */
  failureCounted: { executor: string; count: number }
  /** Back on probation: one slot, then `slots` (`recovery: 'probation'`). */
  probationStarted: { executor: string; slots: number }
  /** `lease` was released without a failure: every slot is back. */
  probationEnded: { executor: string; lease: number; slots: number }
  /** A usage limit's message names a reset time the core does not read (`resetTime: 'message'`): the usage cooldown applies. */
  resetTimeUnread: { executor: string; text: string }
  rateLimited: { executor: string; count: number; account?: string }
  /** The floor (`maxExcluded`) kept `executor` in the round: `inRound` of `slots` of `role` were in it. */
  exclusionHeldBack: { executor: string; role: Role; reason: string; inRound: number; slots: number; maxExcluded: number }
  exclusionKept: { executor: string }
  exclusionQueued: { executor: string; thenUntil: number }
  excluded: { executor: string; kind: ExclusionKind; reason: string; until?: number }
  exclusionChanged: { executor: string }
  /** Executors whose exclusions ended together: one event ("a, b back in the round"). */
  back: { executors: string[]; why?: 'expired' | 'health' }
  /** Every executor of `role` is out of the round; `nextBackAt` the earliest timed end, if any. */
  roleOut: { role: Role; executors: string[]; nextBackAt?: number }
  /** A role that had no executor in the round has `executor` back. */
  roleBack: { role: Role; executor: string }
  resumed: { executor: string; why?: 'resumed' }
  probeIgnored: { executor: string }
  probeDown: { executor: string }
  machineDiscarded: { request: string; executor: string }
  provisionPaused: { executor: string; failures: number; message: string; reason: string; retryAt: string }
  machineFailedIgnored: { executor: string; request: string }
  /** A machine creation nobody will answer was dropped (`dropCreation`, or its owner expired): no pause. */
  creationDropped: { executor: string; request: string; owner?: string }
  /** `expireOwner`: how many requests were cancelled and creations dropped, which leases were released and kept. */
  ownerExpired: { owner: string; cancelled: number; dropped: number; released: number[]; kept: number[] }
  provisionResumed: { executor: string; failures: number }
  reloadSuperseded: Record<string, never>
  preflighting: { executors: string[] }
  reloadRefused: { executor: string; error: string }
  preflightIgnored: { executor: string; ok: boolean }
  started: Record<string, never>
  startFailed: { executor: string; error: string }
  added: { executor: string; slots: number; running?: number }
  removed: { executor: string; running: number }
  resized: { executor: string; slotsBefore: number; slotsAfter: number; running: number }
  reloaded: Record<string, never>
}

/** The driver's own events (state store, probes, machines, watching): all warn but probeFailed (debug) and stateFileRecovered (info). */
export interface DriverEventFields {
  /** `executors` named ids the roster does not have: ignored (as the seed does). */
  narrowIgnored: { executors: string[] }
  /** A state file (or storage key) rota cannot parse, set aside under `movedTo`; never overwritten. */
  stateFileCorrupt: { path?: string; key?: string; reason?: string; error?: string; movedTo?: string }
  /** A state file rota cannot read at all (permissions, a directory): left alone, writes kept and retried. */
  stateFileUnreadable: { path?: string; error: string; retryInMs: number }
  /** A failed write: the changes are kept and retried after `retryInMs`. */
  stateFileWriteFailed: { path?: string; error: string; retryInMs: number }
  /** The kept changes were written after `attempts` failed attempts. */
  stateFileRecovered: { path?: string; attempts: number }
  probeFailed: { executor: string; url: string }
  machineDeleteFailed: { executor: string; hold: unknown }
  machineNotDeleted: { executor: string; hold: unknown }
  inputRejected: { input: InputType; code?: ErrorCode }
  /** An output of a type this driver does not know (a core newer than the driver): not acted on. */
  unknownOutput: { type: unknown }
  reloadFailed: { paths: string[]; error: string; violations?: Violation[] }
  watchFailed: { paths: string[]; error: string }
  // a shared roster's (see SharedRoster)
  /** A joining instance's own document differs from the log's: it folds the log's. */
  sharedDocumentDiffers: { roster: string }
  /** The instance fenced itself (warn): it grants nothing until it rejoins. */
  fenced: { reason: string; since: number }
  rejoined: { fencedSince?: number; instance: string }
  /** It took the leader lease (info), or lost it. */
  leader: { epoch: number }
  leaderLost: { epoch: number | null }
  /** As leader, it expired an instance whose heartbeat lapsed (info). */
  instanceExpired: { instance: string }
  snapshotWritten: { seq: number }
  snapshotFailed: { error: string }
  heartbeatFailed: Record<string, never>
  rejoinFailed: Record<string, never>
  listenLost: Record<string, never>
}

export type CoreEventName = keyof CoreEventFields
export type EventName = CoreEventName | keyof DriverEventFields
export type EventFields<N extends EventName> = N extends CoreEventName
  ? CoreEventFields[N]
  : N extends keyof DriverEventFields
    ? DriverEventFields[N]
    : never

/** One of the core's events as its `event` output carries it: narrow by `name`. */
export type CoreEvent = {
  [N in CoreEventName]: { level: Level; name: N; message: string; fields: CoreEventFields[N] }
}[CoreEventName]

/** An event: every decision of the core, and the driver's own. Narrow by `name` for typed `fields`. */
export type RosterEvent = {
  [N in EventName]: {
    level: Level
    name: N
    message: string
    fields: EventFields<N>
    /** Epoch ms (a shared roster's: the log's time of the entry, or the database clock). */
    time: number
    /** A shared roster's: the log entry the core decided it on. */
    seq?: number
    /** A shared roster's own events: the instance that emits them. */
    instance?: string
  }
}[EventName]

export interface StoreContext {
  now: number
  event(level: Level, name: string, message: string, fields?: Record<string, unknown>): void
}

/** Replace the entries of `ids` with `state.exclusions`, keeping everyone else's. */
export interface StateUpdate {
  ids: string[]
  state: PersistedState
}

/** Where exclusions that outlive a run are kept. */
export interface StateStore {
  load(context: StoreContext): Promise<PersistedState | undefined | null>
  save(update: StateUpdate, context: StoreContext): Promise<void>
  /** The loaded state was not one rota reads: set it aside and report it. */
  discard?(reason: string, context: StoreContext): Promise<void>
}

export interface ProbeContext {
  signal: AbortSignal
  executor: string
  timeoutMs: number
}

/** Answers whether a health URL is up. The default fetches it and checks for 2xx. */
export type ProbeFunction = (url: string, context: ProbeContext) => Promise<boolean>

export interface MachineCallbacks {
  /** Makes a machine for a lease on a provisioned executor; returns its hold (any JSON). */
  create?(request: {
    executor: string
    request: string
    role: Role | undefined
    spec: ExecutorSpec
    signal: AbortSignal
  }): Promise<unknown> | unknown
  /**
   * Deletes a machine when its lease ends. The lease's slot frees when this settles
   * (the scheduler seed deletes the machine before the slot frees); a throw frees it
   * too, with a `machineDeleteFailed` warning naming the machine for a sweep.
   */
  delete?(machine: { executor: string; hold: unknown; spec: ExecutorSpec }): Promise<void> | void
}

/**
 * Checks an executor: every one before `Roster.create` resolves (a failure rejects it
 * PREFLIGHT_FAILED), and those a reload adds or grows before it applies (a failure
 * refuses the reload). False or a throw fails it. Given one, the driver sets the core's
 * `preflight` option (explicit `options.preflight`/`preflightReloads` still win).
 */
export type PreflightFunction = (request: {
  executor: string
  spec: ExecutorSpec
  signal: AbortSignal
}) => Promise<boolean | void> | boolean | void

/** What `roster` needs of an OpenTelemetry Meter (`metrics.getMeter('rota')` of `@opentelemetry/api`). */
export interface MeterLike {
  createCounter(name: string, options?: object): { add(value: number, attributes?: Record<string, string>): void }
  createHistogram(name: string, options?: object): { record(value: number, attributes?: Record<string, string>): void }
  createObservableGauge(
    name: string,
    options?: object,
  ): {
    addCallback(callback: (result: { observe(value: number, attributes?: Record<string, string>): void }) => void): void
    removeCallback(callback: (result: { observe(value: number, attributes?: Record<string, string>): void }) => void): void
  }
}

export interface RosterOptions {
  /** The (user's) roster document. */
  document?: RosterDocument | undefined
  /**
   * A roster file (Node): JSON, or YAML for `.yaml`/`.yml`. A missing file counts as
   * absent (with `repoRosterPath` the other file may be the roster); when neither
   * `document` nor any file gives a roster, `create` rejects INVALID_DOCUMENT.
   */
  rosterPath?: string | undefined
  /** A repository roster merged over the user's. */
  repoDocument?: RosterDocument | undefined
  /** A repository roster file (Node). */
  repoRosterPath?: string | undefined
  /** Only these executors (`--executors a,b`); empty keeps all. */
  executors?: string[] | string | undefined
  /** The state file (Node): exclusions that outlive a run, shared with other rosters. */
  statePath?: string | undefined
  /** A state adapter (the browser's way, or any custom store). */
  state?: StateStore | undefined
  /** How a failed state write is retried: after `firstMs` (500), doubling up to `maxMs` (30 000). */
  stateRetry?: { firstMs?: number | undefined; maxMs?: number | undefined } | undefined
  /** The health probe; `false`: no probing (health exclusions wait out the outage cooldown). */
  probe?: ProbeFunction | false | undefined
  /** Each probe's timeout (default 5000). */
  probeTimeoutMs?: number | undefined
  machines?: MachineCallbacks | undefined
  preflight?: PreflightFunction | undefined
  onEvent?: ((event: RosterEvent) => void) | undefined
  /** Reload when `rosterPath` or `repoRosterPath` changes (Node). A bad edit is a `reloadFailed` event; the roster runs on. */
  watch?: boolean | undefined
  /** Record the metrics through this OpenTelemetry Meter too (`roster.metrics()` gives Prometheus text either way). */
  meter?: MeterLike | undefined
  /** The clock: epoch ms (default Date.now). Tests pass a virtual clock and call `tick()`. Not with `scheduler`. */
  now?: (() => number) | undefined
  /**
   * The clock and the timers of the roster (default: the platform's `Date.now` and
   * `setTimeout`): the wake-up timer (exclusion ends, deadlines, probe times), the state
   * writer's retry and each probe's timeout go through it. rota/effect passes Effect's
   * Clock and sleeps. A scheduler without the three functions is INVALID_INPUT.
   */
  scheduler?: RosterScheduler | undefined
  /** The core's options. */
  options?: PolicyOptions | undefined
}

/**
 * `Roster.create({ shared })`: one roster shared by several processes through one log on
 * PostgreSQL (sql/PROTOCOL.md). Give exactly one of `connectionString` and `pool`.
 */
export interface SharedOptions {
  /** A PostgreSQL connection string (the roster makes and ends its own pool of the `pg` package). */
  connectionString?: string | undefined
  /** A `pg` Pool of your own (used as it is, never ended by the roster). */
  pool?: unknown
  /** The roster's name: the instances that give the same name share one log. */
  roster: string
  /** This process's name in its instance ids (`<name>:<8 hex>`); default `<hostname>-<pid>`. */
  name?: string | undefined
  /** Heartbeat TTL (default 10 000): heartbeats every ttlMs/4; fenced after ttlMs without one; expired by the leader after ttlMs of silence. */
  ttlMs?: number | undefined
  /** The leader lease's TTL (default ttlMs), renewed every leaderTtlMs/3. */
  leaderTtlMs?: number | undefined
  /** How often the leader looks for expired instances (default 250). */
  sweepMs?: number | undefined
  /** The leader snapshots every this many entries and compacts through the previous snapshot (default 1000). */
  snapshotEvery?: number | undefined
  /** The readers' poll, the backstop of LISTEN/NOTIFY (default 1000). */
  pollMs?: number | undefined
}

/**
 * A roster's clock and timers (`RosterOptions.scheduler`). `setTimer` must not call `fn`
 * before it returns; a handle may be anything `clearTimer` takes.
 */
export interface RosterScheduler<Handle = unknown> {
  /** Whole epoch milliseconds. */
  now(): number
  /** Calls `fn` once at `at` (epoch ms) or later; returns its handle. */
  setTimer(at: number, fn: () => void): Handle
  /** Cancels a timer not yet fired (a fired or cleared one: nothing). */
  clearTimer(handle: Handle): void
}

/** The options of a shared roster: the embedded roster's, minus what the log replaces. */
export type SharedRosterOptions = Omit<RosterOptions, 'statePath' | 'state' | 'stateRetry' | 'preflight' | 'watch' | 'now' | 'scheduler'> & {
  shared: SharedOptions
}

export interface LeaseOptions {
  /** Executors this lease must not use. */
  avoid?: string[] | string | undefined
  /** Taken first while free. */
  prefer?: string | undefined
  /** The one executor that must serve it (a reattached attempt). */
  pin?: string | undefined
  /** Pipeline position: lower first; unranked after ranked. */
  rank?: number | undefined
  /** When the work arrived: earlier first among equal ranks. */
  eventTime?: number | Date | undefined
  /** Who asks, for events. */
  label?: string | undefined
  /** What the call is for beyond its role (a review lens), for the lease and its events. */
  purpose?: string | undefined
  /**
   * Who the work is for (a team, a customer; at most 1,024 bytes): with the document's
   * `fairness: 'tenants'`, a role's waiting requests are served across tenants by their
   * weights. None: the tenant `default`.
   */
  tenant?: string | undefined
  /**
   * The executor holding this context's coder (its id, or its entry): when no other
   * executor can serve the request (`because`: nobody / held / out), it takes that
   * one's free slot, else that one without a slot (`borrowed`). `tryLease` never borrows.
   */
  borrow?: string | ExecutorSpec | undefined
  /**
   * A cache key (a prompt or session; non-empty, at most 1,024 bytes): the roster
   * remembers the executor of the key's last grant for the document's `affinityTtl` of
   * idleness (default 10 minutes) and prefers it while it is free, in the round and no
   * worse in priority than the best free executor; otherwise the usual choice applies
   * and the key moves to the executor it gets. A waiting lease gets the same
   * preference when slots free up.
   */
  affinity?: string | undefined
  /**
   * Aborting cancels the request; the promise rejects with `signal.reason` (as `fetch`
   * does), or TIMEOUT for an `AbortSignal.timeout()` signal. A waiting lease with a
   * signal keeps a Node process alive.
   */
  signal?: AbortSignal | undefined
  /** Give up after this long; the promise rejects with a TimeoutError (code TIMEOUT). */
  timeoutMs?: number | undefined
  /** A request id of your own (default: one the driver assigns). */
  id?: string | undefined
}

/** A granted lease. Release it once (more is harmless), or let `using` do it. */
export declare class Lease<R extends string = Role> implements Disposable, AsyncDisposable {
  private constructor()
  readonly id: number
  readonly request: string
  /** The executor's entry in the running roster document. */
  readonly executor: ExecutorSpec
  readonly executorId: string
  readonly role: R
  /** The effort its role runs at on its executor (the executor's `effort`), when it sets one. */
  readonly effort?: Effort
  /** The machine's hold, for a provisioned executor. */
  readonly hold?: unknown
  readonly passed: number
  readonly occupied: boolean
  /** Its clone number on the executor, when the document numbers clones (`clones: 'numbered'`). */
  readonly clone?: number
  /** What the call is for, as its request said. */
  readonly purpose?: string
  /** On the request's `borrow` executor without a slot (present only then). */
  readonly borrowed?: true
  /** On the request's `borrow` executor, and why (present only then). */
  readonly because?: Because
  /** Epoch ms. */
  readonly grantedAt: number
  readonly released: boolean
  release(): void
  [Symbol.dispose](): void
  [Symbol.asyncDispose](): Promise<void>
}

export interface ExcludeOptions {
  kind?: ExclusionKind | undefined
  reason?: string | undefined
  until?: number | Date | undefined
}

export type RosterEventName = 'event' | 'output'

export interface UseOptions extends LeaseOptions {
  /** Report what `fn` throws (`report(executorId, error)`) before the lease is released (default true). */
  report?: boolean | undefined
}

/** `roster.counts(role)`: waiting requests and held leases of one role. */
export interface RoleCounts {
  waiting: number
  leased: number
}

/**
 * The driver. `R` is the roles a lease may ask for: narrowed from a literal `document`
 * by `create`, or given (`Roster.create<'coder' | 'judge'>({ rosterPath })`).
 */
/** The queries both rosters answer from their policy (they change nothing). */
export interface RosterQueries<R extends string = Role> {
  snapshot(): Snapshot
  available(role: R): number
  slots(role: R): number
  canEverServe(role: R, avoid?: string[]): boolean
  /** Slots for `role` on the executors in the round, held or not (a lease does not lower it; an exclusion does). */
  capacity(role: R): number
  /** Resolves with `capacity(role)` once it is no longer `from` (at once if it already differs); rejects CLOSED on close. */
  capacityChanged(role: R, from: number): Promise<number>
  /** Why a lease for `role` outside `avoid` cannot be served by a call ending: `'held'`, `'out'`, or undefined. */
  independenceBlocked(role: R, avoid?: string[]): 'held' | 'out' | undefined
  /** Whether `independenceBlocked(role, avoid)` is `'held'`. */
  coderHeld(role: R, avoid?: string[]): boolean
  /** The effort `role` runs at on `executor` (its `effort`), or undefined when it sets none. */
  effortOf(executor: string, role: R): Effort | undefined
  explain(request: (ExplainRequest & { role: R }) | R): Explanation
  plan(document: RosterDocument): Plan
  readonly document: RosterDocument
  readonly executors: ExecutorSpec[]
  readonly closed: boolean
}

export interface Roster<R extends string = Role> extends RosterQueries<R> {}
export declare class Roster<R extends string = Role> implements AsyncDisposable {
  private constructor()
  /** A shared roster (see SharedRoster): its calls that change state return Promises. */
  static create<const D extends RosterDocument>(options: SharedRosterOptions & { document: D }): Promise<SharedRoster<RolesOf<D>>>
  static create<R extends string = Role>(options: SharedRosterOptions): Promise<SharedRoster<R>>
  static create<const D extends RosterDocument>(options: RosterOptions & { document: D }): Promise<Roster<RolesOf<D>>>
  static create<R extends string = Role>(options: RosterOptions): Promise<Roster<R>>
  /** Waits for a slot: rejects EXHAUSTED, TIMEOUT, the signal's reason, CLOSED, or a core code. */
  lease(role: R, options?: LeaseOptions): Promise<Lease<R>>
  /** A slot now, or undefined. */
  tryLease(role: R, options?: Omit<LeaseOptions, 'timeoutMs'>): Promise<Lease<R> | undefined>
  /** Leases, runs `fn(lease)`, reports what it throws (and rethrows it), releases; resolves with `fn`'s result. */
  use<T>(role: R, fn: (lease: Lease<R>) => T | PromiseLike<T>, options?: UseOptions): Promise<T>
  /** Records work already running on an executor after a restart. */
  occupy(executor: string, options?: { role?: R; hold?: unknown; id?: string }): Lease<R> | undefined
  /** Reports a failed call (a real error, or a `Failure`); returns the exclusion it earned. An unknown `kind` throws INVALID_INPUT. */
  /** The exclusion the report put in force, in the seed's shape; undefined when it earned none or a stronger one stays. */
  report(executor: string, error: unknown): Exclusion | undefined
  /** The kind the core gives `error` with this roster's signals; reports nothing. */
  classify(error: unknown): Classification
  exclude(executor: string, options?: ExcludeOptions): void
  exclude(exclusion: { id: string } & ExcludeOptions): void
  resume(executor: string): void
  /** Replaces the roster live (or re-reads its files); rejects INVALID_DOCUMENT and changes nothing. */
  reload(document?: RosterDocument): Promise<void>
  /** Lease requests waiting in the queue, all roles (no snapshot taken). */
  readonly waiting: number
  /** Leases held, all roles. */
  readonly leased: number
  /** Waiting requests and held leases of one role. */
  counts(role: R): RoleCounts
  /**
   * Prometheus text: rota_leases_granted_total, rota_lease_wait_seconds (histogram),
   * rota_exclusions_total{kind}, rota_probes_total, rota_queue_length{role},
   * rota_state_writes_total.
   */
  metrics(): string
  /** Feeds a tick at `now()` (the timer does this; virtual-time tests call it). */
  tick(): void
  /** Resolves when no probe, machine callback or state write is in flight. */
  idle(): Promise<void>
  /**
   * Resolves once every state write decided so far is in the store (a failed one is
   * written at once); rejects with the store's error when it fails (retried as before).
   */
  flush(): Promise<void>
  close(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
  /** A listener that throws is thrown again on a fresh task (an uncaught error), after the roster's step is done. */
  on(name: 'event', listener: (event: RosterEvent) => void): this
  on(name: 'output', listener: (output: Output) => void): this
  off(name: 'event', listener: (event: RosterEvent) => void): this
  off(name: 'output', listener: (output: Output) => void): this
  once(name: 'event', listener: (event: RosterEvent) => void): this
  once(name: 'output', listener: (output: Output) => void): this
}

/**
 * One instance of a roster shared by several processes (`Roster.create({ shared })`,
 * Node only): a replica of one log on PostgreSQL. The embedded roster's API, where the
 * calls that change state append to the log and settle once it is folded (so `occupy`,
 * `report`, `exclude`, `resume` return Promises), and queries answer from the replica.
 * A fenced instance (it lost the log) rejects every call with FENCED until it rejoins.
 */
/** A shared roster's queries answer from its replica, as folded so far. */
export interface SharedRoster<R extends string = Role> extends RosterQueries<R> {}
export declare class SharedRoster<R extends string = Role> implements AsyncDisposable {
  private constructor()
  /** Waits for a slot: rejects EXHAUSTED, TIMEOUT (on the log's time), the signal's reason, CLOSED, FENCED, or a core code. */
  lease(role: R, options?: LeaseOptions): Promise<Lease<R>>
  tryLease(role: R, options?: Omit<LeaseOptions, 'timeoutMs'>): Promise<Lease<R> | undefined>
  use<T>(role: R, fn: (lease: Lease<R>) => T | PromiseLike<T>, options?: UseOptions): Promise<T>
  occupy(executor: string, options?: { role?: R; hold?: unknown; id?: string }): Promise<Lease<R>>
  /** Resolves with the exclusion the report put in force (on every instance), or undefined. */
  report(executor: string, error: unknown): Promise<Exclusion | undefined>
  classify(error: unknown): Classification
  exclude(executor: string, options?: ExcludeOptions): Promise<void>
  exclude(exclusion: { id: string } & ExcludeOptions): Promise<void>
  resume(executor: string): Promise<void>
  /** Replaces the roster for every instance. */
  reload(document?: RosterDocument): Promise<void>
  /** This instance's requests waiting. */
  readonly waiting: number
  /** Leases this instance holds. */
  readonly leased: number
  counts(role: R): RoleCounts
  /** This instance's metrics, as Prometheus text. */
  metrics(): string
  /** This incarnation's id, `<name>:<8 hex>`: the owner of its requests and leases (a new one after the log expired it). */
  readonly instance: string
  /** Whether it holds the leader lease (ticks, probes, expiries, snapshots). */
  readonly isLeader: boolean
  /** The leader epoch it holds, or null. */
  readonly leaderEpoch: number | null
  readonly fenced: boolean
  /** Why and since when (epoch ms) it is fenced, or null. */
  readonly fence: { reason: string; since: number } | null
  /** The seq of the last log entry folded. */
  readonly foldedSeq: number
  /** The replica's state hash (16 hex digits): every replica at the same foldedSeq has the same. */
  stateHash(): string
  idle(): Promise<void>
  /** Cancels its waiting requests, steps down, appends its own expiry (its leases are released), forgets its heartbeat. */
  close(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
  on(name: 'event', listener: (event: RosterEvent) => void): this
  on(name: 'output', listener: (output: Output & { seq: number }) => void): this
  off(name: 'event', listener: (event: RosterEvent) => void): this
  off(name: 'output', listener: (output: Output & { seq: number }) => void): this
  once(name: 'event', listener: (event: RosterEvent) => void): this
  once(name: 'output', listener: (output: Output & { seq: number }) => void): this
}

// ---- state adapters --------------------------------------------------------------------

/** State in memory (`initial`: a state file's text or value, in either envelope). */
export declare function memoryState(initial?: PersistedState | string | object): StateStore & {
  readonly value: PersistedState | undefined
  /** What a state file would hold (the seed's envelope). */
  readonly text: string | undefined
}
/** What `webStorageState` needs of a Web Storage (localStorage, sessionStorage). */
export interface WebStorage {
  getItem(key: string): string | null
  setItem(key: string, value: string): void
  removeItem(key: string): void
}

/** State in a Web Storage entry (localStorage). */
export declare function webStorageState(storage: WebStorage, key?: string): StateStore
/** State in a file: locked, read, merged by the core's rule, atomically written (Node only; `statePath` uses it). */
export declare function fileStateStore(path: string): StateStore & { readonly path: string }

/** The core's state-file rule (`rota_core::state_file`); errors are `RotaError`s (`STATE_FILE_CORRUPT`, `INVALID_INPUT`). */
export declare const stateFile: {
  /** A request's JSON text in, the core's answer text out. */
  json(request: string): string
  /** Either envelope: the seed's `{ schemaVersion: 1, value: { exclusions } }` or `{ version: 1, exclusions }`. */
  parse(text: string): { format: 'seed' | 'rota'; exclusions: Exclusion[] }
  /** A `restore` input's `state`: the file's live entries at `now`. */
  restore(text: string, now: number): PersistedState
  /** The text to write: `existing` (`null`: none) after the persists, in the seed's envelope byte for byte. */
  merge(existing: string | null, persists: StateUpdate[], now: number): string
  render(exclusions: Exclusion[]): string
  /** Where a corrupt file is set aside: `<name>.corrupt-<ISO time without colons>[-attempt]`. */
  asideName(name: string, now: number, attempt?: number): string
}
