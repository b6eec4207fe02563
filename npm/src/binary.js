// The binary step behind `Policy#handle`: the JS half of `wasm/src/binary.rs`, which
// documents the format; every number of it (tags, flags, offsets, string codes, slots)
// is read from the module at load (`__wireFormat`), never written here.
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

import { NO_PERSIST } from './roster/Roster.js'

/** Where a policy keeps its buffer's address and size and its string slots. */
const IO = Symbol('rota.io')

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
  // The format, once per module, into local constants (the hot path reads no table).
  const format = JSON.parse(wasm.__wireFormat())
  const { header, input: inputAt, status, inputKind, requestFlag, requestAt, releaseAt, reportFlag, reportAt, failureKind, level, outputKind: O, grantExtra, string: S, slot, table, value: V } = format
  const OUTPUTS_AT = header.outputs
  const [SIZE_AT, STATUS_AT, HAS_WAKE_AT, COUNT_AT, WAKE_AT] = [header.size, header.status, header.hasWake, header.count, header.wakeAt]
  const [KIND_AT, FLAGS_AT, SMALL_AT, NOW_AT, STRINGS] = [inputAt.kind, inputAt.flags, inputAt.small, inputAt.now, inputAt.strings]
  const STATUS_OUTPUTS = status.outputs
  // The keys this step encodes, one bit each, for the check that an input carries only
  // its type's fields (the core's, `format.inputFields`, and `type`); a key not here
  // takes the JSON step.
  const KEYS = ['type', 'now', 'id', 'role', 'avoid', 'prefer', 'pin', 'rank', 'eventTime', 'label', 'deadline', 'lease', 'executor', 'failure', 'up']
  const [K_TYPE, K_NOW, K_ID, K_ROLE, K_AVOID, K_PREFER, K_PIN, K_RANK, K_EVENT_TIME, K_LABEL, K_DEADLINE, K_LEASE, K_EXECUTOR, K_FAILURE, K_UP] = KEYS.map((_, i) => 1 << i)
  const bit = (key) => (KEYS.includes(key) ? 1 << KEYS.indexOf(key) : 0)
  /** An input type's keys, by its kind. */
  const ALLOWED = []
  for (const [type, kind] of Object.entries(inputKind)) ALLOWED[kind] = format.inputFields[type].reduce((keys, key) => keys | bit(key), K_TYPE)
  const [LEASE, TRY_LEASE, RELEASE, TICK, CANCEL, REPORT, RESUME, PROBE_RESULT] = ['lease', 'tryLease', 'release', 'tick', 'cancel', 'report', 'resume', 'probeResult'].map((type) => inputKind[type])
  const [F_RANK, F_EVENT_TIME, F_DEADLINE, F_PREFER, F_PIN, F_LABEL, F_AVOID] = [requestFlag.rank, requestFlag.eventTime, requestFlag.deadline, requestFlag.prefer, requestFlag.pin, requestFlag.label, requestFlag.avoid]
  const [RANK_AT, EVENT_TIME_AT, DEADLINE_AT, LEASE_AT] = [requestAt.rank, requestAt.eventTime, requestAt.deadline, releaseAt.lease]
  const [R_KIND, R_RESET_AT, R_RETRY_AFTER_MS, R_STATUS, R_TAG, R_CODE] = [reportFlag.kind, reportFlag.resetAt, reportFlag.retryAfterMs, reportFlag.status, reportFlag.tag, reportFlag.code]
  const [RESET_AT_AT, RETRY_AFTER_MS_AT, STATUS_AT_REPORT] = [reportAt.resetAt, reportAt.retryAfterMs, reportAt.status]
  /** An input's kind by its JSON `type` (a switch on the literals: cheaper than a lookup). */
  const kindOf = (type) => {
    switch (type) {
      case 'lease': return LEASE
      case 'tryLease': return TRY_LEASE
      case 'release': return RELEASE
      case 'tick': return TICK
      case 'cancel': return CANCEL
      case 'report': return REPORT
      case 'resume': return RESUME
      case 'probeResult': return PROBE_RESULT
      default: return undefined
    }
  }
  const FAILURE_KINDS = new Map(Object.entries(failureKind))
  const LEVELS = []
  for (const [name, byte] of Object.entries(level)) LEVELS[byte] = name
  const [O_JSON, O_GRANTED, O_WAITING, O_EVENT, O_GRANTED_EVENT, O_RELEASED_EVENT, O_PERSIST] = [O.json, O.granted, O.waiting, O.event, O.grantedEvent, O.releasedEvent, O.persist]
  const [X_OCCUPIED, X_HOLD] = [grantExtra.occupied, grantExtra.hold]
  const [S_LONG, S_SLOT, S_SET_SLOT, S_INPUT_ID, S_PLACE, S_SET_PLACE] = [S.long, S.slot, S.setSlot, S.inputId, S.place, S.setPlace]
  const [V_NULL, V_FALSE, V_TRUE, V_NUMBER, V_STRING] = [V.null, V.false, V.true, V.number, V.string]
  /**
   * `__step`'s level byte for the driver's `minLevel` (roster/Roster.js: 0 debug, 1 info,
   * 2 warn, and its bit `NO_PERSIST`), by `minLevel`.
   */
  const STEP_LEVEL = []
  for (const [i, name] of ['debug', 'info', 'warn'].entries()) {
    STEP_LEVEL[i] = level[name]
    STEP_LEVEL[i | NO_PERSIST] = level[name] | format.step.noPersist
  }
  /** binary.rs's slots, all empty (as there; an empty string is never sent by reference). */
  const newSlots = () => new Array(slot.count).fill('')
  /** binary.rs's tables (`Strings::tables`): strings by an executor's place, empty at first. */
  const newTables = () => Array.from({ length: table.count }, () => [])

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
  const present = (value) => value !== undefined && value !== null

  // ---- the parts of `encode` that `encodeTrusted` shares ----------------------------

  /**
   * The id of the lease or tryLease being encoded (else undefined): the answer names
   * it as `S_INPUT_ID`, this string, rather than sending it back.
   */
  let inputId
  /** The flags of the last `requestBytes` (which fields a request carries). */
  let requestFlags = 0
  /**
   * A lease or tryLease input's checks: the most bytes it takes, its flags in
   * `requestFlags`; -1 for the JSON path. `undefined` is an absent field.
   */
  function requestBytes(id, role, avoid, prefer, pin, rank, eventTime, label, deadline) {
    if (!isString(id) || !isString(role)) return -1
    if (!optional(rank, isInt) || !optional(eventTime, isWhole) || !optional(deadline, isWhole)) return -1
    if (!optional(prefer, isString) || !optional(pin, isString) || !optional(label, isString)) return -1
    let flags = 0
    let bytes = STRINGS + size(id) + size(role)
    if (present(rank)) flags |= F_RANK
    if (present(eventTime)) flags |= F_EVENT_TIME
    if (present(deadline)) flags |= F_DEADLINE
    if (present(prefer)) (flags |= F_PREFER), (bytes += size(prefer))
    if (present(pin)) (flags |= F_PIN), (bytes += size(pin))
    if (present(label)) (flags |= F_LABEL), (bytes += size(label))
    if (avoid !== undefined) {
      if (!Array.isArray(avoid) || Object.getPrototypeOf(avoid) !== Array.prototype || avoid.toJSON !== undefined) return -1
      flags |= F_AVOID
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
    if (flags & F_RANK) view.setFloat64(base + RANK_AT, rank, true)
    if (flags & F_EVENT_TIME) view.setFloat64(base + EVENT_TIME_AT, eventTime, true)
    if (flags & F_DEADLINE) view.setFloat64(base + DEADLINE_AT, deadline, true)
    if (flags & F_PREFER && !putString(prefer)) return false
    if (flags & F_PIN && !putString(pin)) return false
    if (flags & F_LABEL && !putString(label)) return false
    if (flags & F_AVOID) {
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
      io = { ptr, size: Math.max(bytes, 256), slots: io === undefined ? newSlots() : io.slots, tables: io === undefined ? newTables() : io.tables }
      policy[IO] = io
    }
    views()
    inputId = undefined
    const base = io.ptr
    u8[base + KIND_AT] = kind
    u8[base + FLAGS_AT] = flags
    u8[base + SMALL_AT] = small
    view.setFloat64(base + NOW_AT, now, true)
    at = base + STRINGS
    return base
  }

  /**
   * A report input from its failure's fields (`undefined` or `null` for an absent
   * one): its length, or -1 for the JSON path.
   */
  function writeReport(policy, now, executor, kind, tag, status, code, message, resetAt, retryAfterMs) {
    let flags = 0
    let small = 0
    if (present(kind)) {
      small = FAILURE_KINDS.get(kind)
      if (small === undefined) return -1
      flags |= R_KIND
    }
    if (message !== undefined && !isString(message)) return -1
    if (!optional(tag, isString) || !optional(code, isString)) return -1
    if (!optional(status, isWhole) || !optional(resetAt, isWhole) || !optional(retryAfterMs, isWhole)) return -1
    message ??= ''
    let bytes = STRINGS + size(executor) + size(message)
    if (present(tag)) (flags |= R_TAG), (bytes += size(tag))
    if (present(code)) (flags |= R_CODE), (bytes += size(code))
    if (present(status)) flags |= R_STATUS
    if (present(resetAt)) flags |= R_RESET_AT
    if (present(retryAfterMs)) flags |= R_RETRY_AFTER_MS
    const base = begin(policy, bytes, REPORT, flags, small, now)
    if (!putString(executor) || !putString(message)) return -1
    if (flags & R_TAG && !putString(tag)) return -1
    if (flags & R_CODE && !putString(code)) return -1
    if (flags & R_STATUS) view.setFloat64(base + STATUS_AT_REPORT, status, true)
    if (flags & R_RESET_AT) view.setFloat64(base + RESET_AT_AT, resetAt, true)
    if (flags & R_RETRY_AFTER_MS) view.setFloat64(base + RETRY_AFTER_MS_AT, retryAfterMs, true)
    return at - base
  }

  /** A report's failure (a plain object): its length, or -1 for the JSON path. */
  function writeFailure(policy, now, executor, failure) {
    let kind, tag, status, code, message, resetAt, retryAfterMs
    for (const key in failure) {
      const value = failure[key]
      if (value === undefined) continue
      switch (key) {
        case 'kind': kind = value; break
        case 'tag': tag = value; break
        case 'status': status = value; break
        case 'code': code = value; break
        case 'message': message = value; break
        case 'resetAt': resetAt = value; break
        case 'retryAfterMs': retryAfterMs = value; break
        default: return -1
      }
    }
    return writeReport(policy, now, executor, kind, tag, status, code, message, resetAt, retryAfterMs)
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
    if (kind === undefined || (seen & ~ALLOWED[kind]) !== 0 || !isWhole(now)) return -1
    let flags = 0
    let small = 0
    let bytes = STRINGS
    switch (kind) {
      case LEASE:
      case TRY_LEASE:
        bytes = requestBytes(id, role, avoid, prefer, pin, rank, eventTime, label, deadline)
        if (bytes < 0) return -1
        flags = requestFlags
        break
      case RELEASE:
        if (!isWhole(lease)) return -1
        break
      case TICK:
        break
      case CANCEL:
        if (!isString(id)) return -1
        bytes += size(id)
        break
      case REPORT:
        if (!isString(executor) || !isPlain(failure)) return -1
        return writeFailure(policy, now, executor, failure)
      case RESUME:
        if (!isString(executor)) return -1
        bytes += size(executor)
        break
      case PROBE_RESULT:
        if (!isString(executor) || typeof up !== 'boolean') return -1
        bytes += size(executor)
        small = up ? 1 : 0
        break
    }

    const base = begin(policy, bytes, kind, flags, small, now)
    switch (kind) {
      case LEASE:
      case TRY_LEASE:
        if (!writeRequest(base, flags, id, role, avoid, prefer, pin, rank, eventTime, label, deadline)) return -1
        break
      case RELEASE:
        view.setFloat64(base + LEASE_AT, lease, true)
        break
      case CANCEL:
        if (!putString(id)) return -1
        break
      case RESUME:
      case PROBE_RESULT:
        if (!putString(executor)) return -1
        break
    }
    return at - base
  }

  /**
   * `encode` of an input the driver built (roster/Roster.js): a lease or tryLease input from
   * `#requestInput`, a release from `#releaseLease`, a report from `report()` (its
   * failure from `failureFacts`), each an object literal of its type's keys (data
   * properties, `undefined` for an absent field), whatever values it carries. Such an
   * object passes `encode`'s walk of its keys, so this skips the walk
   * and checks the values, the same checks in the same order: the same bytes, the same
   * -1 (test/encode-trusted.test.mjs holds them equal). It saves the walk's cost on
   * every lease and release of a Roster. Any other input: `encode`.
   */
  function encodeTrusted(policy, input) {
    const type = input.type
    const request = type === 'lease' ? LEASE : type === 'tryLease' ? TRY_LEASE : 0
    if ((request === 0 && type !== 'release' && type !== 'report') || input.toJSON !== undefined || polluted()) return encode(policy, input)
    const now = input.now
    if (!isWhole(now)) return -1
    if (type === 'report') {
      const { executor, failure } = input
      if (!isString(executor) || !isPlain(failure)) return -1
      return writeFailure(policy, now, executor, failure)
    }
    if (request === 0) {
      const lease = input.lease
      if (!isWhole(lease)) return -1
      const base = begin(policy, STRINGS, RELEASE, 0, 0, now)
      view.setFloat64(base + LEASE_AT, lease, true)
      return at - base
    }
    const { id, role, avoid, prefer, pin, rank, eventTime, label, deadline } = input
    // A purpose, a borrow, a tenant or an affinity key has no place in the binary record: the JSON step.
    if (input.purpose !== undefined || input.borrow !== undefined || input.tenant !== undefined || input.affinity !== undefined) return -1
    const bytes = requestBytes(id, role, avoid, prefer, pin, rank, eventTime, label, deadline)
    if (bytes < 0) return -1
    const flags = requestFlags
    const base = begin(policy, bytes, request, flags, 0, now)
    if (!writeRequest(base, flags, id, role, avoid, prefer, pin, rank, eventTime, label, deadline)) return -1
    return at - base
  }

  // ---- answer ---------------------------------------------------------------------

  let p = 0
  /** The policy's string slots and tables (`Strings` in binary.rs). */
  let slots = null
  let tables = null
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
    if (t < S_LONG) {
      const s = ascii(p + 1, t)
      p += 1 + t
      return s
    }
    if (t === S_SLOT) {
      const s = slots[u8[p + 1]]
      p += 2
      return s
    }
    if (t === S_INPUT_ID) {
      p += 1
      return inputId
    }
    if (t === S_PLACE) {
      const s = tables[u8[p + 1]][view.getUint32(p + 2, true)]
      p += 6
      return s
    }
    if (t === S_SET_SLOT) {
      const slot = u8[p + 1]
      p += 2
      const s = str()
      slots[slot] = s
      return s
    }
    if (t === S_SET_PLACE) {
      const place = tables[u8[p + 1]]
      const i = view.getUint32(p + 2, true)
      p += 6
      const s = str()
      place[i] = s
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
  const strs = () => {
    const list = []
    for (let n = u32(); n > 0; n -= 1) list.push(str())
    return list
  }
  // A persist output (its ids, then each exclusion).
  const persist = () => {
    const ids = strs()
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
      case V_NULL: return null
      case V_FALSE: return false
      case V_TRUE: return true
      case V_NUMBER: return f64()
      case V_STRING: return str()
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

  /** The last `granted` output read (a granted event takes its fields). */
  let granted = null

  function output() {
    switch (u8[p++]) {
      case O_GRANTED: {
        const request = str()
        const lease = f64()
        const executor = str()
        const role = str()
        const passed = u32()
        const extras = u8[p++]
        if (extras === 0) return (granted = { type: 'granted', request, lease, executor, role, passed })
        const g = { type: 'granted', request, lease, executor, role }
        if (extras & X_HOLD) g.hold = JSON.parse(str())
        g.passed = passed
        if (extras & X_OCCUPIED) g.occupied = true
        return (granted = g)
      }
      case O_GRANTED_EVENT: {
        // The grant's event: its fields are those of the grant just read.
        const level = LEVELS[u8[p++]]
        const message = str()
        const { executor, lease, passed, request, role } = granted
        return { type: 'event', level, name: 'granted', message, fields: { executor, lease, passed, request, role } }
      }
      case O_RELEASED_EVENT: {
        const level = LEVELS[u8[p++]]
        const executor = str()
        const lease = f64()
        return { type: 'event', level, name: 'released', message: str(), fields: { executor, lease } }
      }
      case O_WAITING: {
        const request = str()
        const role = str()
        const report = str()
        return { type: 'waiting', request, role, report, ahead: u32() }
      }
      case O_EVENT: {
        const level = LEVELS[u8[p++]]
        const name = str()
        const message = str()
        const fields = {}
        for (let n = u32(); n > 0; n -= 1) setField(fields, str(), value())
        return { type: 'event', level, name, message, fields }
      }
      case O_PERSIST:
        return persist()
      case O_JSON: return JSON.parse(str())
      default: throw new Error(`rota: an output of kind ${u8[p - 1]} this package cannot read`)
    }
  }

  /**
   * One input through the binary step: the answer, or `undefined` for the JSON path.
   * `minLevel` (roster/Roster.js: 0 debug, 1 info, 2 warn) leaves the events below it out of
   * the answer (for a driver nobody listens to; `Policy#handle` takes every output);
   * with the bit `NO_PERSIST` set, the `persist` outputs too (a driver with no state
   * file).
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
    const ptr = policy.__step(length, STEP_LEVEL[minLevel])
    views()
    io.ptr = ptr
    io.size = view.getUint32(ptr + SIZE_AT, true)
    if (u8[ptr + STATUS_AT] === STATUS_OUTPUTS) {
      const count = view.getUint32(ptr + COUNT_AT, true)
      const wakeAt = u8[ptr + HAS_WAKE_AT] === 1 ? view.getFloat64(ptr + WAKE_AT, true) : null
      p = ptr + OUTPUTS_AT
      slots = io.slots
      tables = io.tables
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
          io.tables = newTables()
          policy.__ioReset()
        }
      }
      return { outputs, wakeAt }
    }
    // Refused: an input this reader does not take, or one the policy refused,
    // changing nothing; the JSON step feeds it again and throws its error.
    return undefined
  }

  // `encode` and `encodeTrusted` for the tests that hold them equal; the format for
  // the tests that check it.
  return { step, stepTrusted, encode, encodeTrusted, format }
}
