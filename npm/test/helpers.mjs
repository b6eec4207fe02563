// Shared test helpers: a virtual clock, roster documents, temp dirs, a real HTTP
// health server on 127.0.0.1, and waiting for a roster's events (no sleeps).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export const START = Date.UTC(2026, 0, 1)

/** A virtual clock for `now`: tests move it and call `roster.tick()`. */
export function virtualClock(start = START) {
  let t = start
  const clock = () => t
  clock.advance = (ms) => {
    t += ms
    return t
  }
  clock.set = (value) => {
    t = value
  }
  return clock
}

export function executor(id, fields = {}) {
  return { id, harness: 'pi', roles: ['coder'], ...fields }
}

export function document(...executors) {
  return { executors }
}

/** A temp directory, removed by the returned cleanup. */
export function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), 'rota-state-'))
  t?.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Resolves with the first event named `name` (and matching `test`). */
export function nextEvent(roster, name, test = () => true) {
  return new Promise((resolve) => {
    const listener = (event) => {
      if (event.name === name && test(event)) {
        roster.off('event', listener)
        resolve(event)
      }
    }
    roster.on('event', listener)
  })
}

/** Resolves with the first output of `type` (and matching `test`). */
export function nextOutput(roster, type, test = () => true) {
  return new Promise((resolve) => {
    const listener = (output) => {
      if (output.type === type && test(output)) {
        roster.off('output', listener)
        resolve(output)
      }
    }
    roster.on('output', listener)
  })
}

/**
 * A real HTTP server on 127.0.0.1. `status` is what /health answers; `hang` makes it
 * never answer; `requests` counts them; `waitForRequest()` resolves on the next one (one waiter per request).
 */
export async function healthServer(t) {
  const state = { status: 503, hang: false, requests: 0, inFlight: 0, maxInFlight: 0, waiters: [], headers: {} }
  const sockets = new Set()
  const server = createServer((request, response) => {
    state.requests += 1
    state.inFlight += 1
    state.maxInFlight = Math.max(state.maxInFlight, state.inFlight)
    state.waiters.shift()?.(request.url)
    const finish = () => {
      state.inFlight -= 1
    }
    response.on('close', finish)
    if (state.hang) return
    response.writeHead(state.status, { 'content-type': 'text/plain', ...state.headers })
    response.end(state.body ?? `status ${state.status}`)
  })
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  const close = () =>
    new Promise((resolve) => {
      for (const socket of sockets) socket.destroy()
      server.close(() => resolve())
    })
  t?.after(close)
  return {
    state,
    port,
    url: `http://127.0.0.1:${port}/health`,
    base: `http://127.0.0.1:${port}`,
    waitForRequest: () => new Promise((resolve) => state.waiters.push(resolve)),
    close,
    server,
  }
}

/** A port with nothing listening (bound, then closed). */
export async function closedPort() {
  const server = createServer()
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** Settles after every queued microtask and one macrotask turn. */
export const flush = () => new Promise((resolve) => setImmediate(resolve))

/** Rejects with the error a promise rejects with, or fails when it resolves. */
export async function rejection(promise) {
  try {
    await promise
  } catch (error) {
    return error
  }
  throw new Error('expected a rejection')
}

/** The error a function throws. */
export function thrown(fn) {
  try {
    fn()
  } catch (error) {
    return error
  }
  throw new Error('expected a throw')
}

/**
 * Writes a script into the test project (so its `import 'rota'` resolves to the
 * installed package) for a child process; removed after the test.
 */
export function projectScript(t, name, text) {
  const project = process.env.ROTA_TEST_PROJECT
  if (project === undefined) throw new Error('ROTA_TEST_PROJECT is not set: run the tests through test/run.mjs')
  const path = join(project, `${process.pid}-${name}`)
  writeFileSync(path, text)
  t?.after(() => rmSync(path, { force: true }))
  return path
}

/**
 * Keeps the test process alive while the roster waits on what never holds a process
 * (its unref'd timers, AbortSignal.timeout, file watchers).
 */
export function keepAlive(t) {
  const handle = setInterval(() => {}, 1_000)
  t.after(() => clearInterval(handle))
}
