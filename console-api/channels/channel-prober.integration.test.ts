// The channel prober on a Postgres database of its own, against the mock provider told to fail per
// key, with a pinned clock: only automatically disabled channels are probed, on the backoff schedule,
// each probe is recorded, a good one re-enables, several probers never probe one channel twice, the
// webhook goes out once per automatic change, and the outbound rules hold.
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMockUpstream, type MockUpstream } from '../../bench/mock-upstream/mock-upstream.js';
import { startMockOpenAI } from '../../bench/mock-upstream-openai/mock-openai.js';
import { disableAutomatically } from '../../core/channels/channel-status.js';
import type { Invalidation } from '../../core/invalidation/invalidation.js';
import { createLogger } from '../../infra/logger.js';
import { createSql, type Sql } from '../../infra/postgres/client.js';
import { createApiKeyCrypto } from '../../infra/secrets/api-key-crypto.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { createTestDatabase, type TestDatabase } from '../../infra/testing/test-database.js';
import { rebuildAbilities } from './abilities.js';
import { ChannelProber, probeDelaySec, type ProberSettings } from './channel-prober.js';

const GOOD = 'sk-ant-probe-good';
const BAD = 'sk-ant-probe-bad';
const SETTINGS: ProberSettings = { firstProbeSec: 10, maxProbeSec: 40, tickMs: 60_000, timeoutMs: 5000, webhookUrl: '' };

let db: TestDatabase;
let sql: Sql;
let mock: MockUpstream;
let hooks: Server;
let hookUrl: string;
const notices: Array<{ event: string; channel: { id: number; name: string }; status: number; reason: string; time: number }> = [];
const config = testConfig();
const crypto = createApiKeyCrypto(config.KEY_SECRET);
const log = createLogger(config, 'prober-test');

beforeAll(async () => {
  db = await createTestDatabase('prober');
  sql = createSql(testConfig({ DATABASE_URL: db.url }));
  mock = await startMockUpstream({ apiKey: GOOD, apiKeys: [BAD], keyFailures: { [BAD]: 'revoked' } });
  hooks = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      notices.push(JSON.parse(body));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => hooks.listen(0, '127.0.0.1', r));
  hookUrl = `http://127.0.0.1:${(hooks.address() as { port: number }).port}/hook`;
}, 60_000);
afterAll(async () => {
  await mock?.close();
  await new Promise((r) => hooks?.close(r));
  await sql?.end({ timeout: 5 });
  await db?.drop();
});

let clock = 1_900_000_000;
function prober(o: { allowPrivate?: boolean; webhookUrl?: string; invalidations?: Invalidation[] } = {}): ChannelProber {
  return new ChannelProber({
    sql, crypto, log, settings: { ...SETTINGS, webhookUrl: o.webhookUrl ?? '' },
    privateNetworksAllowed: async () => o.allowPrivate ?? true,
    invalidate: async (m) => void o.invalidations?.push(m),
    now: () => clock,
  });
}

async function channel(key: string, status: number, baseUrl = mock.url): Promise<number> {
  const [row] = await sql<{ id: number; status: number; group: string; models: string; priority: number; weight: number }[]>`
    INSERT INTO channels (name, base_url, key_ciphertext, status, models, "group", next_probe_time)
    VALUES (${`probe-${key}-${Math.random()}`}, ${baseUrl}, ${crypto.seal(key)}, ${status}, 'claude-haiku-4-5', 'default', 0)
    RETURNING id, status, "group", models, priority, weight`;
  await rebuildAbilities(sql, { ...row!, id: Number(row!.id), priority: Number(row!.priority) });
  return Number(row!.id);
}

async function row(id: number) {
  const [r] = await sql`SELECT status, probe_time, probe_result, probe_failures, next_probe_time, status_reason FROM channels WHERE id = ${id}`;
  return { status: Number(r!.status), probe_time: Number(r!.probe_time), probe_result: r!.probe_result as string, probe_failures: Number(r!.probe_failures), next_probe_time: Number(r!.next_probe_time), status_reason: r!.status_reason as string };
}

const probesWith = (key: string) => mock.requests.filter((r) => r.headers['x-api-key'] === key && r.path.startsWith('/v1/messages')).length;

describe('probeDelaySec', () => {
  it('doubles from the first delay up to the maximum', () => {
    expect([0, 1, 2, 3, 4, 50].map((f) => probeDelaySec(f, SETTINGS))).toEqual([10, 20, 40, 40, 40, 40]);
  });
});

describe('the prober', () => {
  it('probes a disabled channel on the backoff schedule, records each probe, and re-enables it once the key works', async () => {
    const id = await channel(BAD, 3);
    const invalidations: Invalidation[] = [];
    const p = prober({ invalidations });
    await p.tick();
    let r = await row(id);
    expect(r).toMatchObject({ status: 3, probe_time: clock, probe_failures: 1, next_probe_time: clock + 20 });
    expect(r.probe_result).toContain('HTTP 401 authentication_error');
    // count_tokens, never a generation.
    expect(mock.requests.filter((q) => q.headers['x-api-key'] === BAD).map((q) => q.path)).toEqual(['/v1/messages/count_tokens']);

    clock += 19;
    await p.tick();
    expect(probesWith(BAD)).toBe(1);
    clock += 1;
    await p.tick();
    r = await row(id);
    expect(probesWith(BAD)).toBe(2);
    expect(r).toMatchObject({ status: 3, probe_failures: 2, next_probe_time: clock + 40 });

    mock.setOptions({ keyFailures: {} });
    clock += 40;
    await p.tick();
    r = await row(id);
    expect(r).toMatchObject({ status: 1, probe_result: 'ok', probe_time: clock, probe_failures: 0 });
    expect(r.status_reason).toContain('probe');
    const [ability] = await sql`SELECT bool_and(enabled) AS enabled FROM abilities WHERE channel_id = ${id}`;
    expect(ability!.enabled).toBe(true);
    expect(invalidations).toEqual([{ kind: 'channel', id }]);
    mock.setOptions({ keyFailures: { [BAD]: 'revoked' } });
    await p.stop();
  });

  it('never probes an enabled channel or one an administrator disabled', async () => {
    const manual = await channel(GOOD, 2);
    const enabled = await channel(GOOD, 1);
    const before = probesWith(GOOD);
    const p = prober();
    clock += 1000;
    await p.tick();
    expect(probesWith(GOOD)).toBe(before);
    expect((await row(manual)).probe_time).toBe(0);
    expect((await row(enabled)).probe_time).toBe(0);
    await p.stop();
  });

  it('several probers at once probe a due channel once', async () => {
    const id = await channel(BAD, 3);
    const before = probesWith(BAD);
    const probers = [prober(), prober(), prober()];
    await Promise.all(probers.map((p) => p.tick()));
    expect(probesWith(BAD)).toBe(before + 1);
    expect((await row(id)).probe_failures).toBe(1);
    for (const p of probers) await p.stop();
  });

  it('falls back to a max_tokens 1 request where count_tokens is missing', async () => {
    const seen: string[] = [];
    const bare = createServer((req, res) => {
      seen.push(req.url ?? '');
      req.resume();
      req.on('end', () => {
        if (req.url === '/v1/messages/count_tokens') return res.writeHead(404, { 'content-type': 'application/json' }).end('{"type":"error","error":{"type":"not_found_error","message":"no"}}');
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"type":"message"}');
      });
    });
    await new Promise<void>((r) => bare.listen(0, '127.0.0.1', r));
    try {
      const id = await channel(GOOD, 3, `http://127.0.0.1:${(bare.address() as { port: number }).port}`);
      const p = prober();
      clock += 1000;
      await p.tick();
      expect(seen).toEqual(['/v1/messages/count_tokens', '/v1/messages']);
      expect((await row(id)).status).toBe(1);
      await p.stop();
    } finally {
      await new Promise((r) => bare.close(r));
    }
  });

  it('probes an OpenAI-format channel (type 1) with a one-token Chat Completions call and a Bearer key', async () => {
    const openai = await startMockOpenAI({ apiKey: 'sk-proj-probe-good' });
    try {
      const ids: number[] = [];
      for (const [key, model] of [['sk-proj-probe-good', 'gpt-4o-mini'], ['sk-proj-probe-good', 'o3-mini'], ['sk-proj-probe-revoked', 'gpt-4o-mini']] as const) {
        const [r] = await sql<{ id: number }[]>`
          INSERT INTO channels (name, type, base_url, key_ciphertext, status, models, "group", next_probe_time)
          VALUES (${`probe-openai-${Math.random()}`}, 1, ${openai.url}, ${crypto.seal(key)}, 3, ${model}, 'default', 0)
          RETURNING id`;
        ids.push(Number(r!.id));
      }
      const p = prober();
      clock += 1000;
      await p.tick();
      await p.stop();
      expect(openai.requests.map((r) => [r.path, r.headers.authorization, r.body])).toEqual([
        ['/v1/chat/completions', 'Bearer sk-proj-probe-good', { model: 'gpt-4o-mini', max_tokens: 1, messages: [{ role: 'user', content: 'ping' }] }],
        // A reasoning model refuses max_tokens: the bound goes as max_completion_tokens.
        ['/v1/chat/completions', 'Bearer sk-proj-probe-good', { model: 'o3-mini', max_completion_tokens: 1, messages: [{ role: 'user', content: 'ping' }] }],
        ['/v1/chat/completions', 'Bearer sk-proj-probe-revoked', { model: 'gpt-4o-mini', max_tokens: 1, messages: [{ role: 'user', content: 'ping' }] }],
      ]);
      expect((await row(ids[0]!)).status).toBe(1);
      expect((await row(ids[1]!)).status).toBe(1);
      expect(await row(ids[2]!)).toMatchObject({ status: 3, probe_result: expect.stringMatching(/^HTTP 401 invalid_request_error/), probe_failures: 1 });
    } finally {
      await openai.close();
    }
  });

  it('refuses a private target unless ChannelAllowPrivateNetworks, without sending the credential', async () => {
    const id = await channel(GOOD, 3);
    const before = probesWith(GOOD);
    const p = prober({ allowPrivate: false });
    clock += 1000;
    await p.tick();
    const r = await row(id);
    expect(r.status).toBe(3);
    expect(r.probe_result).toContain('private');
    expect(probesWith(GOOD)).toBe(before);
    await p.stop();
  });
});

describe('the health webhook', () => {
  it('is sent once for each automatic change, never for an administrator\'s', async () => {
    const id = await channel(GOOD, 1);
    // The other tests' channels out of the way: set aside by an administrator, already notified.
    await sql`UPDATE channels SET status = 2, status_time = ${clock}, status_notified_time = ${clock} WHERE id <> ${id}`;
    clock += 1000;
    expect(await disableAutomatically(sql, id, '5 consecutive channel faults; last: provider answered HTTP 401', clock, 10)).not.toBeNull();
    const p = prober({ webhookUrl: hookUrl });
    notices.length = 0;
    await p.tick();
    await p.tick();
    expect(notices).toEqual([{ event: 'channel_disabled', channel: { id, name: expect.any(String) }, status: 3, reason: '5 consecutive channel faults; last: provider answered HTTP 401', time: clock }]);
    clock += 10;
    await p.tick();
    expect(notices.map((n) => n.event)).toEqual(['channel_disabled', 'channel_enabled']);
    expect((await row(id)).status).toBe(1);
    // An administrator's change (status_notified_time moved with status_time) sends nothing.
    await sql`UPDATE channels SET status = 2, status_time = ${clock + 1}, status_notified_time = ${clock + 1} WHERE id = ${id}`;
    clock += 5;
    await p.tick();
    expect(notices).toHaveLength(2);
    await p.stop();
  });
});

// An upstream (or webhook receiver) that sends its headers at once and then one byte every 200 ms for
// 8 s: undici's headersTimeout and bodyTimeout time the gaps, so only a deadline on the whole exchange
// ends it. timeoutMs is that deadline.
describe('one deadline for the whole exchange (timeoutMs)', () => {
  const DEADLINE_MS = 1000;
  // Generous: the deadline, plus room for the other probe, the database and a loaded machine; still
  // far under the 8 s drip.
  const BOUND_MS = DEADLINE_MS + 3500;
  let drip: Server;
  let dripUrl = '';
  let dripRequests = 0;

  beforeAll(async () => {
    drip = createServer((req, res) => {
      dripRequests++;
      req.resume();
      // A receiver that never answers.
      if (req.url === '/silent') return;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{');
      const started = Date.now();
      const t = setInterval(() => (Date.now() - started >= 8000 ? (clearInterval(t), res.end('}')) : res.write(' ')), 200);
      res.on('close', () => clearInterval(t));
    });
    await new Promise<void>((r) => drip.listen(0, '127.0.0.1', r));
    dripUrl = `http://127.0.0.1:${(drip.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    drip?.closeAllConnections();
    await new Promise((r) => drip?.close(r));
  });

  const shortProber = (webhookUrl = '') => new ChannelProber({
    sql, crypto, log, settings: { ...SETTINGS, timeoutMs: DEADLINE_MS, webhookUrl },
    privateNetworksAllowed: async () => true, invalidate: async () => undefined, now: () => clock,
  });
  /** Only `ids` are due (the other tests' channels set aside by an administrator, already notified). */
  async function onlyDue(ids: number[]): Promise<void> {
    await sql`UPDATE channels SET status = 2, status_time = ${clock}, status_notified_time = ${clock} WHERE NOT (id = ANY(${ids}::bigint[]))`;
    for (const [i, id] of ids.entries()) await sql`UPDATE channels SET next_probe_time = ${i + 1} WHERE id = ${id}`;
  }

  it('a dripping upstream is cut off at the deadline and recorded as a failed probe; the channel behind it is still probed', async () => {
    clock += 1000;
    const slow = await channel(GOOD, 3, dripUrl);
    const healthy = await channel(GOOD, 3);
    await onlyDue([slow, healthy]);
    const p = shortProber();
    const started = Date.now();
    await p.tick();
    const took = Date.now() - started;
    await p.stop();
    expect(took).toBeLessThan(BOUND_MS);
    expect(await row(slow)).toMatchObject({ status: 3, probe_time: clock, probe_failures: 1, probe_result: `timed out (no complete answer within ${DEADLINE_MS} ms)` });
    expect(await row(healthy)).toMatchObject({ status: 1, probe_result: 'ok' });
  }, 15_000);

  it('stop() during a dripping probe returns within the deadline, not after the drip', async () => {
    clock += 1000;
    const slow = await channel(GOOD, 3, dripUrl);
    await onlyDue([slow]);
    const p = shortProber();
    const before = dripRequests;
    const round = p.tick();
    while (dripRequests === before) await new Promise((r) => setTimeout(r, 20));
    const started = Date.now();
    await p.stop();
    expect(Date.now() - started).toBeLessThan(BOUND_MS);
    await round;
  }, 15_000);

  it('a dripping webhook receiver is cut off at the deadline: the round ends', async () => {
    await onlyDue([]);
    const id = await channel(GOOD, 1);
    clock += 1000;
    expect(await disableAutomatically(sql, id, 'test', clock, 10)).not.toBeNull();
    // The channel stays due later: this round only sends the notice.
    await sql`UPDATE channels SET next_probe_time = ${clock + 10_000} WHERE id = ${id}`;
    const p = shortProber(`${dripUrl}/hook`);
    const before = dripRequests;
    const started = Date.now();
    await p.tick();
    const took = Date.now() - started;
    await p.stop();
    expect(dripRequests).toBe(before + 1);
    expect(took).toBeLessThan(BOUND_MS);
  }, 15_000);

  it('stop() during a probe: the channel in flight and those claimed behind it keep their previous next probe time, and are probed next', async () => {
    clock += 1000;
    const slow = await channel(GOOD, 3, dripUrl);
    const behind = await channel(GOOD, 3);
    await onlyDue([slow, behind]);
    const p = shortProber();
    const before = dripRequests;
    const round = p.tick();
    while (dripRequests === before) await new Promise((r) => setTimeout(r, 20));
    await p.stop();
    await round;
    // Not treated as failed probes: nothing recorded, due as before the round (1 and 2), not pushed back.
    expect(await row(slow)).toMatchObject({ status: 3, probe_time: 0, probe_failures: 0, next_probe_time: 1 });
    expect(await row(behind)).toMatchObject({ status: 3, probe_time: 0, probe_failures: 0, next_probe_time: 2 });
    // The next process probes the channel behind at once.
    await sql`UPDATE channels SET next_probe_time = ${clock + 10_000} WHERE id = ${slow}`;
    const next = shortProber();
    await next.tick();
    await next.stop();
    expect(await row(behind)).toMatchObject({ status: 1, probe_result: 'ok' });
  }, 15_000);

  it('stop() during the health webhook: the notice cut and those claimed behind it are pending again, and the next process sends them', async () => {
    await onlyDue([]);
    const a = await channel(GOOD, 1);
    const b = await channel(GOOD, 1);
    clock += 1000;
    expect(await disableAutomatically(sql, a, 'provider answered HTTP 401', clock, 10)).not.toBeNull();
    expect(await disableAutomatically(sql, b, 'provider answered HTTP 401', clock, 10)).not.toBeNull();
    // Not due for a probe: this round only sends the notices.
    await sql`UPDATE channels SET next_probe_time = ${clock + 10_000} WHERE id IN (${a}, ${b})`;
    const p = shortProber(`${dripUrl}/silent`);
    const before = dripRequests;
    const round = p.tick();
    while (dripRequests === before) await new Promise((r) => setTimeout(r, 20));
    await p.stop(); // a deploy while the receiver is slow
    await round;
    expect(dripRequests).toBe(before + 1);
    const pending = await sql<{ pending: boolean }[]>`
      SELECT status_time > status_notified_time AS pending FROM channels WHERE id IN (${a}, ${b}) ORDER BY id`;
    expect(pending.map((r) => r.pending)).toEqual([true, true]);

    const next = prober({ webhookUrl: hookUrl });
    await next.tick();
    await next.stop();
    const sent = notices.filter((n) => n.channel.id === a || n.channel.id === b);
    expect(sent.map((n) => [n.channel.id, n.event, n.time]).sort()).toEqual([[a, 'channel_disabled', clock], [b, 'channel_disabled', clock]].sort());
    // Sent once: marked notified again.
    const after = await sql<{ pending: boolean }[]>`
      SELECT status_time > status_notified_time AS pending FROM channels WHERE id IN (${a}, ${b}) ORDER BY id`;
    expect(after.map((r) => r.pending)).toEqual([false, false]);
  }, 15_000);
});
