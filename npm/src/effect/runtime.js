// What rota/effect's services share: the Effect services they were made with (to run
// the caller's Effects from the Node roster's callbacks) and the roster's clock and
// timers on Effect's Clock (the roster's `scheduler` option).

import * as Clock from 'effect/Clock'
import * as Duration from 'effect/Duration'
import * as Effect from 'effect/Effect'
import * as Option from 'effect/Option'
import * as Scope from 'effect/Scope'

/**
 * `{ runFork, runPromise, now, scheduler }` for the current services. `scheduler` sleeps
 * on Effect's scheduler (a TestClock moves it), then runs `afterTimer()`; on Effect's
 * live Clock (Date.now and setTimeout, as Node's) it is undefined: the Node roster's own
 * timers keep the same time, and its wake-up timer does not keep a process alive (an
 * Effect sleep would, until the next exclusion ends, for a roster no Scope closes).
 */
export const runtime = (afterTimer = () => Effect.void) =>
  Effect.gen(function* () {
    const services = yield* Effect.context()
    const runFork = Effect.runForkWith(services)
    const runPromise = Effect.runPromiseWith(services)
    const clock = yield* Clock.clockWith(Effect.succeed)
    const now = () => clock.currentTimeMillisUnsafe()
    const live = clock.constructor === Clock.Clock.defaultValue().constructor
    const scheduler = live
      ? undefined
      : {
          now,
          setTimer: (at, fn) =>
            runFork(
              Effect.yieldNow.pipe(
                Effect.andThen(Effect.suspend(() => Effect.sleep(Duration.millis(Math.max(0, at - now()))))),
                Effect.andThen(Effect.sync(fn)),
                Effect.andThen(Effect.suspend(afterTimer)),
              ),
            ),
          clearTimer: (fiber) => fiber.interruptUnsafe(),
        }
    return { runFork, runPromise, now, scheduler }
  })

/** Closes `roster` with the current Scope, when there is one. */
export const closeWithScope = (roster) =>
  Effect.flatMap(Effect.serviceOption(Scope.Scope), (scope) =>
    Option.isSome(scope) ? Scope.addFinalizer(scope.value, Effect.promise(() => roster.close())) : Effect.void,
  )
