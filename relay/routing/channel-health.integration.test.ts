// Channel health against the mock provider told to fail per key, on the whole stack (relay, console
// with its prober, billing): a channel whose credential was revoked leaves the rotation by itself
// while every client request succeeds, is probed, and comes back once the provider accepts the key
// again; a channel an administrator disabled is never probed; cache affinity keeps a key (or an end
// user) on one channel and moves only the failed channel's share.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parsePromText } from '../../core/metrics/prom.js';
import {
  billingSettled, createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack, type TestAccount,
} from '../../tests/harness/gateway-stack.js';

const FAULTS_TO_DISABLE = 3;
const REVOKED = 'sk-ant-channel-revoked';
const MANUAL = 'sk-ant-channel-manual';
const SPREAD = ['sk-ant-spread-1', 'sk-ant-spread-2', 'sk-ant-spread-3', 'sk-ant-spread-4'];
const FUNDS = 500_000_000;

let stack: GatewayStack;
let account: TestAccount;
let key: string;
/** users.quota before any request of this file. */
let funded: number;

beforeAll(async () => {
  stack = await startGatewayStack({
    env: {
      RELAY_MAX_TRIES: '3',
      CHANNEL_FAULTS_TO_DISABLE: String(FAULTS_TO_DISABLE),
      // The rate rule would also trip here; these tests are about the consecutive one.
      CHANNEL_FAULT_RATE_TO_DISABLE: '0',
      CHANNEL_PROBE_FIRST_SEC: '1',
      CHANNEL_PROBE_MAX_SEC: '2',
      CHANNEL_PROBE_TICK_MS: '100',
      CHANNEL_HEALTH_FLUSH_MS: '100',
    },
    mock: { apiKeys: [REVOKED, MANUAL, ...SPREAD], recordLimit: 100_000 },
  });
  account = await fundedAccount(stack, FUNDS);
  key = (await createApiKey(stack, account)).key;
  const [u] = await stack.sql`SELECT quota FROM users WHERE id = ${account.id}`;
  funded = Number(u!.quota);
}, 60_000);
afterAll(async () => {
  await stack?.close();
});

async function send(model: string, endUser?: string) {
  const { data, response } = await new Anthropic({ apiKey: key, baseURL: stack.relayUrl, maxRetries: 0 }).messages
    .create({ model, max_tokens: 4, messages: [{ role: 'user', content: 'health' }], ...(endUser ? { metadata: { user_id: endUser } } : {}) })
    .withResponse();
  return { data, requestId: response.headers.get('x-gateway-request-id')! };
}

/** Requests the mock received for `path` with this credential. */
const sentWith = (credential: string, path = '/v1/messages') =>
  stack.mock.requests.filter((r) => r.path === path && r.headers['x-api-key'] === credential).length;

async function channelRow(id: number) {
  const [row] = await stack.sql`SELECT status, status_reason, status_time, probe_time, probe_result, probe_failures FROM channels WHERE id = ${id}`;
  return row as { status: number; status_reason: string; status_time: number; probe_time: number; probe_result: string; probe_failures: number };
}

async function until<T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not reached, last ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function relayMetrics(): Promise<Map<string, number>> {
  return parsePromText(await (await fetch(`http://127.0.0.1:${stack.relay.metricsPort}/metrics`)).text());
}

async function ledgerChannels(requestIds: string[]): Promise<Map<string, number>> {
  await billingSettled(stack);
  const rows = await stack.sql<{ request_id: string; channel_id: number }[]>`SELECT request_id, channel_id FROM ledger WHERE request_id = ANY(${requestIds})`;
  return new Map(rows.map((r) => [r.request_id, Number(r.channel_id)]));
}

describe('a channel whose provider key was revoked', () => {
  it('is disabled after N channel faults while every client request succeeds, and a probe re-enables it once the key is accepted again', async () => {
    const model = 'health-revoked';
    stack.mock.setOptions({ keyFailures: { [REVOKED]: 'revoked' } });
    const bad = await mockChannel(stack, [model], 'default', { key: REVOKED, priority: 10 });
    const good = await mockChannel(stack, [model], 'default', { priority: 0 });

    const ids: string[] = [];
    for (let i = 0; i < FAULTS_TO_DISABLE; i++) {
      const { data, requestId } = await send(model);
      expect(data.type).toBe('message');
      ids.push(requestId);
    }
    expect(sentWith(REVOKED)).toBe(FAULTS_TO_DISABLE);
    const disabled = await until('status 3', () => channelRow(bad), (r) => Number(r.status) === 3);
    expect(disabled.status_reason).toContain(`${FAULTS_TO_DISABLE} consecutive channel faults`);
    expect(disabled.status_reason).toContain('HTTP 401');
    expect(Number(disabled.status_time)).toBeGreaterThan(0);
    // Every relay of the stack (two on a cluster run, TEST_GATEWAY_RELAYS) drops it on the announcement.
    await until('every relay dropped the channel', async () => stack.relays.some((r) => r.hasChannel(bad)), (has) => !has);

    // Out of the rotation: the next requests go straight to the good channel.
    for (let i = 0; i < 5; i++) ids.push((await send(model)).requestId);
    expect(sentWith(REVOKED)).toBe(FAULTS_TO_DISABLE);
    const served = await ledgerChannels(ids);
    expect(served.size).toBe(ids.length);
    for (const id of ids) expect(served.get(id)).toBe(good);

    const m = await relayMetrics();
    expect(m.get(`gateway_relay_channel_attempts_total{channel="${bad}",outcome="channel"}`)).toBe(FAULTS_TO_DISABLE);
    expect(m.get(`gateway_relay_channel_status_changes_total{channel="${bad}",status="auto_disabled"}`)).toBe(1);
    expect(m.get(`gateway_relay_channel_ttfb_seconds_count{channel="${good}"}`)).toBeGreaterThanOrEqual(ids.length);

    // Probed while the key is still refused: the probe is recorded, the channel stays out.
    const failedProbe = await until('a failed probe', () => channelRow(bad), (r) => Number(r.probe_time) > 0);
    expect(failedProbe.probe_result).toContain('HTTP 401');
    expect(Number(failedProbe.status)).toBe(3);
    expect(sentWith(REVOKED, '/v1/messages/count_tokens')).toBeGreaterThanOrEqual(1);
    // Probes are the cheap kind: never a generation.
    expect(sentWith(REVOKED)).toBe(FAULTS_TO_DISABLE);

    stack.mock.setOptions({ keyFailures: {} });
    const back = await until('re-enabled by a probe', () => channelRow(bad), (r) => Number(r.status) === 1);
    expect(back.probe_result).toBe('ok');
    expect(back.status_reason).toContain('probe');
    await until('every relay took the channel back', async () => stack.relays.every((r) => r.hasChannel(bad)), (has) => has);
    const seen = await relayMetrics();
    // Per relay; relays in one process (a cluster run's two) count into the one registry.
    const relays = stack.relays.length;
    expect(seen.get(`gateway_relay_channel_route_changes_total{channel="${bad}",change="left"}`)).toBe(relays);
    // Joined when created, left when disabled, joined again when the probe re-enabled it.
    expect(seen.get(`gateway_relay_channel_route_changes_total{channel="${bad}",change="joined"}`)).toBe(2 * relays);
    const { requestId } = await send(model);
    expect((await ledgerChannels([requestId])).get(requestId)).toBe(bad);

    // The money: what left the balance is exactly what the ledger holds, every request billed once.
    await billingSettled(stack);
    // (This is the file's first spending: the account's ledger holds only these requests since funding.)
    const all = [...ids, requestId];
    const [book] = await stack.sql`SELECT u.quota, (SELECT coalesce(sum(quota), 0) FROM ledger WHERE user_id = u.id AND request_id = ANY(${all})) AS spent,
                                          (SELECT count(*) FROM ledger WHERE user_id = u.id AND request_id = ANY(${all})) AS rows
                                   FROM users u WHERE u.id = ${account.id}`;
    expect(Number(book!.rows)).toBe(ids.length + 1);
    expect(Number(book!.spent)).toBeGreaterThan(0);
    expect(Number(book!.quota) + Number(book!.spent)).toBe(funded);
  }, 60_000);
});

describe('what counts, and the per-channel overrides', () => {
  it('the client\'s own bad request is passed through and never counts against the channel', async () => {
    const model = 'health-client-error400';
    const ch = await mockChannel(stack, [model], 'default', { fault_threshold: 1 });
    for (let i = 0; i < 3; i++) {
      const err = await send(model).catch((e: unknown) => e);
      expect((err as InstanceType<typeof Anthropic.APIError>).status).toBe(400);
    }
    expect(Number((await channelRow(ch)).status)).toBe(1);
    expect((await relayMetrics()).get(`gateway_relay_channel_attempts_total{channel="${ch}",outcome="client"}`)).toBe(3);
  });

  it('fault_threshold overrides the fleet\'s setting; auto_ban false keeps a channel whatever it does', async () => {
    const model = 'health-overrides';
    const key1 = 'sk-ant-override-1';
    const key2 = 'sk-ant-override-2';
    stack.mock.setOptions({ apiKeys: [REVOKED, MANUAL, ...SPREAD, key1, key2], keyFailures: { [key1]: 'no_credit', [key2]: 'forbidden' } });
    const strict = await mockChannel(stack, [model], 'default', { key: key1, priority: 20, fault_threshold: 1 });
    const exempt = await mockChannel(stack, [model], 'default', { key: key2, priority: 10, auto_ban: false });
    const good = await mockChannel(stack, [model], 'default', { priority: 0 });
    // First request: strict (credit too low) then exempt (403) fail, good answers.
    const { requestId } = await send(model);
    expect((await ledgerChannels([requestId])).get(requestId)).toBe(good);
    const disabled = await until('strict disabled after one fault', () => channelRow(strict), (r) => Number(r.status) === 3);
    expect(disabled.status_reason).toContain('HTTP 400');
    await until('relay dropped it', async () => stack.relay.hasChannel(strict), (has) => !has);
    for (let i = 0; i < FAULTS_TO_DISABLE + 2; i++) expect((await send(model)).data.type).toBe('message');
    // Let any disabling in flight land before looking.
    await new Promise((r) => setTimeout(r, 300));
    expect(Number((await channelRow(exempt)).status)).toBe(1);
    expect((await relayMetrics()).get(`gateway_relay_channel_attempts_total{channel="${exempt}",outcome="channel"}`)).toBe(FAULTS_TO_DISABLE + 3);
    stack.mock.setOptions({ keyFailures: {} });
  }, 30_000);
});

describe('a channel an administrator disabled', () => {
  it('is never probed, while a channel disabled automatically is', async () => {
    const model = 'health-manual';
    const manual = await mockChannel(stack, [model], 'default', { key: MANUAL, status: 2 });
    const auto = await mockChannel(stack, [model], 'default', { key: SPREAD[0], status: 3 });
    await stack.sql`UPDATE channels SET next_probe_time = 0 WHERE id = ANY(${[manual, auto]})`;
    // The automatic one is probed (and comes back: its key is good)...
    await until('the status 3 channel probed', () => channelRow(auto), (r) => Number(r.probe_time) > 0 && Number(r.status) === 1);
    // ...and several prober rounds later the manual one is still untouched.
    await new Promise((r) => setTimeout(r, 500));
    const row = await channelRow(manual);
    expect(Number(row.status)).toBe(2);
    expect(Number(row.probe_time)).toBe(0);
    expect(sentWith(MANUAL, '/v1/messages/count_tokens') + sentWith(MANUAL)).toBe(0);
  }, 30_000);
});

describe('cache affinity', () => {
  it('keeps one API key on one channel of a tier across 100 requests', async () => {
    const model = 'health-affinity-key';
    for (const k of SPREAD) await mockChannel(stack, [model], 'default', { key: k });
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) ids.push(...(await Promise.all(Array.from({ length: 10 }, () => send(model)))).map((r) => r.requestId));
    const served = await ledgerChannels(ids);
    expect(served.size).toBe(100);
    expect(new Set(served.values()).size).toBe(1);
  }, 60_000);

  it('spreads end users (metadata.user_id) over the tier, and a failing channel moves only its own users', async () => {
    const model = 'health-affinity-users';
    const channels: number[] = [];
    for (const k of SPREAD) channels.push(await mockChannel(stack, [model], 'default', { key: k }));
    const users = Array.from({ length: 40 }, (_, i) => `end-user-${i}`);
    const sendAll = async () => {
      const sent = await Promise.all(users.map(async (u) => [u, (await send(model, u)).requestId] as const));
      const served = await ledgerChannels(sent.map(([, id]) => id));
      return new Map(sent.map(([u, id]) => [u, served.get(id)!]));
    };
    const before = await sendAll();
    expect(new Set(before.values()).size).toBeGreaterThan(1);
    // Again: every user where it was.
    const again = await sendAll();
    for (const u of users) expect(again.get(u)).toBe(before.get(u));

    // The busiest channel's key is revoked: its users fail over, and it is disabled.
    const counts = new Map<number, number>();
    for (const c of before.values()) counts.set(c, (counts.get(c) ?? 0) + 1);
    const failing = [...counts.entries()].sort((a, b) => b[1] - a[1])[0]![0];
    const failingKey = SPREAD[channels.indexOf(failing)]!;
    stack.mock.setOptions({ keyFailures: { [failingKey]: 'revoked' } });
    const during = await sendAll();
    await until('the failing channel disabled', () => channelRow(failing), (r) => Number(r.status) === 3);
    await until('relay dropped it', async () => stack.relay.hasChannel(failing), (has) => !has);
    const after = await sendAll();
    for (const u of users) {
      if (before.get(u) === failing) {
        expect(during.get(u)).not.toBe(failing);
        expect(after.get(u)).not.toBe(failing);
      } else {
        // Users of the healthy channels never moved.
        expect(during.get(u)).toBe(before.get(u));
        expect(after.get(u)).toBe(before.get(u));
      }
    }
    stack.mock.setOptions({ keyFailures: {} });
  }, 60_000);
});
