import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE } from '../http/errors.js';
import { openApiPath } from '../http/openapi.js';
import { type ConsoleHarness, startConsoleHarness } from '../../tests/harness/console-harness.js';

let h: ConsoleHarness;
beforeAll(async () => {
  h = await startConsoleHarness();
});
afterAll(async () => {
  await h?.close();
});

const strip = (p: string) => (p.length > 1 ? p.replace(/\/+$/, '') : p);

describe('GET /api/openapi.json', () => {
  it('is an OpenAPI 3.1 document listing every registered route', async () => {
    const res = await h.app.inject({ method: 'GET', url: '/api/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json() as { openapi: string; paths: Record<string, Record<string, { responses: Record<string, unknown>; requestBody?: unknown }>> };
    expect(doc.openapi).toBe('3.1.0');
    const documented = new Set<string>();
    for (const [path, item] of Object.entries(doc.paths)) for (const m of Object.keys(item)) documented.add(`${m.toUpperCase()} ${strip(path)}`);
    const registered = h.app.routeTable.map((r) => `${r.method} ${strip(openApiPath(r.url))}`);
    expect(registered.length).toBeGreaterThan(40);
    for (const r of registered) expect(documented, r).toContain(r);
    expect(documented.size).toBe(new Set(registered).size);
  });

  it('carries the request schemas and the error statuses', async () => {
    const doc = (await h.app.inject({ method: 'GET', url: '/api/openapi.json' })).json();
    const create = doc.paths['/api/token/'].post;
    const body = create.requestBody.content['application/json'].schema;
    expect(body.required).toEqual(expect.arrayContaining(['name', 'expired_time', 'remain_quota', 'unlimited_quota']));
    expect(body.properties.name).toMatchObject({ type: 'string', maxLength: 50 });
    expect(create.responses['400'].description).toContain('VALIDATION_FAILED');
    // A console route refuses an API key (sk-…) as its bearer token, and a JSON body in another media type or too large.
    expect(create.responses['401'].description).toContain('API_KEY_NOT_ACCEPTED');
    expect(create.responses['415'].description).toContain('UNSUPPORTED_MEDIA_TYPE');
    expect(create.responses['413'].description).toContain('PAYLOAD_TOO_LARGE');
    expect(create['x-min-role']).toBe(1);
    const logs = doc.paths['/api/log/self'].get;
    expect(logs.parameters.map((p: { name: string }) => p.name)).toEqual(expect.arrayContaining(['p', 'page_size', 'type', 'token_name', 'model_name', 'group', 'start_timestamp', 'end_timestamp', 'request_id', 'upstream_request_id']));
    const pageSize = logs.parameters.find((p: { name: string }) => p.name === 'page_size');
    expect(pageSize.description ?? pageSize.schema?.description).toBe('default 10; above 100 is served as 100');
    const amount = doc.paths['/api/user/amount'].post;
    expect(amount.responses['400'].description).toContain('AMOUNT_BELOW_MINIMUM');
    expect(doc.paths['/api/user/manage'].post['x-min-role']).toBe(10);
    expect(Object.keys(ERROR_CATALOGUE)).toContain('AMOUNT_BELOW_MINIMUM');
  });
});

describe('GET /api/status', () => {
  it('answers publicly', async () => {
    const res = await h.app.inject({ method: 'GET', url: '/api/status' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ success: true, message: '', data: { quota_per_unit: 500000, enable_redemption: true } });
  });
});

describe('errors never leak internals', () => {
  it('a 500 is the envelope without a stack', async () => {
    await h.sql`ALTER TABLE topups RENAME TO topups_away`;
    try {
      const a = await h.account();
      const res = await h.app.inject({ method: 'GET', url: '/api/user/topup/self', headers: a.auth });
      expect(res.statusCode).toBe(500);
      expect(res.json()).toEqual({ success: false, message: 'internal server error' });
    } finally {
      await h.sql`ALTER TABLE topups_away RENAME TO topups`;
    }
  });
});
