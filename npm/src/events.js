// How the roster hands out its events: through the platform's own emitter (Node's
// EventEmitter, the browser's EventTarget) behind one small `on/off/once/emit` face.
//
// A listener that throws is the caller's bug, not the roster's: it must not be
// swallowed, nor may it break a decision half-way (the core has already moved on). So
// the roster's state is finished first and the error is thrown again on a fresh task,
// where the platform reports it as any uncaught error (Node: 'uncaughtException';
// browsers: the window's 'error' event).

import { RotaError } from './errors.js'

/** The names `on`/`off`/`once` take. */
export const EMITTER_NAMES = Object.freeze(['event', 'output'])

const rethrowLater = (error) => {
  setTimeout(() => {
    throw error
  }, 0)
}

function check(name, listener) {
  if (!EMITTER_NAMES.includes(name)) {
    throw new RotaError('INVALID_INPUT', `unknown event name ${JSON.stringify(name)}: one of ${EMITTER_NAMES.join(', ')}`)
  }
  if (typeof listener !== 'function') {
    throw new RotaError('INVALID_INPUT', `a '${name}' listener must be a function, not ${listener === null ? 'null' : typeof listener}`)
  }
}

/** Over a Node `EventEmitter` (given by the Node entry). */
export function emitterOver(emitter) {
  // A roster's own helpers and a user's may add many listeners: no leak warning.
  emitter.setMaxListeners?.(0)
  return {
    on(name, listener) {
      check(name, listener)
      emitter.on(name, listener)
    },
    off(name, listener) {
      check(name, listener)
      emitter.off(name, listener)
    },
    once(name, listener) {
      check(name, listener)
      emitter.once(name, listener)
    },
    listenerCount: (name) => emitter.listenerCount(name),
    emit(name, value) {
      try {
        emitter.emit(name, value)
      } catch (error) {
        rethrowLater(error)
      }
    },
  }
}

/**
 * Over an `EventTarget` (browsers, workers, Deno): each value is a `CustomEvent`'s
 * `detail`. The target reports a throwing listener itself (`reportError`) and calls
 * the next one.
 */
export function emitterOverTarget(target = new EventTarget()) {
  /** name → Map(listener → the EventTarget listener wrapping it) */
  const wrappers = new Map(EMITTER_NAMES.map((name) => [name, new Map()]))
  const add = (name, listener, once) => {
    check(name, listener)
    const map = wrappers.get(name)
    if (map.has(listener)) return
    const wrapped = (event) => {
      if (once) map.delete(listener)
      listener(event.detail)
    }
    map.set(listener, wrapped)
    target.addEventListener(name, wrapped, { once })
  }
  return {
    on: (name, listener) => add(name, listener, false),
    once: (name, listener) => add(name, listener, true),
    off(name, listener) {
      check(name, listener)
      const map = wrappers.get(name)
      const wrapped = map.get(listener)
      if (wrapped === undefined) return
      map.delete(listener)
      target.removeEventListener(name, wrapped)
    },
    listenerCount: (name) => wrappers.get(name)?.size ?? 0,
    emit(name, value) {
      try {
        target.dispatchEvent(new CustomEvent(name, { detail: value }))
      } catch (error) {
        rethrowLater(error)
      }
    },
  }
}
