import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { generateApiKey } from './secrets/api-key-crypto.js';
import { CENSOR, createLogger } from './logger.js';

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString('utf8'));
      done();
    },
  });
  const log = createLogger({ LOG_LEVEL: 'info' }, 'test', stream);
  return { log, text: () => lines.join('') };
}

describe('the logger keeps secrets out of the log', () => {
  it('censors credential-named values at any depth, in errors and their causes too', () => {
    const { log, text } = capture();
    const cause = Object.assign(new Error('connect failed'), { request: { headers: { 'x-api-key': 'sk-ant-provider-credential-1' } } });
    const err = Object.assign(new Error('upstream failed', { cause }), { options: { channel: { apiKey: 'channel-secret-2' } } });
    log.error({ err, deep: { a: { b: { c: { password: 'hunter2-password-3', authorization: 'Basic abc' } } } }, list: [{ token: 'tok-4' }] }, 'failed');
    const out = text();
    for (const secret of ['sk-ant-provider-credential-1', 'channel-secret-2', 'hunter2-password-3', 'Basic abc', 'tok-4']) {
      expect(out).not.toContain(secret);
    }
    expect(out).toContain(CENSOR);
    // What is not a secret stays readable.
    expect(out).toContain('upstream failed');
    expect(out).toContain('connect failed');
  });

  it('does not change the object it was given', () => {
    const { log } = capture();
    const obj = { nested: { key: 'value-kept' } };
    log.info(obj, 'x');
    expect(obj.nested.key).toBe('value-kept');
  });

  it('scrubs our API keys and bearer credentials from messages and free text', () => {
    const { log, text } = capture();
    const key = generateApiKey();
    log.warn({ detail: `the client sent ${key} in a header` }, `rejected ${key}`);
    log.warn({ header: 'Authorization: Bearer abcdefghijklmnop' }, 'seen');
    const out = text();
    expect(out).not.toContain(key.slice(3));
    expect(out).not.toContain('abcdefghijklmnop');
    expect(out).toContain('Bearer');
  });

  it('scrubs providers\' key shapes too (Anthropic\'s sk-ant-api03-…, OpenAI\'s sk-proj-…), as a provider quoting the key it was sent', () => {
    const { log, text } = capture();
    const anthropic = 'sk-ant-api03-szMIIGYiZ_abcDEF123-ghiJKL456_mnoPQR789-LEAKAA';
    const openai = 'sk-proj-AbCdEf0123456789_GhIjKl-MnOpQr';
    log.warn({ body: `{"error":{"message":"Incorrect API key provided: ${anthropic}"}}` }, `provider quoted ${openai}`);
    const out = text();
    expect(out).not.toContain('szMIIGYiZ');
    expect(out).not.toContain('LEAKAA');
    expect(out).not.toContain('AbCdEf0123456789');
    expect(out).toContain('Incorrect API key provided: sk-[redacted]');
  });

  it('survives a cycle in a logged object', () => {
    const { log, text } = capture();
    const a: Record<string, unknown> = { name: 'a' };
    a.self = a;
    log.info({ a }, 'cycle');
    expect(text()).toContain('cycle');
  });
});
