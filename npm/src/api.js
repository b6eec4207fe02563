// The package's exports, over one initialised wasm-bindgen module. Both entries
// (Node and browser) re-export this with their platform.

import { failureFacts, parseRetryAfter, FAILURE_KINDS } from './classify.js'
import { DRIVER_STEP, HANDLE_AT_LEVEL, NO_PERSIST, defineRoster } from './roster/Roster.js'
import { Lease } from './roster/requests.js'
import { combineUpdates } from './roster/state.js'
import { ERROR_CODES, RotaError } from './errors.js'
import { binaryStep } from './binary.js'
import { stateRule } from './state-rule.js'

/**
 * The first number in a plain input that JSON cannot carry (NaN, ±Infinity, which
 * JSON.stringify would quietly write as `null`, an absent field), as `{ path, value }`.
 */
function nonFinite(value, path) {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : { path, value }
  if (value === null || typeof value !== 'object' || typeof value.toJSON === 'function') return undefined
  const array = Array.isArray(value)
  for (const key of Object.keys(value)) {
    const found = nonFinite(value[key], array ? `${path}[${key}]` : path === '' ? key : `${path}.${key}`)
    if (found !== undefined) return found
  }
  return undefined
}

const LEVELS = ['debug', 'info', 'warn']

/**
 * `Policy#handle`'s JSON path: one input as a plain object, its outputs as plain
 * objects. The module's `handleJson` does the step (the canonical text every host
 * answers); the JS engine's own JSON.stringify and JSON.parse do the rest, with no
 * call from the module back into JS. Throws the core's error (a `RotaError` with its
 * `code`) for a rejected input, which changes nothing.
 *
 * @this {{ handleJson(text: string): string }}
 */
function handleJson(input) {
  let text
  if (input === undefined) {
    text = 'null'
  } else {
    try {
      text = JSON.stringify(input)
    } catch (error) {
      throw new RotaError('INVALID_INPUT', `invalid input: the input cannot be written as JSON (${error?.message ?? ''})`)
    }
    // JSON.stringify gives undefined for a function or a symbol.
    if (text === undefined) throw new RotaError('INVALID_INPUT', 'invalid input: the input is not a JSON value')
    // NaN and the infinities are written as `null`: refused, naming the field, rather
    // than read as an absent one.
    if (text.includes('null')) {
      const found = nonFinite(input, '')
      if (found !== undefined) {
        const type = typeof input?.type === 'string' ? `${input.type}: ` : ''
        throw new RotaError('INVALID_INPUT', `invalid input: ${type}\`${found.path}\` is ${found.value}, a number JSON cannot carry`)
      }
    }
  }
  const answer = JSON.parse(this.handleJson(text))
  const { error } = answer
  if (error !== undefined) {
    throw new RotaError(error.code, error.message, error.violations === undefined ? {} : { violations: error.violations })
  }
  return answer
}

/**
 * A call on a freed `Policy` (after `free()`) answers `CLOSED` naming the call, not
 * wasm-bindgen's bare `Error` ("null pointer passed to rust"): every public method and
 * getter of the class checks the pointer first, and freeing twice is harmless. The
 * module's own `__` methods are left as they are (the binary step checks the pointer
 * before it calls them).
 */
function guardFreed(prototype) {
  const closed = (name) =>
    new RotaError('CLOSED', `Policy#${name}: this policy was freed (free() was called); create a new one`)
  for (const name of Object.getOwnPropertyNames(prototype)) {
    if (name === 'constructor' || name.startsWith('__')) continue
    const descriptor = Object.getOwnPropertyDescriptor(prototype, name)
    if (name === 'free') {
      // Freeing twice is harmless (wasm-bindgen's own throws on the second).
      const free = descriptor.value
      descriptor.value = function () {
        if (this.__wbg_ptr !== 0) free.call(this)
      }
    } else if (typeof descriptor.value === 'function') {
      const method = descriptor.value
      descriptor.value = function (a, b, c) {
        if (this.__wbg_ptr === 0) throw closed(name)
        return method.call(this, a, b, c)
      }
    } else if (typeof descriptor.get === 'function') {
      const get = descriptor.get
      descriptor.get = function () {
        if (this.__wbg_ptr === 0) throw closed(name)
        return get.call(this)
      }
    } else {
      continue
    }
    Object.defineProperty(prototype, name, descriptor)
  }
}

/** A module without the binary step: every input takes the JSON step. */
const JSON_STEP_ONLY = { step: () => undefined, stepTrusted: () => undefined }

/**
 * Wraps the wasm-bindgen module: the raw `Policy` class and the document utilities,
 * plus the `Roster` driver for `platform`.
 */
export function buildApi(wasm, platform) {
  if (!Object.hasOwn(wasm.Policy.prototype, 'handle')) {
    // The common inputs take the binary step (`binary.js`) where the module has it
    // (Node's; the browser's leaves it out for its download size); every other input,
    // and any it does not fully recognise, the JSON one: the same answers and errors.
    const { step, stepTrusted } = wasm.__wireFormat ? binaryStep(wasm) : JSON_STEP_ONLY
    // The JSON step's answer without the events below `minLevel` (and the `persist`
    // outputs with `NO_PERSIST`), as the binary step leaves them out.
    const atLevel = (answer, minLevel) => {
      const level = minLevel & ~NO_PERSIST
      const persists = (minLevel & NO_PERSIST) === 0
      if (minLevel > 0) {
        answer.outputs = answer.outputs.filter((o) => (o.type === 'event' ? LEVELS.indexOf(o.level) >= level : persists || o.type !== 'persist'))
      }
      return answer
    }
    function handle(input) {
      const answer = step(this, input, 0)
      return answer === undefined ? handleJson.call(this, input) : answer
    }
    // The driver's step (`HANDLE_AT_LEVEL`): the answer without the events below `minLevel`.
    function handleAtLevel(input, minLevel) {
      const answer = step(this, input, minLevel)
      return answer === undefined ? atLevel(handleJson.call(this, input), minLevel) : answer
    }
    // The roster's own inputs (`DRIVER_STEP`): `handleAtLevel`, through `stepTrusted`.
    function driverStep(input, minLevel) {
      const answer = stepTrusted(this, input, minLevel)
      return answer === undefined ? atLevel(handleJson.call(this, input), minLevel) : answer
    }
    if (typeof wasm.Policy.importState !== 'function') {
      // The browser module leaves the import out (its download budget): said, not a TypeError.
      Object.defineProperty(wasm.Policy, 'importState', {
        value: () => {
          throw new RotaError('NOT_IN_BUILD', "Policy.importState is not in rota's browser build (left out for its download size): import an exported state in Node or Rust, or keep Policy#clone() checkpoints in the page")
        },
        writable: true,
        configurable: true,
      })
    }
    guardFreed(wasm.Policy.prototype)
    Object.defineProperty(wasm.Policy.prototype, 'handle', { value: handle, writable: true, configurable: true })
    Object.defineProperty(wasm.Policy.prototype, HANDLE_AT_LEVEL, { value: handleAtLevel, writable: true, configurable: true })
    Object.defineProperty(wasm.Policy.prototype, DRIVER_STEP, { value: driverStep, writable: true, configurable: true })
  }
  const Roster = defineRoster(wasm, platform)
  let seedClassifier
  return {
    Roster,
    Lease,
    Policy: wasm.Policy,
    validate: (document, kinds) => wasm.validate(document, kinds),
    merge: (user, repo) => wasm.merge(user ?? null, repo ?? null),
    narrow: (document, ids = []) => wasm.narrow(document, typeof ids === 'string' ? ids.split(',').map((s) => s.trim()).filter(Boolean) : ids).document,
    check: (document, kinds) => wasm.check(document, kinds),
    redact: (document) => wasm.redact(document),
    executorEntries: (document) => wasm.executorEntries(document),
    parseDuration: (text) => wasm.parseDuration(text),
    formatDuration: (ms) => wasm.formatDuration(ms),
    defaultOptions: () => wasm.defaultOptions(),
    defaultRoles: () => wasm.defaultRoles(),
    coreVersion: wasm.version(),
    stateFile: stateRule(wasm),
    combineUpdates,
    // The core's classifier over the facts `failureFacts` extracts: `{ kind, rule }`,
    // with the seed's signals and `signals` (as a document's top-level `signals`).
    // `resetTime: 'message'` (as a document's) reads a usage limit's reset time from its
    // message at `now` (default the clock's): the answer's `resetAt`.
    classifyFailure: (error, { now, signals, resetTime } = {}) => {
      if (signals === undefined && resetTime === undefined) {
        // The seed's signals alone: one empty policy serves every call (classifying
        // changes nothing in it).
        seedClassifier ??= new wasm.Policy({ executors: [] }, undefined)
        return seedClassifier.classify(failureFacts(error, { now }))
      }
      const document = { executors: [] }
      if (signals !== undefined) document.signals = signals
      if (resetTime !== undefined) document.resetTime = resetTime
      const policy = new wasm.Policy(document, undefined)
      try {
        const at = now ?? Date.now()
        return policy.classify(failureFacts(error, { now: at }), at)
      } finally {
        policy.free()
      }
    },
    // A status that is not a whole number is no HTTP answer (the module takes a u32).
    probeIsUp: (status) => Number.isInteger(status) && status >= 0 && wasm.probeIsUp(status),
  }
}

/** A clone's name: its executor's id and its clone number (`codex#2`, as the core names it). */
export const cloneName = (id, n) => `${id}#${n}`

export { failureFacts, parseRetryAfter, FAILURE_KINDS, ERROR_CODES, RotaError }
