// rota/effect: the roster seed's surface (@llm4ts/flow 2.9.1, Roster.ts) over rota's
// Node roster, for Effect v4 (`effect` >= 4.0.0 < 5, an optional peer dependency).

import type { YieldableError } from 'effect/Cause'
import type * as Context from 'effect/Context'
import type * as Duration from 'effect/Duration'
import type * as Effect from 'effect/Effect'
import type * as Layer from 'effect/Layer'
import * as Schema from 'effect/Schema'
import type * as Scope from 'effect/Scope'
import type { Roster as NodeRoster, RotaError } from './index.js'

export declare const Role: Schema.Literals<readonly ['planner', 'coder', 'reviewer', 'judge', 'verifier']>
export type Role = typeof Role.Type
export declare const roles: ReadonlyArray<Role>

declare const Cooldown_base: Schema.Class<
  Cooldown,
  Schema.Struct<{
    readonly usageLimit: Schema.optionalKey<Schema.String>
    readonly rateLimit: Schema.optionalKey<Schema.String>
    readonly outage: Schema.optionalKey<Schema.String>
  }>,
  {}
>
/** How long each exclusion lasts, as duration strings ("30 minutes"). */
export declare class Cooldown extends Cooldown_base {}

declare const ExecutorSpec_base: Schema.Class<
  ExecutorSpec,
  Schema.Struct<{
    readonly id: Schema.String
    readonly harness: Schema.String
    readonly model: Schema.optionalKey<Schema.String>
    readonly flags: Schema.optionalKey<Schema.$Record<Schema.String, Schema.String>>
    readonly env: Schema.optionalKey<Schema.$Record<Schema.String, Schema.String>>
    readonly baseUrl: Schema.optionalKey<Schema.String>
    readonly roles: Schema.$Array<Schema.String>
    readonly slots: Schema.optionalKey<Schema.Number>
    readonly coderSlots: Schema.optionalKey<Schema.Number>
    readonly priority: Schema.optionalKey<Schema.Union<readonly [Schema.Number, Schema.$Record<Schema.String, Schema.Number>]>>
    readonly health: Schema.optionalKey<Schema.String>
    readonly cooldown: Schema.optionalKey<typeof Cooldown>
    readonly disabled: Schema.optionalKey<Schema.Boolean>
    readonly effort: Schema.optionalKey<Schema.Union<readonly [typeof Effort, Schema.$Record<Schema.String, typeof Effort>]>>
    readonly recovery: Schema.optionalKey<
      Schema.Union<
        readonly [
          typeof RecoveryMode,
          Schema.Struct<{
            readonly mode: Schema.optionalKey<typeof RecoveryMode>
            readonly maxBackoff: Schema.optionalKey<Schema.Number>
            readonly quietPeriod: Schema.optionalKey<Schema.String>
          }>,
        ]
      >
    >
    readonly exclusion: Schema.optionalKey<Schema.Struct<{ readonly consecutiveFailures: Schema.optionalKey<Schema.Number> }>>
    readonly account: Schema.optionalKey<Schema.String>
    readonly budget: Schema.optionalKey<typeof Budget>
  }>,
  {}
>
/** How an executor returns after a cooldown (rota's `recovery`). */
export declare const RecoveryMode: Schema.Literals<readonly ['all', 'probation']>
/** A budget (rota's): `{ requestsPerMinute }` or `{ requests, per | perMs }`, as written; the core validates it. */
export declare const Budget: Schema.$Record<Schema.String, Schema.Union<readonly [Schema.Number, Schema.String]>>
/** A reasoning effort (the upstream's `Effort`). */
export declare const Effort: Schema.Literals<readonly ['low', 'medium', 'high', 'max']>
/** One executor: a harness and a model, the roles it takes, its slots and priorities. */
export declare class ExecutorSpec extends ExecutorSpec_base {}

declare const RosterDocument_base: Schema.Class<
  RosterDocument,
  Schema.Struct<{
    readonly executors: Schema.$Array<typeof ExecutorSpec>
    readonly accounts: Schema.optionalKey<Schema.$Record<Schema.String, Schema.Struct<{ readonly budget: Schema.optionalKey<typeof Budget> }>>>
  }>,
  {}
>
export declare class RosterDocument extends RosterDocument_base {}

export declare const ExclusionKind: Schema.Literals<readonly ['until', 'health', 'run', 'manual']>
export type ExclusionKind = typeof ExclusionKind.Type

declare const Exclusion_base: Schema.Class<
  Exclusion,
  Schema.Struct<{
    readonly id: Schema.String
    readonly reason: Schema.String
    readonly kind: typeof ExclusionKind
    readonly until: Schema.optionalKey<Schema.Number>
  }>,
  {}
>
/** Why an executor is out of the round, and until when (epoch ms). */
export declare class Exclusion extends Exclusion_base {}

export declare const RosterStateVersion: 1

declare const RosterState_base: Schema.Class<
  RosterState,
  Schema.Struct<{ readonly exclusions: Schema.$Array<typeof Exclusion> }>,
  {}
>
export declare class RosterState extends RosterState_base {}

/** No executor outside `avoid` can ever take `role`; `reasons`, one per executor. `catchTag('RosterExhausted', …)`. */
export interface RosterExhausted extends YieldableError {
  readonly _tag: 'RosterExhausted'
  readonly role: string
  readonly reasons: ReadonlyArray<string>
}
export declare const RosterExhausted: {
  new (fields: { readonly role: string; readonly reasons: ReadonlyArray<string> }): RosterExhausted
  make(fields: { readonly role: string; readonly reasons: ReadonlyArray<string> }): RosterExhausted
}

/** The seed's `Info` event (tag `Info`, `message`): what the roster publishes. */
export declare class Info {
  readonly _tag: 'Info'
  readonly message: string
  constructor(fields: { readonly message: string })
  static make(fields: { readonly message: string }): Info
}

// ---- helpers: each answered by rota's core ----------------------------------------

export declare const isRole: (value: string) => value is Role
export declare const rolesOf: (spec: ExecutorSpec) => ReadonlyArray<Role>
export declare const hasRole: (spec: ExecutorSpec, role: Role) => boolean
/** Throws rota's INVALID_DOCUMENT for a spec the core refuses. */
export declare const slotsOf: (spec: ExecutorSpec) => number
export declare const coderSlotsOf: (spec: ExecutorSpec) => number
export declare const priorityOf: (spec: ExecutorSpec, role: Role) => number
/** The effort `role` runs at on the executor (the core resolves `effort`); undefined when it sets none. */
export declare const effortOf: (spec: ExecutorSpec, role: Role) => 'low' | 'medium' | 'high' | 'max' | undefined
export declare const parseDuration: (text: string) => Duration.Duration | undefined
export declare const usageLimitCooldown: (spec: ExecutorSpec) => Duration.Duration
export declare const rateLimitCooldown: (spec: ExecutorSpec) => Duration.Duration
export declare const outageCooldown: (spec: ExecutorSpec) => Duration.Duration
export declare const rateLimitWindow: Duration.Duration
export declare const rateLimitsToExclude: number
export declare const healthProbeInterval: Duration.Duration
export declare const rosterViolations: (document: RosterDocument) => ReadonlyArray<string>
export declare const mergeRosterDocuments: (user: RosterDocument | undefined, repo: RosterDocument | undefined) => RosterDocument
export declare const narrowRoster: (document: RosterDocument, ids: ReadonlyArray<string>) => RosterDocument
export declare const isModelUnavailableMessage: (message: string) => boolean
/** The failure facts of `error` (an @llm4ts/core LlmError, or any error) → the exclusion the core gives it, or none. */
export declare const exclusionFor: (error: { readonly _tag?: string; readonly message: string }, spec: ExecutorSpec, now: number, recentRateLimits: number) => Exclusion | undefined
export declare const describeExclusion: (exclusion: Exclusion) => string

// ---- persisted state -----------------------------------------------------------------

/** The seed's `PlainFileStoreShape` (@llm4ts/flow/Persistence): the calls the state store uses. */
export interface PlainFileStoreShape<E = unknown> {
  readonly read: (path: string) => Effect.Effect<string | undefined, E>
  readonly writeAtomic: (path: string, contents: string) => Effect.Effect<void, E>
  readonly remove: (path: string) => Effect.Effect<void, E>
}

export interface RosterStateStoreShape<E = unknown> {
  readonly load: Effect.Effect<ReadonlyArray<Exclusion>, E>
  /** Replaces the entries of `ids` with `exclusions`, keeping everyone else's. */
  readonly save: (ids: ReadonlyArray<string>, exclusions: ReadonlyArray<Exclusion>) => Effect.Effect<void, E>
}

/** The seed's state file (`{ schemaVersion: 1, value: { exclusions } }`) over `files`, by the core's rule. */
export declare const makeRosterStateStore: <E>(files: PlainFileStoreShape<E>, path: string) => RosterStateStoreShape<E | RotaError>

// ---- the roster ---------------------------------------------------------------------

export interface Lease {
  readonly executor: ExecutorSpec
  readonly role: Role
  /** Frees the slot; idempotent, and also run when the lease's scope closes. */
  readonly release: Effect.Effect<void>
  /** What the call is for (the upstream's `purpose`), when its request said. */
  readonly purpose?: string
  /** Took no slot: the context's own coder executor serves the call (`LeaseOptions.borrow`); present only then. */
  readonly borrowed?: true
  /** Set when the executor is the context's own coder (not independent), and why. */
  readonly because?: 'nobody' | 'held' | 'out'
}

export interface LeaseOptions {
  readonly avoid?: ReadonlyArray<string> | undefined
  readonly prefer?: string | undefined
  readonly label?: string | undefined
  /** What the call is for beyond its role (the upstream's, a review lens): in the granted line. */
  readonly purpose?: string | undefined
  /** Who the work is for (rota's `tenant`): with `fairness: 'tenants'`, its turn among the tenants. */
  readonly tenant?: string | undefined
  /** The executor holding this context's coder (its entry or id), taken when independence cannot be had; `tryLease` never borrows. */
  readonly borrow?: ExecutorSpec | string | undefined
  /** rota's affinity key (a prompt or session cache): the executor of the key's last grant is preferred while free, in the round and no worse in priority (the document's `affinityTtl`, default 10 minutes idle). */
  readonly affinity?: string | undefined
}

export interface ExecutorStatus {
  readonly executor: ExecutorSpec
  readonly busy: number
  readonly busyCoders: number
  readonly exclusion?: Exclusion
}

/** A failure as the seed's `report` takes it (@llm4ts/core's `LlmError`, or any error). */
export interface ReportedError {
  readonly _tag?: string
  readonly message: string
}

export interface RosterShape {
  readonly executors: ReadonlyArray<ExecutorSpec>
  /** Waits for a slot; fails `RosterExhausted` when none can ever come. Interrupting the wait cancels it. */
  readonly lease: (role: Role, options?: LeaseOptions) => Effect.Effect<Lease, RosterExhausted, Scope.Scope>
  /** A slot now, or `undefined`. */
  readonly tryLease: (role: Role, options?: LeaseOptions) => Effect.Effect<Lease | undefined, never, Scope.Scope>
  readonly canEverServe: (role: Role, avoid?: ReadonlyArray<string>) => Effect.Effect<boolean>
  readonly available: (role: Role) => Effect.Effect<number>
  readonly slots: (role: Role) => number
  /** Slots for `role` on the executors in the round, held or not. */
  readonly capacity: (role: Role) => Effect.Effect<number>
  /** Waits until `capacity(role)` is no longer `from` and returns it (at once when it already differs). */
  readonly capacityChanged: (role: Role, from: number) => Effect.Effect<number>
  /** Whether every executor in the round that takes `role`, outside `avoid`, is held by coders (and there is one). */
  readonly coderHeld: (role: Role, avoid?: ReadonlyArray<string>) => Effect.Effect<boolean>
  /** `held`, `out`, or undefined when a call ending can free a slot for `role` outside `avoid`. */
  readonly independenceBlocked: (role: Role, avoid?: ReadonlyArray<string>) => Effect.Effect<'held' | 'out' | undefined>
  /** Classifies a failure (the core); returns the exclusion in force after it, if it earned one. An unknown id: a logged warning, undefined. */
  readonly report: (id: string, error: ReportedError) => Effect.Effect<Exclusion | undefined>
  readonly exclude: (exclusion: Exclusion) => Effect.Effect<void>
  readonly resume: (id: string) => Effect.Effect<void>
  readonly snapshot: Effect.Effect<ReadonlyArray<ExecutorStatus>>
  /** rota's Node roster underneath (explain, counts, metrics …). */
  readonly roster: NodeRoster
}

/** The seed's `FlowEventsShape`, as far as the roster uses it. */
export interface RosterEvents {
  readonly publish: (event: Info) => Effect.Effect<void>
}

export interface RosterOptions {
  readonly executors: ReadonlyArray<ExecutorSpec>
  readonly events: RosterEvents
  /** Exclusions that outlive a run; omit to keep them in memory. */
  readonly state?: RosterStateStoreShape<any> | undefined
  /** Answers whether a health URL is up; omit and `health` exclusions wait out the outage cooldown. */
  readonly probe?: ((url: string) => Effect.Effect<boolean>) | undefined
}

/** The roster over rota's Node roster; inside a Scope it closes with the Scope. */
export declare const makeRoster: (options: RosterOptions) => Effect.Effect<RosterShape, RotaError>

// ---- the scheduler seed's worker slots (@usine/orchestrator) ----------------------------

/** A worker of the orchestrator's `workers` declaration (usine.yaml), either spelling of the slot count. */
export interface WorkerDeclaration {
  readonly name: string
  readonly kind?: string | undefined
  readonly maxConcurrentAttempts?: number | undefined
  readonly max_concurrent_attempts?: number | undefined
}

/** A slot held for a run: frees with `release` (idempotent). */
export interface WorkerLease {
  readonly worker: string
  readonly release: Effect.Effect<void>
}

/** Where a run stands in the queue: lower `rank` first (unranked after ranked), then `eventTime` (epoch ms), then arrival. */
export interface RunPosition {
  readonly rank?: number | undefined
  readonly eventTime?: number | undefined
}

export interface WorkerSlotsStatus {
  readonly slots: ReadonlyArray<{ readonly worker: string; readonly capacity: number; readonly leased: number }>
  readonly queue: ReadonlyArray<{ readonly runId: string; readonly ahead: number; readonly worker?: string }>
  readonly preflights: ReadonlyArray<{ readonly worker: string; readonly ok: boolean; readonly at?: number; readonly error?: string }>
}

export interface WorkersReloadRefused extends YieldableError {
  readonly _tag: 'WorkersReloadRefused'
  readonly worker?: string
  readonly message: string
}
export declare const WorkersReloadRefused: {
  new (fields: { readonly worker?: string; readonly message: string }): WorkersReloadRefused
  make(fields: { readonly worker?: string; readonly message: string }): WorkersReloadRefused
}

export interface WorkerSlotsShape {
  /** A slot for `runId`: on `worker` when given (it waits even while that worker is undeclared), else the first declared free one. Interrupting the wait cancels it. */
  readonly reserve: (runId: string, options?: { readonly worker?: string | undefined; readonly position?: RunPosition | undefined }) => Effect.Effect<WorkerLease>
  /** Work already running on `worker` after a restart: a slot even beyond capacity; an undeclared worker takes none. */
  readonly occupy: (worker: string, attemptId?: string) => Effect.Effect<WorkerLease>
  readonly status: Effect.Effect<WorkerSlotsStatus>
  /** Replaces the declaration live; with a preflight, added or grown workers pass it first, or nothing changes. */
  readonly reload: (workers: ReadonlyArray<WorkerDeclaration>) => Effect.Effect<void, WorkersReloadRefused>
  /** rota's Node roster underneath. */
  readonly roster: NodeRoster
}

export interface WorkerSlotsOptions {
  readonly workers: ReadonlyArray<WorkerDeclaration>
  /** Fails when the worker cannot run attempts: every worker at start (a failure fails the service), and each one a reload adds or grows. */
  readonly preflight?: ((worker: { readonly id: string; readonly kind?: string; readonly slots?: number }) => Effect.Effect<unknown, unknown>) | undefined
  /** The worker kinds this host runs (another is refused). */
  readonly kinds?: ReadonlyArray<string> | undefined
}

export declare const WorkerSlots: Context.Service<WorkerSlots, WorkerSlotsShape>
export interface WorkerSlots {
  readonly _: unique symbol
}
export declare const makeWorkerSlots: (options: WorkerSlotsOptions) => Effect.Effect<WorkerSlotsShape, RotaError>
export declare const workerSlotsLayer: (options: WorkerSlotsOptions) => Layer.Layer<WorkerSlots, RotaError>
