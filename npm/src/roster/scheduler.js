// The clock and the timers of a roster over a log in memory (issue 44): one seam,
// `{ now(), setTimer(at, fn), clearTimer(handle) }`, through which go the log's clock,
// its wake-up timer, the state file's retry timer and the probes' timeouts. The default
// is Node's (or the browser's) clock and timers; `Roster.create({ scheduler })` takes
// another (rota/effect passes Effect's Clock and sleeps, so `TestClock` drives it). A
// shared roster keeps its own: its time is the log's.

const MAX_TIMER_MS = 2 ** 31 - 1
/** The default scheduler's mark: its timers are the platform's (`unref`, `AbortSignal.timeout`). */
const PLATFORM = Symbol('rota.platformTimers')

/** Node's timers over `clock` (default `Date.now`): `setTimer(at)` waits `at - now()`. */
export function platformScheduler(clock = Date.now) {
  return {
    [PLATFORM]: true,
    now: clock,
    setTimer: (at, fn) => setTimeout(fn, Math.min(Math.max(0, at - clock()), MAX_TIMER_MS)),
    clearTimer: (handle) => clearTimeout(handle),
  }
}

/** The problems of a `scheduler` option, as phrases (empty when it is one). */
export function schedulerProblems(scheduler) {
  if (scheduler === undefined) return []
  if (scheduler === null || typeof scheduler !== 'object') {
    return ['scheduler must be { now(), setTimer(at, fn), clearTimer(handle) }']
  }
  const missing = ['now', 'setTimer', 'clearTimer'].filter((name) => typeof scheduler[name] !== 'function')
  return missing.length === 0
    ? []
    : [`scheduler lacks ${missing.map((name) => `${name}()`).join(', ')}: it must be { now(), setTimer(at, fn), clearTimer(handle) }`]
}

/** The roster's scheduler: the option's, else the platform's over `now` (default Date.now); checkOptions (document.js) checked it. */
export function schedulerOf(options) {
  return options.scheduler ?? platformScheduler(options.now ?? Date.now)
}

/** Whether a timer handle is the platform's own (the caller may `unref` it). */
export const isPlatform = (scheduler) => scheduler[PLATFORM] === true

/**
 * An AbortSignal that aborts with a `TimeoutError` after `ms` on the scheduler's time
 * (the platform's: `AbortSignal.timeout`). `clear()` drops its timer.
 */
export function timeoutSignal(scheduler, ms) {
  if (isPlatform(scheduler)) return { signal: AbortSignal.timeout(ms), clear() {} }
  const controller = new AbortController()
  const handle = scheduler.setTimer(scheduler.now() + ms, () =>
    controller.abort(new DOMException(`the operation timed out after ${ms} ms`, 'TimeoutError')),
  )
  return { signal: controller.signal, clear: () => scheduler.clearTimer(handle) }
}
