// The failure classifier, on real errors: HTTP answers of a real server on 127.0.0.1,
// real connection failures from fetch, and the messages harnesses print.

import assert from 'node:assert/strict'
import { createServer } from 'node:net'
import { test } from 'node:test'
import { FAILURE_KINDS, classifyFailure, isModelUnavailableMessage, parseResetTime, parseRetryAfter } from 'rota'
import { START, closedPort, healthServer } from './helpers.mjs'

/** What an SDK throws for a non-2xx answer: the status, the headers, the body's message. */
async function httpError(response) {
  const body = await response.text()
  return Object.assign(new Error(`${response.status} ${body}`), { status: response.status, headers: response.headers })
}

test('HTTP answers of a real server: 429 + Retry-After, 401/403, 5xx', async (t) => {
  const server = await healthServer(t)
  const answer = async (status, headers = {}, body = undefined) => {
    server.state.status = status
    server.state.headers = headers
    server.state.body = body
    return fetch(`${server.base}/v1/messages`)
  }

  const seconds = await answer(429, { 'retry-after': '30' })
  assert.deepEqual(classifyFailure(seconds, { now: START }), { kind: 'rateLimit', message: 'HTTP 429 Too Many Requests', retryAfterMs: 30_000 })
  const dated = await answer(429, { 'retry-after': new Date(START + 90_000).toUTCString() })
  assert.equal(classifyFailure(await httpError(dated), { now: START }).retryAfterMs, 90_000)
  const plain429 = classifyFailure(await httpError(await answer(429)), { now: START })
  assert.equal(plain429.kind, 'rateLimit')
  assert.equal(plain429.retryAfterMs, undefined)
  const quota = await answer(429, {}, 'You exceeded your current quota, please check your plan and billing details.')
  assert.equal(classifyFailure(await httpError(quota)).kind, 'usageLimit')

  assert.equal(classifyFailure(await httpError(await answer(401))).kind, 'authentication')
  assert.equal(classifyFailure(await httpError(await answer(403))).kind, 'authentication')
  for (const status of [500, 502, 503, 529]) {
    assert.equal(classifyFailure(await httpError(await answer(status))).kind, 'outage', `${status}`)
  }
  assert.equal(classifyFailure(await httpError(await answer(400, {}, 'bad request'))).kind, 'other')
  // An error that wraps the response, as some SDKs do.
  const wrapped = Object.assign(new Error('request failed'), { response: await answer(429, { 'retry-after-ms': '1500' }) })
  assert.deepEqual(classifyFailure(wrapped), { kind: 'rateLimit', message: 'HTTP 429: request failed', retryAfterMs: 1_500 })
})

test('connection failures from fetch: refused, reset; timeouts by code', async () => {
  const port = await closedPort()
  const refused = await fetch(`http://127.0.0.1:${port}/`).catch((error) => error)
  assert.equal(refused.cause?.code, 'ECONNREFUSED')
  assert.equal(classifyFailure(refused).kind, 'outage')

  // A server that accepts and drops the connection.
  const server = createServer((socket) => socket.destroy())
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const reset = await fetch(`http://127.0.0.1:${server.address().port}/`).catch((error) => error)
  server.close()
  assert.ok(reset instanceof Error)
  assert.equal(classifyFailure(reset).kind, 'outage', `${reset.message} / ${reset.cause?.code}`)

  for (const code of ['ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH']) {
    assert.equal(classifyFailure(Object.assign(new Error(`connect ${code}`), { code })).kind, 'outage')
  }
  assert.equal(classifyFailure(new AggregateError([Object.assign(new Error('x'), { code: 'ECONNREFUSED' })], 'all failed')).kind, 'outage')
  assert.equal(classifyFailure(new Error('socket hang up')).kind, 'outage')
  assert.equal(classifyFailure('connection refused').kind, 'outage')
})

test('usage limits with their reset time', () => {
  const now = START
  const claude = classifyFailure(new Error(`Claude AI usage limit reached|${(now + 7_200_000) / 1000}`), { now })
  assert.deepEqual(claude, { kind: 'usageLimit', message: `Claude AI usage limit reached|${(now + 7_200_000) / 1000}`, resetAt: now + 7_200_000 })
  const codex = classifyFailure(new Error("You've hit your usage limit. Try again in 2 days 3 hours 5 minutes."), { now })
  assert.equal(codex.kind, 'usageLimit')
  assert.equal(codex.resetAt, now + 2 * 86_400_000 + 3 * 3_600_000 + 5 * 60_000)
  const iso = classifyFailure(new Error('usage limit reached; resets at 2026-01-01T05:00:00Z'), { now })
  assert.equal(iso.resetAt, Date.UTC(2026, 0, 1, 5))
  const clock = classifyFailure(new Error('5-hour limit reached ∙ resets 3pm'), { now })
  assert.equal(clock.kind, 'usageLimit')
  const at = new Date(clock.resetAt)
  assert.equal(at.getHours(), 15)
  assert.ok(clock.resetAt > now && clock.resetAt <= now + 86_400_000)
  const noTime = classifyFailure(new Error('usage limit exceeded'), { now })
  assert.equal(noTime.kind, 'usageLimit')
  assert.equal(noTime.resetAt, undefined, 'the core then uses the usage cooldown')
  assert.equal(parseResetTime('try again later', now), undefined)
})

test('rate limits, authentication, model unavailable, other', () => {
  assert.equal(classifyFailure(new Error('Rate limit reached for gpt-4 in organization org-x on tokens per min (TPM)')).kind, 'rateLimit')
  assert.equal(classifyFailure(new Error('429 RESOURCE_EXHAUSTED: Quota exceeded for quota metric requests per minute')).kind, 'rateLimit')
  assert.equal(classifyFailure(new Error('Invalid API key provided')).kind, 'authentication')
  assert.equal(classifyFailure(new Error('Not logged in · Please run /login')).kind, 'authentication')
  for (const message of [
    "There's an issue with the selected model (claude-9). It may not exist or you may not have access to it.",
    'The model `gpt-9` does not exist or you do not have access to it.',
    'Error: model_not_found',
    'unknown model: qwen-99',
  ]) {
    assert.equal(classifyFailure(new Error(message)).kind, 'modelUnavailable', message)
    assert.ok(isModelUnavailableMessage(message))
  }
  // The seed checks the model first, whatever else the error says.
  assert.equal(classifyFailure(Object.assign(new Error('model not found'), { status: 503 })).kind, 'modelUnavailable')
  assert.equal(classifyFailure(new Error('the tests failed')).kind, 'other')
  assert.equal(classifyFailure(undefined).kind, 'other')
  assert.equal(classifyFailure(new Error('x'.repeat(5_000))).message.length, 2_000)
})

test('an already-classified failure passes through, normalised', () => {
  assert.deepEqual(classifyFailure({ kind: 'usageLimit', message: 'limit', resetAt: new Date(START) }), {
    kind: 'usageLimit',
    message: 'limit',
    resetAt: START,
  })
  assert.deepEqual(classifyFailure({ kind: 'rateLimit', message: 'slow', retryAfterMs: 1_234.4 }), {
    kind: 'rateLimit',
    message: 'slow',
    retryAfterMs: 1_234,
  })
  assert.deepEqual(classifyFailure({ kind: 'outage' }), { kind: 'outage', message: '' })
  assert.deepEqual([...FAILURE_KINDS].sort(), ['authentication', 'modelUnavailable', 'other', 'outage', 'rateLimit', 'usageLimit'])
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
