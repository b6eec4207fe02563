// The failure extractor on real errors: @llm4ts/core@2.7.2's own tagged error classes
// (the roster seed's errors), HTTP answers of a real server on 127.0.0.1 (fetch
// Responses, SDK- and axios-style errors), real connection failures from fetch, cause
// chains. The extractor only finds facts; the kinds are the core's (`classifyFailure`,
// the same answers as the conformance vectors `classify-*`).

import assert from 'node:assert/strict'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { test } from 'node:test'
import { pathToFileURL } from 'node:url'
import { FAILURE_KINDS, Roster, classifyFailure, failureFacts, parseRetryAfter, probeIsUp } from 'rota'
import { START, closedPort, document, executor, healthServer, virtualClock } from './helpers.mjs'

// The package's dev dependencies (npm/node_modules), outside the test project.
const devModules = process.env.ROTA_DEV_MODULES ?? join(import.meta.dirname ?? '.', '..', 'node_modules')
const dev = (path) => import(pathToFileURL(join(devModules, path)).href)
const Errors = await dev('@llm4ts/core/dist/Errors.js')
const DateTime = await dev('effect/dist/DateTime.js')
const Duration = await dev('effect/dist/Duration.js')
const Effect = await dev('effect/dist/Effect.js')

const kindOf = (error, options) => classifyFailure(error, options).kind

test("classifyFailure with resetTime 'message' reads a usage limit's reset time from its message (issue 43)", () => {
  const now = 1_800_000_000_000 // 2027-01-15T08:00Z
  const message = "You've hit your session limit · resets 8:20am (Europe/Rome)"
  const limit = new Errors.UsageLimitError({ provider: 'claude', message })
  assert.deepEqual(classifyFailure(limit, { now, resetTime: 'message' }), { kind: 'usageLimit', rule: 'tag', resetAt: 1_800_084_000_000 })
  // Without it (the seed's rules) the message is not read.
  assert.deepEqual(classifyFailure(limit, { now }), { kind: 'usageLimit', rule: 'tag' })
  // A report's own resetAt wins: nothing is read.
  const given = new Errors.UsageLimitError({ provider: 'claude', message, resetAt: DateTime.makeUnsafe(now + 60_000) })
  assert.deepEqual(classifyFailure(given, { now, resetTime: 'message' }), { kind: 'usageLimit', rule: 'tag' })
  // America/New_York, 2:30pm in summer time (EDT, -4): 18:30Z.
  const july = Date.UTC(2027, 6, 15, 8)
  const codex = new Error('usage limit reached · resets 2:30pm (America/New_York)')
  assert.equal(classifyFailure(codex, { now: july, resetTime: 'message' }).resetAt, Date.UTC(2027, 6, 15, 18, 30))
})

test("@llm4ts/core's tagged errors: the tag, the error's own message, resetAt and retryAfter", async () => {
  const resetAt = DateTime.makeUnsafe(START + 2_700_000)
  const usage = new Errors.UsageLimitError({ provider: 'claude', message: "You've hit your limit · resets 3pm", resetAt })
  assert.deepEqual(failureFacts(usage), { tag: 'UsageLimitError', message: "You've hit your limit · resets 3pm", resetAt: START + 2_700_000 })
  assert.deepEqual(failureFacts(new Errors.UsageLimitError({ provider: 'claude', message: 'Too many requests' })), {
    tag: 'UsageLimitError',
    message: 'Too many requests',
  })
  const rate = new Errors.RateLimitError({ retryAfter: Duration.seconds(30) })
  assert.deepEqual(failureFacts(rate), { tag: 'RateLimitError', message: 'rate limited; retry after 30s', retryAfterMs: 30_000 })
  assert.deepEqual(failureFacts(new Errors.RateLimitError({})), { tag: 'RateLimitError', message: 'rate limited' })
  assert.equal(failureFacts(new Errors.RateLimitError({ retryAfter: Duration.infinity })).retryAfterMs, undefined)
  assert.equal(failureFacts(new Errors.RateLimitError({ retryAfter: Duration.nanos(2_500_000_000n) })).retryAfterMs, 2_500)
  const auth = new Errors.AuthenticationError({ message: 'OAuth token has expired.' })
  assert.deepEqual(failureFacts(auth), { tag: 'AuthenticationError', message: 'OAuth token has expired.' })
  // No `HTTP 503:` prefix: the seed quotes the error's message as it is.
  const provider = new Errors.ProviderError({ message: '503: engine is recovering; retry shortly', cause: Object.assign(new Error('x'), { status: 503 }) })
  assert.deepEqual(failureFacts(provider), { tag: 'ProviderError', status: 503, message: '503: engine is recovering; retry shortly' })

  // The kinds, as the seed's exclusionFor and isOutage give them.
  const cases = [
    [usage, 'usageLimit'],
    [rate, 'rateLimit'],
    [auth, 'authentication'],
    [provider, 'outage'],
    [new Errors.ProviderError({ message: 'Metal backend is unhealthy' }), 'outage'],
    [new Errors.ProviderError({ message: '502 Bad Gateway' }), 'other'],
    [new Errors.ProviderError({ message: 'connection reset by peer' }), 'other'],
    [new Errors.ProviderError({ message: 'service unavailable' }), 'other'],
    [new Errors.ProviderError({ message: 'model overloaded' }), 'other'],
    [new Errors.ProviderError({ message: 'failed to load model: prompt is too long' }), 'other'],
    [new Errors.ProviderError({ message: "There's an issue with the selected model (claude-9)." }), 'modelUnavailable'],
    [new Errors.InvalidRequestError({ message: 'bad request' }), 'other'],
    [new Errors.ParseError({ message: 'unexpected end', raw: '{' }), 'other'],
    [new Errors.ToolError({ toolName: 'grep', detail: 'exit 2' }), 'other'],
    [new Errors.ConfigError({ message: 'no key' }), 'other'],
    [new Errors.TimeoutError({ duration: Duration.minutes(2) }), 'other'],
    [new Errors.TurnLimitError({ limit: 50 }), 'other'],
  ]
  for (const [error, kind] of cases) assert.equal(kindOf(error), kind, `${error._tag}: ${error.message}`)

  // As an Effect program fails with it, and wrapped in a cause chain.
  const failed = await Effect.runPromise(Effect.fail(auth)).catch((error) => error)
  assert.equal(kindOf(failed), 'authentication')
  const wrapped = new Error('the coder step failed', { cause: usage })
  assert.deepEqual(failureFacts(wrapped), failureFacts(usage))
})

test('the roster reports the seed errors as the seed does', async (t) => {
  const clock = virtualClock()
  const roster = await Roster.create({
    document: document(executor('a'), executor('b'), executor('c'), executor('d', { health: 'http://127.0.0.1:9/health' })),
    now: clock,
    probe: false,
  })
  t.after(() => roster.close())
  assert.equal(roster.report('a', new Errors.AuthenticationError({ message: 'OAuth token has expired.' })).kind, 'run')
  const usage = roster.report('b', new Errors.UsageLimitError({ provider: 'claude', message: 'Too many requests' }))
  assert.deepEqual([usage.kind, usage.until], ['until', clock() + 30 * 60_000])
  for (let i = 0; i < 2; i++) assert.equal(roster.report('c', new Errors.RateLimitError({})), undefined)
  const rate = roster.report('c', new Errors.RateLimitError({}))
  assert.deepEqual([rate.kind, rate.until], ['until', clock() + 10 * 60_000])
  // Without a probe, an outage waits out the outage cooldown.
  const outage = roster.report('d', new Errors.ProviderError({ message: 'server is shutting down' }))
  assert.deepEqual([outage.kind, outage.until], ['until', clock() + 5 * 60_000])
  assert.match(outage.reason, /^serving engine down \(server is shutting down\)$/)
  assert.deepEqual(roster.classify(new Errors.ProviderError({ message: '503 Service Unavailable' })), { kind: 'other', rule: 'none' })
})

test("a document's signals extend the seed's, on report and classify", async (t) => {
  const roster = await Roster.create({
    document: { ...document(executor('a')), signals: { outage: ['ECONNREFUSED', 'service unavailable'] } },
    now: virtualClock(),
    probe: false,
  })
  t.after(() => roster.close())
  const port = await closedPort()
  const refused = await fetch(`http://127.0.0.1:${port}/`).catch((error) => error)
  assert.deepEqual(roster.classify(refused), { kind: 'outage', rule: 'outageSignal' })
  assert.equal(kindOf(refused), 'other', "not in the seed's signals")
  assert.equal(kindOf(refused, { signals: { outage: ['econnrefused'] } }), 'outage')
  assert.equal(roster.report('a', refused).kind, 'until')
})

/** What an SDK throws for a non-2xx answer: the status, the headers, the body's message. */
async function httpError(response) {
  const body = await response.text()
  return Object.assign(new Error(body || `${response.status}`), { status: response.status, headers: response.headers })
}

test('HTTP answers of a real server: status, Retry-After, body', async (t) => {
  const server = await healthServer(t)
  const answer = async (status, headers = {}, body = undefined) => {
    server.state.status = status
    server.state.headers = headers
    server.state.body = body
    return fetch(`${server.base}/v1/messages`)
  }

  // A fetch Response itself.
  const seconds = await answer(429, { 'retry-after': '30' })
  assert.deepEqual(failureFacts(seconds, { now: START }), { status: 429, message: 'HTTP 429 Too Many Requests', retryAfterMs: 30_000 })
  assert.equal(kindOf(seconds), 'rateLimit')
  const dated = await answer(429, { 'retry-after': new Date(START + 90_000).toUTCString() })
  assert.equal(failureFacts(await httpError(dated), { now: START }).retryAfterMs, 90_000)
  // A 429 "Quota exceeded … per minute" is a rate limit (one answer on every host).
  const quota = await answer(429, {}, "Quota exceeded for quota metric 'Generate Content API requests per minute'")
  assert.equal(kindOf(await httpError(quota)), 'rateLimit')
  assert.equal(kindOf(await httpError(await answer(401))), 'authentication')
  assert.equal(kindOf(await httpError(await answer(403))), 'authentication')
  // A 404 "model … does not exist": out for the run (one answer on every host).
  const missing = await answer(404, {}, 'The model `gpt-9` does not exist or you do not have access to it.')
  assert.equal(kindOf(await httpError(missing)), 'modelUnavailable')
  // Plain 5xx is not an outage (the seed retries it) ...
  for (const status of [500, 502, 503, 529]) {
    assert.equal(kindOf(await httpError(await answer(status))), 'other', `${status}`)
  }
  // ... unless the engine says it is down, or the document says a status is.
  assert.equal(kindOf(await httpError(await answer(503, {}, 'engine is recovering'))), 'outage')
  assert.equal(kindOf(await answer(503), { signals: { outageStatuses: [503] } }), 'outage')

  // An axios-style error: the answer under `response`, the body's message added.
  const axios = Object.assign(new Error('Request failed with status code 429'), {
    code: 'ERR_BAD_REQUEST',
    response: { status: 429, headers: { 'Retry-After': '12' }, data: { error: { message: 'Rate limit reached for gpt-4' } } },
  })
  assert.deepEqual(failureFacts(axios), {
    status: 429,
    code: 'ERR_BAD_REQUEST',
    message: 'Request failed with status code 429: Rate limit reached for gpt-4',
    retryAfterMs: 12_000,
  })
  // An error that wraps the response, as some SDKs do.
  const wrapped = Object.assign(new Error('request failed'), { response: await answer(429, { 'retry-after-ms': '1500' }) })
  assert.deepEqual(failureFacts(wrapped), { status: 429, message: 'request failed', retryAfterMs: 1_500 })
})

test('connection failures from fetch: the code along the cause chain', async () => {
  const port = await closedPort()
  const refused = await fetch(`http://127.0.0.1:${port}/`).catch((error) => error)
  assert.equal(refused.cause?.code, 'ECONNREFUSED')
  const facts = failureFacts(refused)
  assert.equal(facts.code, 'ECONNREFUSED')
  assert.match(facts.message, /^fetch failed: .*ECONNREFUSED/)

  // A server that accepts and drops the connection.
  const server = createServer((socket) => socket.destroy())
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const reset = await fetch(`http://127.0.0.1:${server.address().port}/`).catch((error) => error)
  server.close()
  assert.ok(typeof failureFacts(reset).code === 'string', `${reset.message} / ${reset.cause?.code}`)
  // Connection errors are not outages by the seed's signals.
  assert.equal(kindOf(refused), 'other')
  assert.equal(kindOf(reset), 'other')
  const aggregate = new AggregateError([Object.assign(new Error('x'), { code: 'ECONNREFUSED' })], 'all failed')
  assert.deepEqual(failureFacts(aggregate), { code: 'ECONNREFUSED', message: 'all failed: x' })
})

test('plain values, already-classified failures, facts', () => {
  assert.deepEqual(failureFacts(undefined), { message: '' })
  assert.deepEqual(failureFacts('server is shutting down'), { message: 'server is shutting down' })
  assert.equal(kindOf('server is shutting down'), 'outage')
  assert.equal(kindOf(new Error('the tests failed')), 'other')
  // The message is not parsed for a reset time: the core's usage cooldown applies.
  assert.deepEqual(failureFacts(new Error('usage limit reached|1800000000')), { message: 'usage limit reached|1800000000' })
  assert.equal(failureFacts(new Error('x'.repeat(5_000))).message.length, 2_000)
  assert.deepEqual(failureFacts({ kind: 'usageLimit', message: 'limit', resetAt: new Date(START) }), {
    kind: 'usageLimit',
    message: 'limit',
    resetAt: START,
  })
  assert.deepEqual(failureFacts({ kind: 'rateLimit', message: 'slow', retryAfterMs: 1_234.4 }), { kind: 'rateLimit', message: 'slow', retryAfterMs: 1_234 })
  assert.deepEqual(failureFacts({ kind: 'outage' }), { kind: 'outage', message: '' })
  assert.deepEqual(classifyFailure({ kind: 'other', message: 'Model not found' }), { kind: 'modelUnavailable', rule: 'modelUnavailableSignal' })
  assert.deepEqual(failureFacts({ tag: 'ProviderError', status: 503, message: 'x' }), { tag: 'ProviderError', status: 503, message: 'x' })
  assert.deepEqual([...FAILURE_KINDS].sort(), ['authentication', 'modelUnavailable', 'other', 'outage', 'rateLimit', 'usageLimit'])
  assert.throws(() => classifyFailure(new Error('x'), { signals: { outage: [''] } }), { code: 'INVALID_DOCUMENT' })
})

test('an already-classified plain failure: the same facts as the walk of any other object finds', () => {
  // failureFacts reads a plain { kind, message, resetAt, retryAfterMs } without walking
  // its chain; the same fields on an object of another prototype take the walk. Seeded
  // random field values (odd ones among them) must give the same facts both ways.
  const seed = Number(process.env.ROTA_FACTS_SEED ?? Date.now() % 1_000_000)
  console.log(`# classified facts: seed ${seed} (ROTA_FACTS_SEED=${seed} replays)`)
  let state = seed
  const random = (n) => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31
    return Math.floor((state / 2 ** 31) * n)
  }
  const values = [undefined, null, '', 'slow down', 'x'.repeat(2_100), 0, -1, 1_234.5, NaN, Infinity, START, new Date(START),
    new Date(Number.NaN), '2026-01-01T00:00:00Z', 'not a date', { epochMillis: 5 }, { epochMilliseconds: 7 }, true, ...FAILURE_KINDS, 'bogus']
  const keys = ['kind', 'message', 'resetAt', 'retryAfterMs']
  const Other = { constructor: Object }
  for (let i = 0; i < 2_000; i += 1) {
    const failure = {}
    for (const key of keys) if (random(3) > 0) failure[key] = values[random(values.length)]
    const walked = Object.assign(Object.create(Other), failure)
    assert.deepEqual(failureFacts(failure), failureFacts(walked), `seed ${seed}, case ${i}: ${JSON.stringify(failure)}`)
  }
  // Any other key (a status, a cause, a tag) is looked at: the walk reads it.
  assert.deepEqual(failureFacts({ kind: 'other', message: 'x', status: 429 }), { kind: 'other', status: 429, message: 'x' })
  assert.deepEqual(failureFacts({ message: 'outer', cause: { code: 'ECONNREFUSED' } }), { code: 'ECONNREFUSED', message: 'outer' })
})

test('the probe rule: 2xx is up, a redirect is down', () => {
  assert.deepEqual([200, 204, 299].map(probeIsUp), [true, true, true])
  assert.deepEqual([0, 199, 301, 302, 404, 503, 1.5, -1].map(probeIsUp), [false, false, false, false, false, false, false, false])
})

test('parseRetryAfter: seconds or an HTTP-date', () => {
  assert.equal(parseRetryAfter('120', START), 120_000)
  assert.equal(parseRetryAfter(2, START), 2_000)
  assert.equal(parseRetryAfter('1.5', START), 1_500)
  assert.equal(parseRetryAfter(new Date(START + 5_000).toUTCString(), START), 5_000)
  assert.equal(parseRetryAfter(new Date(START - 5_000).toUTCString(), START), 0, 'a date in the past is now')
  assert.equal(parseRetryAfter('soon', START), undefined)
  assert.equal(parseRetryAfter(undefined, START), undefined)
})
