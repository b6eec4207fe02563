// The roster's metrics: counted by the driver as it handles the core's outputs, read
// as Prometheus text (`roster.metrics()`) and, when the caller gives an OpenTelemetry
// `Meter` (`@opentelemetry/api`, an optional peer dependency), recorded through it.
// The names and labels are the Rust host's (host-wasmtime), so one dashboard reads both.
//
// Labels are bounded: `executor` and `role` come from the running document (a series
// of an executor a reload removed is dropped once it has left), `kind` from the core's
// short lists; never a request id or free text.

/** Wait-time buckets in seconds: a grant at once up to a long queue. */
export const WAIT_BUCKETS = Object.freeze([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600])

/** The kinds of exclusion, each a series of `rota_excluded` per executor. */
export const EXCLUSION_KINDS = Object.freeze(['until', 'health', 'run', 'manual'])

export const METRICS = Object.freeze({
  leasesGranted: { name: 'rota_leases_granted_total', help: 'Leases granted (occupy included), per executor and role.' },
  leaseWait: { name: 'rota_lease_wait_seconds', help: 'Time from a lease request to its grant.' },
  exclusions: { name: 'rota_exclusions_total', help: 'Executors taken out of the round, by exclusion kind.' },
  probes: { name: 'rota_probes_total', help: 'Health probes started.' },
  queueLength: { name: 'rota_queue_length', help: 'Lease requests waiting, by role.' },
  stateWrites: { name: 'rota_state_writes_total', help: 'State writes that succeeded.' },
  slotsInUse: { name: 'rota_slots_in_use', help: 'Slots held, per executor and role.' },
  capacity: { name: 'rota_capacity', help: 'Slots for the role on the executors in the round, held or not.' },
  excluded: { name: 'rota_excluded', help: 'Whether the executor is out of the round, per exclusion kind (1 or 0).' },
  failures: { name: 'rota_failures_total', help: 'Failures reported, per executor and the kind the core gave them.' },
  budgetWaits: { name: 'rota_budget_waits_total', help: "Lease requests that waited for an executor's budget, per executor and role." },
})

const escapeLabel = (value) => String(value).replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')
const number = (value) => (Number.isFinite(value) ? String(value) : value > 0 ? '+Inf' : value < 0 ? '-Inf' : 'NaN')
const byName = ([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)

/** `{executor="a",role="coder"}` */
const labels = (pairs) => `{${pairs.map(([key, value]) => `${key}="${escapeLabel(value)}"`).join(',')}}`

/** One count per executor and a second label (a role, a failure kind): executor → label → count. */
class Counts {
  #counts = new Map()
  add(executor, label) {
    let inner = this.#counts.get(executor)
    if (inner === undefined) this.#counts.set(executor, (inner = new Map()))
    inner.set(label, (inner.get(label) ?? 0) + 1)
  }
  get(executor, label) {
    return this.#counts.get(executor)?.get(label) ?? 0
  }
  /** The labels counted for `executor`, sorted. */
  labels(executor) {
    return [...(this.#counts.get(executor)?.keys() ?? [])].sort()
  }
  executors() {
    return [...this.#counts.keys()].sort()
  }
  /** Forgets every executor not in `keep` (a Set of ids). */
  retain(keep) {
    for (const executor of this.#counts.keys()) if (!keep.has(executor)) this.#counts.delete(executor)
  }
}

/** The roles an executor's series cover: its own, and any it holds a slot of (occupied work). */
const rolesOf = (executor) => [...new Set([...(executor.roles ?? []), ...Object.keys(executor.busyByRole ?? {})])].sort()

export class Metrics {
  probes = 0
  stateWrites = 0
  /** kind → count */
  exclusions = new Map()
  waitCounts = new Array(WAIT_BUCKETS.length).fill(0)
  waitCount = 0
  waitSum = 0
  /** executor → role → leases granted */
  grants = new Counts()
  /** executor → failure kind → failures reported */
  failures = new Counts()
  /** executor → role → requests that waited for a budget */
  budgetWaits = new Counts()
  #otel

  /**
   * @param {object} [meter] an OpenTelemetry Meter (`metrics.getMeter('rota')`)
   * @param {() => Map<string, number>} queueByRole the waiting requests of every role, read on collection
   * @param {() => ({ snapshot: object, capacity: (role: string) => number } | undefined)} [state]
   *   the roster as folded, read on collection (undefined once it closed)
   */
  constructor(meter, queueByRole, state = () => undefined) {
    this.queueByRole = queueByRole
    this.state = state
    if (meter !== undefined) this.#otel = bind(meter, queueByRole, state)
  }

  /** The total of leases granted, every executor and role. */
  get granted() {
    let total = 0
    for (const executor of this.grants.executors()) for (const role of this.grants.labels(executor)) total += this.grants.get(executor, role)
    return total
  }

  leaseGranted(waitMs, executor, role) {
    this.#grant(executor, role)
    const seconds = Math.max(0, waitMs) / 1_000
    this.waitCount += 1
    this.waitSum += seconds
    for (let bucket = 0; bucket < WAIT_BUCKETS.length; bucket += 1) {
      if (seconds <= WAIT_BUCKETS[bucket]) {
        this.waitCounts[bucket] += 1
        break
      }
    }
    this.#otel?.wait.record(seconds)
  }

  leaseOccupied(executor, role) {
    this.#grant(executor, role)
  }

  #grant(executor, role = '') {
    this.grants.add(String(executor), String(role ?? ''))
    this.#otel?.granted.add(1, { executor: String(executor), role: String(role ?? '') })
  }

  excluded(kind) {
    const key = String(kind ?? 'unknown')
    this.exclusions.set(key, (this.exclusions.get(key) ?? 0) + 1)
    this.#otel?.exclusions.add(1, { kind: key })
  }

  /** A failure reported on `executor`, of the kind the core gave it. */
  failed(executor, kind) {
    this.failures.add(String(executor), String(kind))
    this.#otel?.failures.add(1, { executor: String(executor), kind: String(kind) })
  }

  /** A lease request for `role` that waited because `executor`'s budget had no room (the core's `waiting.spent`). */
  budgetWaited(executor, role) {
    this.budgetWaits.add(String(executor), String(role))
    this.#otel?.budgetWaits.add(1, { executor: String(executor), role: String(role) })
  }

  probed() {
    this.probes += 1
    this.#otel?.probes.add(1)
  }

  /** Stops reporting to the Meter (the roster closed). */
  close() {
    this.#otel?.stop()
    this.#otel = undefined
  }

  stateWritten() {
    this.stateWrites += 1
    this.#otel?.stateWrites.add(1)
  }

  /** The Prometheus text exposition format (version 0.0.4). */
  prometheus() {
    const state = this.#current()
    const executors = state?.snapshot.executors ?? []
    const lines = []
    const head = ({ name, help }, type) => lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`)
    const sample = (metric, pairs, value) => lines.push(`${metric.name}${labels(pairs)} ${number(value)}`)
    // Counters per executor and role: every role of every executor (zeros too), and
    // what was counted for executors the state does not list (a closed roster's).
    const perRole = (metric, counts) => {
      head(metric, 'counter')
      if (state === undefined) {
        for (const id of counts.executors()) for (const role of counts.labels(id)) sample(metric, [['executor', id], ['role', role]], counts.get(id, role))
        return
      }
      for (const executor of executors) {
        for (const role of new Set([...rolesOf(executor), ...counts.labels(executor.id)])) {
          sample(metric, [['executor', executor.id], ['role', role]], counts.get(executor.id, role))
        }
      }
    }
    perRole(METRICS.leasesGranted, this.grants)
    const wait = METRICS.leaseWait.name
    head(METRICS.leaseWait, 'histogram')
    let cumulative = 0
    WAIT_BUCKETS.forEach((bound, index) => {
      cumulative += this.waitCounts[index]
      lines.push(`${wait}_bucket{le="${bound}"} ${cumulative}`)
    })
    lines.push(`${wait}_bucket{le="+Inf"} ${this.waitCount}`, `${wait}_sum ${number(this.waitSum)}`, `${wait}_count ${this.waitCount}`)
    head(METRICS.exclusions, 'counter')
    for (const [kind, count] of [...this.exclusions].sort(byName)) sample(METRICS.exclusions, [['kind', kind]], count)
    head(METRICS.probes, 'counter')
    lines.push(`${METRICS.probes.name} ${this.probes}`)
    head(METRICS.queueLength, 'gauge')
    for (const [role, length] of this.queueByRole()) sample(METRICS.queueLength, [['role', role]], length)
    head(METRICS.stateWrites, 'counter')
    lines.push(`${METRICS.stateWrites.name} ${this.stateWrites}`)
    head(METRICS.failures, 'counter')
    for (const id of state === undefined ? this.failures.executors() : executors.map((e) => e.id)) {
      for (const kind of this.failures.labels(id)) sample(METRICS.failures, [['executor', id], ['kind', kind]], this.failures.get(id, kind))
    }
    perRole(METRICS.budgetWaits, this.budgetWaits)
    if (state !== undefined) {
      head(METRICS.slotsInUse, 'gauge')
      for (const executor of executors) {
        for (const role of rolesOf(executor)) sample(METRICS.slotsInUse, [['executor', executor.id], ['role', role]], executor.busyByRole?.[role] ?? 0)
      }
      head(METRICS.capacity, 'gauge')
      for (const role of state.snapshot.roles) sample(METRICS.capacity, [['role', role]], state.capacity(role))
      head(METRICS.excluded, 'gauge')
      for (const executor of executors) {
        for (const kind of EXCLUSION_KINDS) sample(METRICS.excluded, [['executor', executor.id], ['kind', kind]], executor.exclusion?.kind === kind ? 1 : 0)
      }
    }
    return `${lines.join('\n')}\n`
  }

  /** The roster as folded, the counts of executors it no longer lists forgotten; undefined once closed. */
  #current() {
    const state = this.state()
    if (state !== undefined) {
      const ids = new Set(state.snapshot.executors.map((e) => e.id))
      for (const counts of [this.grants, this.failures, this.budgetWaits]) counts.retain(ids)
    }
    return state
  }
}

/** The instruments on an OpenTelemetry Meter (only the API's calls: no SDK needed here). */
function bind(meter, queueByRole, state) {
  const counter = (metric) => meter.createCounter(metric.name, { description: metric.help })
  const granted = counter(METRICS.leasesGranted)
  const wait = meter.createHistogram(METRICS.leaseWait.name, {
    description: METRICS.leaseWait.help,
    unit: 's',
    advice: { explicitBucketBoundaries: [...WAIT_BUCKETS] },
  })
  const exclusions = counter(METRICS.exclusions)
  const probes = counter(METRICS.probes)
  const stateWrites = counter(METRICS.stateWrites)
  const failures = counter(METRICS.failures)
  const budgetWaits = counter(METRICS.budgetWaits)
  const gauge = (metric, observe) => {
    const instrument = meter.createObservableGauge(metric.name, { description: metric.help })
    instrument.addCallback(observe)
    return () => instrument.removeCallback(observe)
  }
  // Gauges of the roster as folded, read once per collection: an executor a reload
  // removed is no longer observed once it has left.
  const ofState = (each) => (result) => {
    const current = state()
    if (current !== undefined) each(result, current)
  }
  const stops = [
    gauge(METRICS.queueLength, (result) => {
      for (const [role, length] of queueByRole()) result.observe(length, { role })
    }),
    gauge(
      METRICS.slotsInUse,
      ofState((result, { snapshot }) => {
        for (const e of snapshot.executors) for (const role of rolesOf(e)) result.observe(e.busyByRole?.[role] ?? 0, { executor: e.id, role })
      }),
    ),
    gauge(
      METRICS.capacity,
      ofState((result, { snapshot, capacity }) => {
        for (const role of snapshot.roles) result.observe(capacity(role), { role })
      }),
    ),
    gauge(
      METRICS.excluded,
      ofState((result, { snapshot }) => {
        for (const e of snapshot.executors) for (const kind of EXCLUSION_KINDS) result.observe(e.exclusion?.kind === kind ? 1 : 0, { executor: e.id, kind })
      }),
    ),
  ]
  return { granted, wait, exclusions, probes, stateWrites, failures, budgetWaits, stop: () => stops.forEach((stop) => stop()) }
}
