import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../infra/project-root.js';
import { decodeUsageEvent, encodeUsageEvent, encodedUsageEventOf, encodedUsageEventsOf, LOG_TYPE, USAGE_EVENT_FIELD, usageEvent, usageEventSchema, withEncodedUsageEvent } from './usage-event.js';

describe('usage event', () => {
  it('builds a valid event from what it says, the rest "not applicable", optional fields only when given', () => {
    const e = usageEvent({ type: LOG_TYPE.error, request_id: 'r:expired', user_id: 7, token_id: 3, created_at: 1_700_000_000, content: 'released' });
    expect(decodeUsageEvent(encodeUsageEvent(e))).toEqual(e);
    expect(e).toMatchObject({ v: 1, username: '', channel: 0, quota: 0, is_stream: false, use_time_ms: 0 });
    expect(Object.keys(e)).not.toContain('quota_delta');
    expect(Object.keys(e)).not.toContain('cache_tokens');
    expect(Object.keys(e)).not.toContain('ip');
    expect(usageEvent({ type: LOG_TYPE.manage, request_id: 'manage:x', user_id: 1, created_at: 1, content: '', quota_delta: -5 }).quota_delta).toBe(-5);
  });

  it('refuses what is not an event, as its zod schema does, and keeps the fields of a newer emitter', () => {
    const e = usageEvent({ type: LOG_TYPE.consume, request_id: 'r:ok', user_id: 7, created_at: 1, content: '', quota: 10 });
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ ...e, v: 2 }, /^not a usage event: v: /],
      [{ ...e, type: 6 }, /^not a usage event: type: /],
      [{ ...e, request_id: '' }, /request_id: must not be empty/],
      [{ ...e, user_id: 0 }, /user_id: must be positive/],
      [{ ...e, quota: -1 }, /quota: must be at least 0/],
      [{ ...e, quota: 1.5 }, /quota: must be an integer/],
      [{ ...e, quota: 2 ** 60 }, /quota: must be a safe integer/],
      [{ ...e, is_stream: 'yes' }, /is_stream: must be a boolean/],
      [{ ...e, protocol: 'grpc' }, /protocol: must be one of 'anthropic', 'openai'/],
      [Object.fromEntries(Object.entries(e).filter(([k]) => k !== 'content')), /content: required string/],
    ];
    for (const [value, message] of bad) {
      expect(() => decodeUsageEvent(JSON.stringify(value)), JSON.stringify(value)).toThrow(message);
      expect(usageEventSchema.safeParse(value).success).toBe(false);
    }
    expect(() => decodeUsageEvent('[1]')).toThrow(/not a usage event/);
    expect(() => decodeUsageEvent('{"v":1')).toThrow(SyntaxError);
    // A rolling deploy: a newer relay's optional field is kept, not a reason to dead-letter the event.
    expect(decodeUsageEvent(JSON.stringify({ ...e, newer_field: 'x' }))).toEqual({ ...e, newer_field: 'x' });
  });

  it('bills an event whose duration a clock step made negative or absurd, its duration 0, and still refuses one without a number there', () => {
    // A relay whose wall clock stepped back during the request wrote a negative duration after Redis
    // had debited it: refused, the debit never reached Postgres, and its dead letter never replayed.
    const e = usageEvent({ type: LOG_TYPE.consume, request_id: 'r:stepped', user_id: 7, created_at: 1, content: '', quota: 10 });
    for (const use_time_ms of [-1500, -0.5, 5e12, 1e300, 2 ** 60]) {
      expect(decodeUsageEvent(JSON.stringify({ ...e, use_time_ms })), String(use_time_ms)).toEqual({ ...e, use_time_ms: 0 });
    }
    expect(decodeUsageEvent(JSON.stringify(e).replace('"use_time_ms":0', '"use_time_ms":-1e999')).use_time_ms).toBe(0);
    expect(decodeUsageEvent(JSON.stringify({ ...e, use_time_ms: 1234.4 })).use_time_ms).toBe(1234);
    expect(decodeUsageEvent(JSON.stringify({ ...e, use_time_ms: 86_400_000 })).use_time_ms).toBe(86_400_000);
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ ...e, use_time_ms: '5' }, /use_time_ms: must be an integer/],
      [{ ...e, use_time_ms: null }, /use_time_ms: must be an integer/],
      [Object.fromEntries(Object.entries(e).filter(([k]) => k !== 'use_time_ms')), /use_time_ms: required/],
      // A negative duration is forgiven, not whatever else is wrong with the event.
      [{ ...e, use_time_ms: -1500, quota: -1 }, /quota: must be at least 0/],
      [{ ...e, use_time_ms: -1500, user_id: 0 }, /user_id: must be positive/],
    ];
    for (const [value, message] of bad) expect(() => decodeUsageEvent(JSON.stringify(value)), JSON.stringify(value)).toThrow(message);
  });

  // A request id too long for the ledger's unique btree index (at most 2704 bytes an entry) was
  // refused by Postgres with 54000 and, not being class 22/23, failed its batch at every read: billing
  // of the stream stopped behind it. Refused here instead, past a bound (MAX_REQUEST_ID_LENGTH, 256)
  // that every id a real emitter makes fits.
  it('refuses a request id longer than 256 characters, and takes every shape of id the relay and the console make', () => {
    const e = usageEvent({ type: LOG_TYPE.consume, request_id: 'r', user_id: 7, created_at: 1, content: '', quota: 10 });
    const uuid = '0b8f3c4e-6d1a-4f7e-9a2b-3c4d5e6f7a8b';
    const real = [uuid, `${uuid}:expired`, `topup:${'T'.repeat(64)}`, 'redeem:123456789', `manage:${uuid}`, `aff-transfer:${uuid}`,
      'aff-inviter:123456789', 'aff-invitee:123456789', 'x'.repeat(256), '\u{1F600}'.repeat(128)];
    for (const request_id of real) expect(decodeUsageEvent(encodeUsageEvent({ ...e, request_id })).request_id, request_id).toBe(request_id);
    for (const request_id of ['x'.repeat(257), 'x'.repeat(8000)]) {
      expect(() => decodeUsageEvent(encodeUsageEvent({ ...e, request_id })), `${request_id.length} characters`).toThrow(/^not a usage event: request_id: /);
      expect(usageEventSchema.safeParse({ ...e, request_id }).success).toBe(false);
    }
  });

  it('carries the cache tokens apart, and an event without them (an older relay) still decodes', () => {
    const e = usageEvent({ type: LOG_TYPE.consume, request_id: 'r:cache', user_id: 7, created_at: 1, content: '', cache_tokens: 6, cache_read_tokens: 3, cache_write_5m_tokens: 2, cache_write_1h_tokens: 1 });
    expect(decodeUsageEvent(encodeUsageEvent(e))).toMatchObject({ cache_tokens: 6, cache_read_tokens: 3, cache_write_5m_tokens: 2, cache_write_1h_tokens: 1 });
    const old = usageEvent({ type: LOG_TYPE.consume, request_id: 'r:old', user_id: 7, created_at: 1, content: '', cache_tokens: 6 });
    expect(Object.keys(decodeUsageEvent(encodeUsageEvent(old)))).not.toContain('cache_read_tokens');
  });

  it('carries the web searches when there were any, and an event without them still decodes', () => {
    const e = usageEvent({ type: LOG_TYPE.consume, request_id: 'r:search', user_id: 7, created_at: 1, content: '', web_search_requests: 3 });
    expect(decodeUsageEvent(encodeUsageEvent(e)).web_search_requests).toBe(3);
    const none = usageEvent({ type: LOG_TYPE.consume, request_id: 'r:none', user_id: 7, created_at: 1, content: '' });
    expect(Object.keys(decodeUsageEvent(encodeUsageEvent(none)))).not.toContain('web_search_requests');
  });

  it('is read from the stream entry field the settlement scripts write, one event per line', () => {
    for (const file of ['settleReservations-9n.lua', 'settleSliceDraws-4n.lua']) {
      const lua = readFileSync(join(projectRoot(), 'core/quota/lua', file), 'utf8');
      expect(lua).toContain(`redis.call('XADD', stream, '*', '${USAGE_EVENT_FIELD}', table.concat(events[stream], '\\n'))`);
    }
    expect(encodedUsageEventOf(['source_id', '1-0', USAGE_EVENT_FIELD, '{}'])).toBe('{}');
    expect(encodedUsageEventOf(['other', 'x'])).toBeUndefined();
    const a = usageEvent({ type: LOG_TYPE.consume, request_id: 'r:a', user_id: 7, created_at: 1, content: 'a\nb' });
    const b = usageEvent({ type: LOG_TYPE.error, request_id: 'r:b', user_id: 7, created_at: 1, content: '' });
    // A newline inside a field is escaped by the encoder, so lines split events and nothing else.
    const joined = [encodeUsageEvent(a), encodeUsageEvent(b)].join('\n');
    expect(encodedUsageEventsOf([USAGE_EVENT_FIELD, joined])!.map(decodeUsageEvent)).toEqual([a, b]);
    expect(encodedUsageEventsOf([USAGE_EVENT_FIELD, encodeUsageEvent(a)])).toEqual([encodeUsageEvent(a)]);
    expect(encodedUsageEventsOf(['other', 'x'])).toBeUndefined();
    expect(withEncodedUsageEvent(['i', '7', USAGE_EVENT_FIELD, joined], 'x')).toEqual(['i', '7', USAGE_EVENT_FIELD, 'x']);
  });
});
