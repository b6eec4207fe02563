// The binary step behind `Policy#handle`: the JS half of `wasm/src/binary.rs` (the
// format is documented there; change the two files together).
//
// The common inputs (lease, tryLease, release, tick, cancel, report, resume,
// probeResult) are written straight into a buffer the policy owns in the module's
// memory, and the answer is read back from it into plain objects. An input is encoded
// only when it is exactly what the JSON reader would accept and read the same way:
// a plain object whose own keys are all fields of its type, with values of the right
// JSON type (`undefined` is an absent field, as `JSON.stringify` leaves it out; `null`
// is an absent optional field, as the reader takes it), whole numbers that JS holds
// exactly, and strings that are ASCII or well-formed UTF-16. Anything else returns -1
// and goes through `handleJson`, and so does an input the policy refuses (it changes
// nothing on an error), so that errors (and their messages) are exactly the JSON
// step's. The answer is deep-equal to `JSON.parse(handleJson(...))`: the same
// keys in the same order, the same values.

const MAX_SAFE = Number.MAX_SAFE_INTEGER
const HEADER = 24
const STRINGS = 40

/** An input kind's number, or 0 for the JSON step. */
const kindOf = (type) => {
  switch (type) {
    case 'lease': return 1
    case 'tryLease': return 2
    case 'release': return 3
    case 'tick': return 4
    case 'cancel': return 5
    case 'report': return 6
    case 'resume': return 7
    case 'probeResult': return 8
    default: return 0
  }
}
/** A failure kind's number, or -1. */
const failureKindOf = (kind) => {
  switch (kind) {
    case 'usageLimit': return 0
    case 'rateLimit': return 1
    case 'authentication': return 2
    case 'outage': return 3
    case 'modelUnavailable': return 4
    case 'other': return 5
    default: return -1
  }
}
/** Where a policy keeps its buffer's address and size and its string slots. */
const IO = Symbol('rota.io')

// The keys of the inputs, one bit each; what each kind may carry (`type` and `now` always).
const K_TYPE = 1
const K_NOW = 2
const K_ID = 4
const K_ROLE = 8
const K_AVOID = 16
const K_PREFER = 32
const K_PIN = 64
const K_RANK = 128
const K_EVENT_TIME = 256
const K_LABEL = 512
const K_DEADLINE = 1024
const K_LEASE = 2048
const K_EXECUTOR = 4096
const K_FAILURE = 8192
const K_UP = 16384
const BASE = K_TYPE | K_NOW
const LEASE_KEYS = BASE | K_ID | K_ROLE | K_AVOID | K_PREFER | K_PIN | K_RANK | K_EVENT_TIME | K_LABEL | K_DEADLINE
const ALLOWED = [0, LEASE_KEYS, LEASE_KEYS, BASE | K_LEASE, BASE, BASE | K_ID, BASE | K_EXECUTOR | K_FAILURE, BASE | K_EXECUTOR, BASE | K_EXECUTOR | K_UP]

const LEVELS = ['debug', 'info', 'warn']
/** As many as binary.rs's `SLOTS`, all empty (as there; an empty string is never sent by reference). */
const newSlots = () => new Array(40).fill('')
/** binary.rs's executor table (`Strings::executors`): names by their place in the roster, empty at first. */
const newExecutors = () => []
const OBJECT_PROTO = Object.prototype
const wellFormed = typeof String.prototype.isWellFormed === 'function' ? (s) => s.isWellFormed() : () => false

// `for...in` over a plain object lists its own enumerable string keys in
// `Object.keys` order (without allocating the array), and its prototype's enumerable
// keys after them: none, unless `Object.prototype` has enumerable properties, which
// this checks first (such an input takes the JSON step).
const EMPTY = {}
const polluted = () => {
  for (const _ in EMPTY) return true
  return false
}

const isPlain = (value) => {
  if (typeof value !== 'object' || value === null) return false
  const proto = Object.getPrototypeOf(value)
  return (proto === OBJECT_PROTO || proto === null) && value.toJSON === undefined
}
const isWhole = (value) => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
const isInt = (value) => typeof value === 'number' && Number.isSafeInteger(value)
/** An optional field: absent (undefined or null), or a value `ok` accepts. */
const optional = (value, ok) => value === undefined || value === null || ok(value)
const isString = (value) => typeof value === 'string'

/**
 * The binary `handle` for one wasm-bindgen module: `step(policy, input, minLevel)` gives
 * the answer, or `undefined` when the input is one to send as JSON (one it does not
 * encode, or one the policy refused); `stepTrusted` the same for an input the driver built.
 */
export function binaryStep(wasm) {
  const memory = wasm.__memory()
  let u8 = new Uint8Array(memory.buffer)
  let view = new DataView(memory.buffer)
  const encoder = new TextEncoder()
  // `ignoreBOM`: a string's leading U+FEFF is a character, as JSON.parse keeps it.
  const decoder = new TextDecoder('utf-8', { ignoreBOM: true })

  // Where there is a Node Buffer, a longer ASCII string is read in one native call
  // (`latin1` is exact on ASCII, and costs half a TextDecoder's call); elsewhere
  // (a browser) byte by byte or decoded.
  const NodeBuffer = typeof globalThis.Buffer?.from === 'function' ? globalThis.Buffer : undefined
  let latin1 = NodeBuffer?.from(memory.buffer)

  /** The memory views again after the memory grew (the old buffer is detached). */
  const views = () => {
    // (`length`, not `byteLength`: as exact, 0 once detached, and several times cheaper.)
    if (u8.length === 0) {
      u8 = new Uint8Array(memory.buffer)
      view = new DataView(memory.buffer)
      latin1 = NodeBuffer?.from(memory.buffer)
    }
  }

  // ---- input ----------------------------------------------------------------------

  let at = 0
  /** Writes a string (u32 byte length, UTF-8); false when it is not well-formed. */
  const putString = (s) => {
    const start = at + 4
    const n = s.length
    let i = 0
    for (; i < n; i += 1) {
      const c = s.charCodeAt(i)
      if (c > 0x7f) break
      u8[start + i] = c
    }
    let length = n
    if (i < n) {
      if (!wellFormed(s)) return false
      length = i + encoder.encodeInto(s.slice(i), u8.subarray(start + i)).written
    }
    view.setUint32(at, length, true)
    at = start + length
    return true
  }
  /** The most bytes a string takes. */
  const size = (s) => 4 + 3 * s.length

  // ---- the parts of `encode` that `encodeTrusted` shares ----------------------------

  /**
   * The id of the lease or tryLease being encoded (else undefined): the answer names
   * it as `0x83` (binary.rs), this string, rather than sending it back.
   */
  let inputId
  /** The flags of the last `requestBytes` (which fields a request carries). */
  let requestFlags = 0
  /**
   * A lease or tryLease input's checks (kinds 1 and 2): the most bytes it takes, its
   * flags in `requestFlags`; -1 for the JSON path. `undefined` is an absent field.
   */
  function requestBytes(id, role, avoid, prefer, pin, rank, eventTime, label, deadline) {
    if (!isString(id) || !isString(role)) return -1
    if (!optional(rank, isInt) || !optional(eventTime, isWhole) || !optional(deadline, isWhole)) return -1
    if (!optional(prefer, isString) || !optional(pin, isString) || !optional(label, isString)) return -1
    let flags = 0
    let bytes = STRINGS + size(id) + size(role)
    if (rank !== undefined && rank !== null) flags |= 1
    if (eventTime !== undefined && eventTime !== null) flags |= 2
    if (deadline !== undefined && deadline !== null) flags |= 4
    if (prefer !== undefined && prefer !== null) (flags |= 8), (bytes += size(prefer))
    if (pin !== undefined && pin !== null) (flags |= 16), (bytes += size(pin))
    if (label !== undefined && label !== null) (flags |= 32), (bytes += size(label))
    if (avoid !== undefined) {
      if (!Array.isArray(avoid) || Object.getPrototypeOf(avoid) !== Array.prototype || avoid.toJSON !== undefined) return -1
      flags |= 64
      bytes += 4
      for (let i = 0; i < avoid.length; i += 1) {
        const s = avoid[i]
        if (!isString(s)) return -1
        bytes += size(s)
      }
    }
    requestFlags = flags
    return bytes
  }

  /** Writes a request's fields after its header (`at` is past it); false when a string is not well-formed. */
  function writeRequest(base, flags, id, role, avoid, prefer, pin, rank, eventTime, label, deadline) {
    if (!putString(id) || !putString(role)) return false
    inputId = id
    if (flags & 1) view.setFloat64(base + 16, rank, true)
    if (flags & 2) view.setFloat64(base + 24, eventTime, true)
    if (flags & 4) view.setFloat64(base + 32, deadline, true)
    if (flags & 8 && !putString(prefer)) return false
    if (flags & 16 && !putString(pin)) return false
    if (flags & 32 && !putString(label)) return false
    if (flags & 64) {
      view.setUint32(at, avoid.length, true)
      at += 4
      for (let i = 0; i < avoid.length; i += 1) if (!putString(avoid[i])) return false
    }
    return true
  }

  /** A buffer of at least `bytes` with the input's header written: its address (`at` past the header). */
  function begin(policy, bytes, kind, flags, small, now) {
    let io = policy[IO]
    if (io === undefined || io.size < bytes) {
      const ptr = policy.__ioBuffer(Math.max(bytes, 256))
      io = { ptr, size: Math.max(bytes, 256), slots: io === undefined ? newSlots() : io.slots, executors: io === undefined ? newExecutors() : io.executors }
      policy[IO] = io
    }
    views()
    inputId = undefined
    const base = io.ptr
    u8[base] = kind
    u8[base + 1] = flags
    u8[base + 2] = small
    view.setFloat64(base + 8, now, true)
    at = base + STRINGS
    return base
  }

  /**
   * A report input (kind 6) from its failure's fields (`undefined` or `null` for an
   * absent one): its length, or -1 for the JSON path.
   */
  function writeReport(policy, now, executor, kind, message, resetAt, retryAfterMs) {
    const small = failureKindOf(kind)
    if (small < 0) return -1
    if (message !== undefined && !isString(message)) return -1
    if (!optional(resetAt, isWhole) || !optional(retryAfterMs, isWhole)) return -1
    message ??= ''
    const hasReset = resetAt !== undefined && resetAt !== null
    const hasRetry = retryAfterMs !== undefined && retryAfterMs !== null
    const base = begin(policy, STRINGS + size(executor) + size(message), 6, (hasReset ? 1 : 0) | (hasRetry ? 2 : 0), small, now)
    if (!putString(executor) || !putString(message)) return -1
    if (hasReset) view.setFloat64(base + 16, resetAt, true)
    if (hasRetry) view.setFloat64(base + 24, retryAfterMs, true)
    return at - base
  }

  /** Encodes `input` into the policy's buffer: its length, or -1 for the JSON path. */
  function encode(policy, input) {
    if (!isPlain(input) || polluted()) return -1
    let type, now, id, role, avoid, prefer, pin, rank, eventTime, label, deadline, lease, executor, failure, up
    let seen = 0
    for (const key in input) {
      const value = input[key]
      if (value === undefined) continue
      switch (key) {
        case 'type': type = value; seen |= K_TYPE; break
        case 'now': now = value; seen |= K_NOW; break
        case 'id': id = value; seen |= K_ID; break
        case 'role': role = value; seen |= K_ROLE; break
        case 'avoid': avoid = value; seen |= K_AVOID; break
        case 'prefer': prefer = value; seen |= K_PREFER; break
        case 'pin': pin = value; seen |= K_PIN; break
        case 'rank': rank = value; seen |= K_RANK; break
        case 'eventTime': eventTime = value; seen |= K_EVENT_TIME; break
        case 'label': label = value; seen |= K_LABEL; break
        case 'deadline': deadline = value; seen |= K_DEADLINE; break
        case 'lease': lease = value; seen |= K_LEASE; break
        case 'executor': executor = value; seen |= K_EXECUTOR; break
        case 'failure': failure = value; seen |= K_FAILURE; break
        case 'up': up = value; seen |= K_UP; break
        default: return -1
      }
    }
    const kind = kindOf(type)
    if (kind === 0 || (seen & ~ALLOWED[kind]) !== 0 || !isWhole(now)) return -1
    let flags = 0
    let small = 0
    let bytes = STRINGS
    switch (kind) {
      case 1:
      case 2:
        bytes = requestBytes(id, role, avoid, prefer, pin, rank, eventTime, label, deadline)
        if (bytes < 0) return -1
        flags = requestFlags
        break
      case 3:
        if (!isWhole(lease)) return -1
        break
      case 4:
        break
      case 5:
        if (!isString(id)) return -1
        bytes += size(id)
        break
      case 6: {
        if (!isString(executor) || !isPlain(failure)) return -1
        let fkind, message, resetAt, retryAfterMs
        for (const key in failure) {
          const value = failure[key]
          if (value === undefined) continue
          switch (key) {
            case 'kind': fkind = value; break
            case 'message': message = value; break
            case 'resetAt': resetAt = value; break
            case 'retryAfterMs': retryAfterMs = value; break
            default: return -1
          }
        }
        return writeReport(policy, now, executor, fkind, message, resetAt, retryAfterMs)
      }
      case 7:
        if (!isString(executor)) return -1
        bytes += size(executor)
        break
      case 8:
        if (!isString(executor) || typeof up !== 'boolean') return -1
        bytes += size(executor)
        small = up ? 1 : 0
        break
    }

    const base = begin(policy, bytes, kind, flags, small, now)
    switch (kind) {
      case 1:
      case 2:
        if (!writeRequest(base, flags, id, role, avoid, prefer, pin, rank, eventTime, label, deadline)) return -1
        break
      case 3:
        view.setFloat64(base + 16, lease, true)
        break
      case 5:
        if (!putString(id)) return -1
        break
      case 7:
      case 8:
        if (!putString(executor)) return -1
        break
    }
    return at - base
  }

  /**
   * `encode` of an input the driver built (driver.js): a lease or tryLease input from
   * `#requestInput`, a release from `#releaseLease`, a report from `report()` (its
   * failure from `failureFacts`), each an object literal of its type's keys (data
   * properties, `undefined` for an absent field), whatever values it carries. Such an
   * object passes `encode`'s walk of its keys, so this skips the walk
   * and checks the values, the same checks in the same order: the same bytes, the same
   * -1 (test/encode-trusted.test.mjs holds them equal). Any other input: `encode`.
   */
  function encodeTrusted(policy, input) {
    const type = input.type
    const request = type === 'lease' ? 1 : type === 'tryLease' ? 2 : 0
    if ((request === 0 && type !== 'release' && type !== 'report') || input.toJSON !== undefined || polluted()) return encode(policy, input)
    const now = input.now
    if (!isWhole(now)) return -1
    if (type === 'report') {
      // `report()`'s input: its failure is `failureFacts`' object literal, whose other
      // keys (`tag`, `status`, `code`) take the JSON step.
      const { executor, failure } = input
      if (!isString(executor) || !isPlain(failure)) return -1
      const { kind, tag, status, code, message, resetAt, retryAfterMs } = failure
      if (tag !== undefined || status !== undefined || code !== undefined) return -1
      return writeReport(policy, now, executor, kind, message, resetAt, retryAfterMs)
    }
    if (request === 0) {
      const lease = input.lease
      if (!isWhole(lease)) return -1
      const base = begin(policy, STRINGS, 3, 0, 0, now)
      view.setFloat64(base + 16, lease, true)
      return at - base
    }
    const { id, role, avoid, prefer, pin, rank, eventTime, label, deadline } = input
    const bytes = requestBytes(id, role, avoid, prefer, pin, rank, eventTime, label, deadline)
    if (bytes < 0) return -1
    const flags = requestFlags
    const base = begin(policy, bytes, request, flags, 0, now)
    if (!writeRequest(base, flags, id, role, avoid, prefer, pin, rank, eventTime, label, deadline)) return -1
    return at - base
  }

  // ---- answer ---------------------------------------------------------------------

  let p = 0
  /** The policy's string slots and executor table (`Strings` in binary.rs). */
  let slots = null
  let executors = null
  /** An ASCII string of `n` bytes at `at`: short ones in one call, long ones decoded. */
  const ascii = (at, n) => {
    switch (n) {
      case 0: return ''
      case 1: return String.fromCharCode(u8[at])
      case 2: return String.fromCharCode(u8[at], u8[at + 1])
      case 3: return String.fromCharCode(u8[at], u8[at + 1], u8[at + 2])
      case 4: return String.fromCharCode(u8[at], u8[at + 1], u8[at + 2], u8[at + 3])
      case 5: return String.fromCharCode(u8[at], u8[at + 1], u8[at + 2], u8[at + 3], u8[at + 4])
      case 6: return String.fromCharCode(u8[at], u8[at + 1], u8[at + 2], u8[at + 3], u8[at + 4], u8[at + 5])
      case 7: return String.fromCharCode(u8[at], u8[at + 1], u8[at + 2], u8[at + 3], u8[at + 4], u8[at + 5], u8[at + 6])
      case 8: return String.fromCharCode(u8[at], u8[at + 1], u8[at + 2], u8[at + 3], u8[at + 4], u8[at + 5], u8[at + 6], u8[at + 7])
    }
    if (n <= 16) return String.fromCharCode(u8[at], u8[at + 1], u8[at + 2], u8[at + 3], u8[at + 4], u8[at + 5], u8[at + 6], u8[at + 7]) + ascii(at + 8, n - 8)
    if (latin1 !== undefined) return latin1.toString('latin1', at, at + n)
    if (n > 24) return decoder.decode(u8.subarray(at, at + n))
    let s = ''
    for (let i = at; i < at + n; i += 1) s += String.fromCharCode(u8[i])
    return s
  }
  const str = () => {
    const t = u8[p]
    if (t < 0x80) {
      const s = ascii(p + 1, t)
      p += 1 + t
      return s
    }
    if (t === 0x81) {
      const s = slots[u8[p + 1]]
      p += 2
      return s
    }
    if (t === 0x83) {
      p += 1
      return inputId
    }
    if (t === 0x84) {
      const s = executors[view.getUint32(p + 1, true)]
      p += 5
      return s
    }
    if (t === 0x82) {
      const slot = u8[p + 1]
      p += 2
      const s = str()
      slots[slot] = s
      return s
    }
    if (t === 0x85) {
      const place = view.getUint32(p + 1, true)
      p += 5
      const s = str()
      executors[place] = s
      return s
    }
    const length = view.getUint32(p + 1, true)
    const start = p + 5
    p = start + length
    return decoder.decode(u8.subarray(start, p))
  }
  const u32 = () => {
    const n = view.getUint32(p, true)
    p += 4
    return n
  }
  const f64 = () => {
    const n = view.getFloat64(p, true)
    p += 8
    return n
  }
  // Kind 14: a persist output as a record (its ids, then each exclusion).
  const persist = () => {
    const ids = []
    for (let n = u32(); n > 0; n -= 1) ids.push(str())
    const version = u32()
    const exclusions = []
    for (let n = u32(); n > 0; n -= 1) {
      const id = str()
      const reason = str()
      const kind = str()
      exclusions.push(u8[p++] === 1 ? { id, reason, kind, until: f64() } : { id, reason, kind })
    }
    return { type: 'persist', ids, state: { version, exclusions } }
  }
  const value = () => {
    switch (u8[p++]) {
      case 0: return null
      case 1: return false
      case 2: return true
      case 3: return f64()
      case 4: return str()
      case 14:
        return persist()
      default: return JSON.parse(str())
    }
  }

  /**
   * `fields[key] = value` on a new object, as JSON.parse defines it. The core's keys
   * by name (a named store per key is several times faster than one keyed store for
   * them all); `__proto__` as an own property, as JSON.parse makes it.
   */
  const setField = (fields, key, v) => {
    switch (key) {
      case 'executor': fields.executor = v; return
      case 'request': fields.request = v; return
      case 'role': fields.role = v; return
      case 'lease': fields.lease = v; return
      case 'passed': fields.passed = v; return
      case 'ahead': fields.ahead = v; return
      case 'kind': fields.kind = v; return
      case 'reason': fields.reason = v; return
      case 'until': fields.until = v; return
      case '__proto__': Object.defineProperty(fields, key, { value: v, writable: true, enumerable: true, configurable: true }); return
      default: fields[key] = v
    }
  }

  /** The last `granted` output read (kind 11 takes its fields). */
  let granted = null

  function output() {
    switch (u8[p++]) {
      case 1: {
        const request = str()
        const lease = f64()
        const executor = str()
        const role = str()
        const passed = u32()
        const extras = u8[p++]
        if (extras === 0) return (granted = { type: 'granted', request, lease, executor, role, passed })
        const g = { type: 'granted', request, lease, executor, role }
        if (extras & 2) g.hold = JSON.parse(str())
        g.passed = passed
        if (extras & 1) g.occupied = true
        return (granted = g)
      }
      case 2: {
        const request = str()
        const role = str()
        const report = str()
        return { type: 'waiting', request, role, report, ahead: u32() }
      }
      case 3: {
        const level = LEVELS[u8[p++]]
        const name = str()
        const message = str()
        const fields = {}
        for (let n = u32(); n > 0; n -= 1) setField(fields, str(), value())
        return { type: 'event', level, name, message, fields }
      }
      case 4: return { type: 'cancelled', request: str() }
      case 5: {
        const request = str()
        const reasons = []
        for (let n = u32(); n > 0; n -= 1) reasons.push(str())
        return { type: 'timedOut', request, reasons }
      }
      case 6: return { type: 'unavailable', request: str() }
      case 7: {
        const request = str()
        const role = str()
        const reasons = []
        for (let n = u32(); n > 0; n -= 1) reasons.push(str())
        return { type: 'exhausted', request, role, reasons }
      }
      case 8: {
        const executor = str()
        return { type: 'probe', executor, url: str() }
      }
      case 9: {
        const request = str()
        return { type: 'createMachine', request, executor: str() }
      }
      case 10: return { type: 'preflight', executor: str() }
      case 11: {
        // The grant's event: its fields are those of the grant just read.
        const level = LEVELS[u8[p++]]
        const message = str()
        const { executor, lease, passed, request, role } = granted
        return { type: 'event', level, name: 'granted', message, fields: { executor, lease, passed, request, role } }
      }
      case 12: {
        // The same with the plain message, written here.
        const level = LEVELS[u8[p++]]
        const { executor, lease, passed, request, role } = granted
        return { type: 'event', level, name: 'granted', message: `${executor} takes ${role}`, fields: { executor, lease, passed, request, role } }
      }
      case 13: {
        // A plain release's event: the message is written here from the executor.
        const level = LEVELS[u8[p++]]
        const executor = str()
        const lease = f64()
        return { type: 'event', level, name: 'released', message: `${executor}'s slot is released`, fields: { executor, lease } }
      }
      case 14:
        return persist()
      default: return JSON.parse(str())
    }
  }

  /**
   * One input through the binary step: the answer, or `undefined` for the JSON path.
   * `minLevel` (0 debug, 1 info, 2 warn) leaves the events below it out of the answer
   * (for a driver nobody listens to; `Policy#handle` takes every output); with the bit
   * 4 (`NO_PERSIST`) set, the `persist` outputs too (a driver with no state file).
   */
  function step(policy, input, minLevel = 0) {
    return run(policy, input, minLevel, encode)
  }

  /** `step` of an input the driver built (`encodeTrusted`): the same answer. */
  function stepTrusted(policy, input, minLevel) {
    return run(policy, input, minLevel, encodeTrusted)
  }

  function run(policy, input, minLevel, encodeWith) {
    // A freed policy: the JSON path throws wasm-bindgen's own error.
    if (policy.__wbg_ptr === 0) return undefined
    let length
    try {
      length = encodeWith(policy, input)
    } catch {
      // A getter or a proxy trap threw: the JSON step says so, as it always has.
      return undefined
    }
    if (length < 0) return undefined
    const io = policy[IO]
    const ptr = policy.__step(length, minLevel)
    views()
    io.ptr = ptr
    io.size = view.getUint32(ptr + 4, true)
    const status = u8[ptr + 8]
    if (status === 0) {
      const count = view.getUint32(ptr + 12, true)
      const wakeAt = u8[ptr + 9] === 1 ? view.getFloat64(ptr + 16, true) : null
      p = ptr + HEADER
      slots = io.slots
      executors = io.executors
      // Sized for its outputs (an empty array grows a backing store on its first push,
      // most of which a one- or two-output answer never fills).
      const outputs = new Array(count)
      let read = 0
      try {
        for (; read < count; read += 1) outputs[read] = output()
      } finally {
        // Not read to the end (short of running out of memory, it cannot happen): the
        // slots may differ from the module's; both start again empty.
        if (read !== count) {
          io.slots = newSlots()
          io.executors = newExecutors()
          policy.__ioReset()
        }
      }
      return { outputs, wakeAt }
    }
    // Refused (status 2): an input this reader does not take, or one the policy
    // refused, changing nothing; the JSON step feeds it again and throws its error.
    return undefined
  }

  // `encode` and `encodeTrusted` for the tests that hold them equal.
  return { step, stepTrusted, encode, encodeTrusted }
}
