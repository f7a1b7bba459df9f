// A settlement Redis ran whose answer never reached the relay (the connection dropped right after
// the command went out: a network blip, a proxy, a Redis killed after its AOF write). ioredis sends
// the unanswered command again on the new connection, so the relay's first try answers "no
// reservation" although it was settled. Review diffreview: the lost-reservation path then debited the
// cost a second time from the Redis mirrors (balance 9,996,250 against Postgres 9,997,500, the key's
// quota likewise; five or six draws of a credit slice), Postgres deduplicating by request id. Now a
// settlement whose connection changed while it was out is never taken for a lost one.
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../infra/testing/free-port.js';
import { billingSettled, createApiKey, fundedAccount, mockChannel, startGatewayStack, type GatewayStack } from '../harness/gateway-stack.js';
import { LONG_PROMPT, NORMAL_INPUT, NORMAL_OUTPUT, normalMessage, startScriptedProvider, unnamedCost, type ScriptedProvider } from '../harness/scripted-provider.js';
import { relayMetrics } from '../../relay/metrics/relay-metrics.js';
import { startRedisServer, type OwnRedisServer } from './redis-server.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';
import { until } from '../harness/until.js';

const MODEL = 'answer-lost-model';
const COST = unnamedCost(NORMAL_INPUT, NORMAL_OUTPUT);

let redisServer: OwnRedisServer;
let proxy: TcpProxy;
/** Armed: the next command carrying a usage event of MODEL goes to Redis, and its answer is lost with the connection. */
let armed = false;
let cuts = 0;
let provider: ScriptedProvider;
let stack: GatewayStack;

beforeAll(async () => {
  redisServer = await startRedisServer({ port: await freePort(), aof: true });
  proxy = await startTcpProxy({ host: '127.0.0.1', port: redisServer.port }, {
    onClientChunk: (text) => {
      if (!armed || !text.includes(`"model_name":"${MODEL}"`)) return 'forward';
      armed = false;
      cuts++;
      return 'forwardThenCut';
    },
  });
  provider = await startScriptedProvider((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(normalMessage(MODEL));
  });
  stack = await startGatewayStack({ env: { REDIS_URL: `redis://127.0.0.1:${proxy.port}` } });
  await mockChannel(stack, [MODEL], 'default', { base_url: provider.url });
}, 60_000);
afterAll(async () => {
  await stack?.close();
  await provider?.close();
  await proxy?.close();
  await redisServer?.close();
});

interface Books { pgQuota: number; ledgerRows: number; ledgerSum: number; redisBalance: number; pgRemain?: number; redisRemain?: number }

async function books(userId: number, tokenId?: number): Promise<Books> {
  await billingSettled(stack);
  const [u] = await stack.sql`SELECT quota FROM users WHERE id = ${userId}`;
  const [l] = await stack.sql`SELECT count(*)::int AS n, coalesce(sum(quota),0)::bigint AS q FROM ledger WHERE user_id = ${userId} AND type = 2`;
  const out: Books = {
    pgQuota: Number(u!.quota), ledgerRows: l!.n, ledgerSum: Number(l!.q),
    redisBalance: Number(await stack.redis.get(stack.keys.accountBalance(userId))),
  };
  if (tokenId !== undefined) {
    const [t] = await stack.sql`SELECT remain_quota FROM tokens WHERE id = ${tokenId}`;
    out.pgRemain = Number(t!.remain_quota);
    out.redisRemain = Number(await stack.redis.get(stack.keys.tokenRemain(userId, tokenId)));
  }
  return out;
}

describe('a settlement whose answer was lost on the wire', () => {
  it('of a reservation of a limited key: billed once, in Postgres and in the mirrors of the balance and the key', async () => {
    const acct = await fundedAccount(stack, 10_000_000);
    const key = await createApiKey(stack, acct, { unlimited_quota: false, remain_quota: 5_000_000 });
    const client = new Anthropic({ apiKey: key.key, baseURL: stack.relayUrl, maxRetries: 0 });
    // A first request loads the mirrors.
    await client.messages.create({ model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: LONG_PROMPT }] });
    await until('the first request billed', async () => (await books(acct.id)).ledgerRows === 1);
    const before = await books(acct.id, key.id);
    const lostBefore = relayMetrics.lostReservationsBilled.value;
    const cutsBefore = cuts;
    armed = true;
    await client.messages.create({ model: MODEL, max_tokens: 100, messages: [{ role: 'user', content: LONG_PROMPT }] });
    await until('the second request billed', async () => (await books(acct.id)).ledgerRows === 2);
    const after = await books(acct.id, key.id);
    expect(cuts - cutsBefore).toBe(1);
    expect(after.pgQuota).toBe(before.pgQuota - COST);
    expect(after.ledgerSum).toBe(before.ledgerSum + COST);
    expect(after.redisBalance).toBe(after.pgQuota);
    expect(after.pgRemain).toBe(before.pgRemain! - COST);
    expect(after.redisRemain).toBe(after.pgRemain);
    expect(relayMetrics.lostReservationsBilled.value).toBe(lostBefore);
  }, 60_000);

  it('of draws from a credit slice: each billed once, in Postgres and in the balance\'s mirror', async () => {
    const acct = await fundedAccount(stack, 10_000_000);
    const key = await createApiKey(stack, acct, {});
    const client = new Anthropic({ apiKey: key.key, baseURL: stack.relayUrl, maxRetries: 0 });
    const params = { model: MODEL, max_tokens: 100, messages: [{ role: 'user' as const, content: LONG_PROMPT }] };
    // Busy enough for a slice (the fifth request of a burst on).
    await Promise.all(Array.from({ length: 8 }, () => client.messages.create(params)));
    await until('the first burst billed', async () => (await books(acct.id)).ledgerRows === 8);
    const before = await books(acct.id);
    const lostBefore = relayMetrics.lostReservationsBilled.value;
    const cutsBefore = cuts;
    armed = true;
    await Promise.all(Array.from({ length: 8 }, () => client.messages.create(params)));
    await until('the second burst billed', async () => (await books(acct.id)).ledgerRows === 16);
    // The slice goes back to the balance once idle (a second); a draw debited twice never lets the two meet.
    await until('the balance\'s mirror to meet Postgres', async () => {
      const b = await books(acct.id);
      return b.redisBalance === b.pgQuota;
    });
    const after = await books(acct.id);
    expect(cuts - cutsBefore).toBe(1);
    expect(after.pgQuota).toBe(before.pgQuota - 8 * COST);
    expect(after.redisBalance).toBe(after.pgQuota);
    expect(relayMetrics.lostReservationsBilled.value).toBe(lostBefore);
  }, 60_000);
});
