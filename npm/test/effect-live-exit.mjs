import * as Effect from 'effect/Effect'
import { ExecutorSpec, makeRoster } from 'rota/effect'
const roster = await Effect.runPromise(makeRoster({ executors: [ExecutorSpec.make({ id: 'a', harness: 'pi', roles: ['coder'] })], events: { publish: () => Effect.void } }))
const exclusion = await Effect.runPromise(roster.report('a', { _tag: 'UsageLimitError', message: 'limit' }))
console.log(exclusion.until - Date.now() > 29 * 60_000 ? 'excluded' : 'wrong')
