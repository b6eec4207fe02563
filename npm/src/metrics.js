// The roster's metrics: counted by the driver as it handles the core's outputs, read
// as Prometheus text (`roster.metrics()`) and, when the caller gives an OpenTelemetry
// `Meter` (`@opentelemetry/api`, an optional peer dependency), recorded through it.
// The names are the Rust host's (host-wasmtime), so one dashboard reads both.

/** Wait-time buckets in seconds: a grant at once up to a long queue. */
export const WAIT_BUCKETS = Object.freeze([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600])

export const METRICS = Object.freeze({
  leasesGranted: { name: 'rota_leases_granted_total', help: 'Leases granted (occupy included).' },
  leaseWait: { name: 'rota_lease_wait_seconds', help: 'Time from a lease request to its grant.' },
  exclusions: { name: 'rota_exclusions_total', help: 'Executors taken out of the round, by exclusion kind.' },
  probes: { name: 'rota_probes_total', help: 'Health probes started.' },
  queueLength: { name: 'rota_queue_length', help: 'Lease requests waiting, by role.' },
  stateWrites: { name: 'rota_state_writes_total', help: 'State writes that succeeded.' },
})

const escapeLabel = (value) => String(value).replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')
const number = (value) => (Number.isFinite(value) ? String(value) : value > 0 ? '+Inf' : value < 0 ? '-Inf' : 'NaN')

export class Metrics {
  granted = 0
  probes = 0
  stateWrites = 0
  /** kind → count */
  exclusions = new Map()
  waitCounts = new Array(WAIT_BUCKETS.length).fill(0)
  waitCount = 0
  waitSum = 0
  #otel

  /**
   * @param {object} [meter] an OpenTelemetry Meter (`metrics.getMeter('rota')`)
   * @param {() => Map<string, number>} queueByRole the waiting requests of every role, read on collection
   */
  constructor(meter, queueByRole) {
    this.queueByRole = queueByRole
    if (meter !== undefined) this.#otel = bind(meter, queueByRole)
  }

  leaseGranted(waitMs) {
    this.granted += 1
    const seconds = Math.max(0, waitMs) / 1_000
    this.waitCount += 1
    this.waitSum += seconds
    for (let bucket = 0; bucket < WAIT_BUCKETS.length; bucket += 1) {
      if (seconds <= WAIT_BUCKETS[bucket]) {
        this.waitCounts[bucket] += 1
        break
      }
    }
    this.#otel?.granted.add(1)
    this.#otel?.wait.record(seconds)
  }

  leaseOccupied() {
    this.granted += 1
    this.#otel?.granted.add(1)
  }

  excluded(kind) {
    const key = String(kind ?? 'unknown')
    this.exclusions.set(key, (this.exclusions.get(key) ?? 0) + 1)
    this.#otel?.exclusions.add(1, { kind: key })
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
    const lines = []
    const head = ({ name, help }, type) => lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`)
    head(METRICS.leasesGranted, 'counter')
    lines.push(`${METRICS.leasesGranted.name} ${this.granted}`)
    const wait = METRICS.leaseWait.name
    head(METRICS.leaseWait, 'histogram')
    let cumulative = 0
    WAIT_BUCKETS.forEach((bound, index) => {
      cumulative += this.waitCounts[index]
      lines.push(`${wait}_bucket{le="${bound}"} ${cumulative}`)
    })
    lines.push(`${wait}_bucket{le="+Inf"} ${this.waitCount}`, `${wait}_sum ${number(this.waitSum)}`, `${wait}_count ${this.waitCount}`)
    head(METRICS.exclusions, 'counter')
    for (const [kind, count] of [...this.exclusions].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      lines.push(`${METRICS.exclusions.name}{kind="${escapeLabel(kind)}"} ${count}`)
    }
    head(METRICS.probes, 'counter')
    lines.push(`${METRICS.probes.name} ${this.probes}`)
    head(METRICS.queueLength, 'gauge')
    for (const [role, length] of this.queueByRole()) {
      lines.push(`${METRICS.queueLength.name}{role="${escapeLabel(role)}"} ${length}`)
    }
    head(METRICS.stateWrites, 'counter')
    lines.push(`${METRICS.stateWrites.name} ${this.stateWrites}`)
    return `${lines.join('\n')}\n`
  }
}

/** The instruments on an OpenTelemetry Meter (only the API's calls: no SDK needed here). */
function bind(meter, queueByRole) {
  const granted = meter.createCounter(METRICS.leasesGranted.name, { description: METRICS.leasesGranted.help })
  const wait = meter.createHistogram(METRICS.leaseWait.name, {
    description: METRICS.leaseWait.help,
    unit: 's',
    advice: { explicitBucketBoundaries: [...WAIT_BUCKETS] },
  })
  const exclusions = meter.createCounter(METRICS.exclusions.name, { description: METRICS.exclusions.help })
  const probes = meter.createCounter(METRICS.probes.name, { description: METRICS.probes.help })
  const stateWrites = meter.createCounter(METRICS.stateWrites.name, { description: METRICS.stateWrites.help })
  const queue = meter.createObservableGauge(METRICS.queueLength.name, { description: METRICS.queueLength.help })
  const observe = (result) => {
    for (const [role, length] of queueByRole()) result.observe(length, { role })
  }
  queue.addCallback(observe)
  return { granted, wait, exclusions, probes, stateWrites, stop: () => queue.removeCallback(observe) }
}
