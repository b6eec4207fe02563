// `rota/shared` (Node only): the input log of a roster shared by several processes,
// on PostgreSQL. See src/shared/pg-log-store.js and README.md, "Shared roster log".

/** The schema version this package speaks (sql/rota-log-v1.sql). */
export declare const SCHEMA_VERSION: number

export type LogStoreErrorCode = 'STALE_EPOCH' | 'COMPACTED' | 'NO_SNAPSHOT' | 'SCHEMA_TOO_NEW' | 'INVALID_INPUT' | 'DATABASE'
export declare const LOG_STORE_ERROR_CODES: readonly LogStoreErrorCode[]

export declare class LogStoreError extends Error {
  readonly code: LogStoreErrorCode
}

/** One entry of the log. `now` is the database clock (epoch ms) at its append. */
export interface LogEntry {
  seq: number
  now: number
  instance: string
  /** The leader's epoch on a leader-only entry; null on the others. */
  epoch: number | null
  entry: string
}

export interface Appended {
  firstSeq: number
  lastSeq: number
  now: number
}

export interface LogHead {
  lastSeq: number
  lastNow: number
  compactedThrough: number
}

export interface LeaderLease {
  /** Whether the asking instance holds the lease now. */
  acquired: boolean
  /** The holder (null when nobody holds it). */
  instance: string | null
  epoch: number
  /** Database time, epoch ms. */
  expiresAt: number
}

export interface Snapshot {
  seq: number
  state: string
  createdAt: number
}

export interface Wake {
  reason: 'notify' | 'listen' | 'poll'
  /** With 'notify': the newest seq of the append that woke. */
  seq?: number
}

export interface Subscription {
  /** The backend pid of the LISTEN connection (null while there is none). */
  readonly listenerPid: number | null
  close(): void
}

/** A `pg` Pool (the `pg` package is an optional peer dependency). */
export interface PoolLike {
  query(text: string, values?: unknown[]): Promise<{ rows: any[] }>
  connect(): Promise<unknown>
  end(): Promise<void>
}

export interface PgLogStoreOptions {
  roster: string
  connectionString?: string | undefined
  pool?: PoolLike | undefined
  /** How often readers poll as the backstop of NOTIFY (default 1000). */
  pollMs?: number | undefined
  /** Connections of the pool made from `connectionString` (default 4). */
  max?: number | undefined
}

export declare class PgLogStore {
  static connect(options: PgLogStoreOptions): Promise<PgLogStore>
  readonly roster: string
  append(entries: string[], options: { instance: string; epoch?: number }): Promise<Appended>
  readFrom(seq: number, options?: { limit?: number }): Promise<LogEntry[]>
  head(): Promise<LogHead>
  now(): Promise<number>
  subscribe(onWake: (wake: Wake) => void, options?: { pollMs?: number; listen?: boolean; onError?: (error: Error) => void }): Subscription
  heartbeat(instance: string): Promise<number>
  expiredInstances(ttlMs: number): Promise<Array<{ instance: string; lastSeen: number }>>
  forgetInstance(instance: string): Promise<boolean>
  /**
   * The leader's expiry of `instance`, atomic with its heartbeat: while its heartbeat is
   * still lapsed for `ttlMs`, appends `entry` (its `expireOwner`) at `epoch`
   * (STALE_EPOCH when that lease was lost) and forgets it. The entry's seq, or null when
   * a heartbeat landed first (nothing appended).
   */
  expireInstance(instance: string, ttlMs: number, leader: { leader: string; epoch: number }, entry: string): Promise<number | null>
  acquireLeader(instance: string, ttlMs: number): Promise<LeaderLease>
  renewLeader(instance: string, epoch: number, ttlMs: number): Promise<number>
  stepDown(instance: string, epoch: number): Promise<boolean>
  writeSnapshot(seq: number, state: string): Promise<void>
  latestSnapshot(): Promise<Snapshot | null>
  compact(through: number): Promise<number>
  close(): Promise<void>
}
