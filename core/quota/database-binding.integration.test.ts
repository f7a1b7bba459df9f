// A Redis holds the money of one database: the operator's reset (the database dropped and made again,
// the Redis kept) had the new database's account 1 spend the old account 1's mirror. Review operator:
// 62,499,023 quota mirrored for an account the new database gave 50,000,000, then 100; three Opus
// requests were served and the balance went to −7,145.
import Anthropic from '@anthropic-ai/sdk';
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../infra/config.js';
import { createSql, type Sql } from '../../infra/postgres/client.js';
import { createTestDatabase, type TestDatabase } from '../../infra/testing/test-database.js';
import { createApiKey, fundedAccount, mockChannel, type GatewayStack, startGatewayStack } from '../../tests/harness/gateway-stack.js';
import { startRelay } from '../../relay/server.js';
import { startBilling } from '../../billing/service.js';
import { createLogger } from '../../infra/logger.js';
import { assertRedisOfDatabase, databaseInstanceId, prefixDeletion, redisBoundTo } from './database-binding.js';

let stack: GatewayStack;
/** A database made after the stack's, next to the stack's Redis and prefix (a reset). */
let remade: TestDatabase;
let remadeSql: Sql;

beforeAll(async () => {
  stack = await startGatewayStack();
  await mockChannel(stack, ['claude-sonnet-4-5']);
  remade = await createTestDatabase('remade');
  remadeSql = createSql({ ...stack.config, DATABASE_URL: remade.url });
});
afterAll(async () => {
  await remadeSql?.end({ timeout: 5 });
  await stack?.close();
  await remade?.drop();
});

describe('a Redis bound to its database', () => {
  it('each database has an id of its own, the same every time it is read', async () => {
    const ours = await databaseInstanceId(stack.sql);
    expect(ours).toMatch(/^[0-9a-f-]{36}$/);
    expect(await databaseInstanceId(stack.sql)).toBe(ours);
    expect(await databaseInstanceId(remadeSql)).not.toBe(ours);
  });

  it('the stack\'s Redis holds the stack database\'s id, and not the remade one\'s', async () => {
    expect(await stack.redis.get(stack.keys.databaseInstance())).toBe(await databaseInstanceId(stack.sql));
    expect(await redisBoundTo(stack.redis, stack.keys, await databaseInstanceId(stack.sql))).toBe(true);
    expect(await redisBoundTo(stack.redis, stack.keys, await databaseInstanceId(remadeSql))).toBe(false);
  });

  it('a relay, a billing worker and a console on the remade database refuse the old Redis at start, naming the prefix and the way out', async () => {
    // The old database's account, with money in its mirror.
    const account = await fundedAccount(stack, 50_000_000);
    const key = await createApiKey(stack, account);
    const anthropic = new Anthropic({ apiKey: key.key, baseURL: stack.relayUrl, maxRetries: 0 });
    await anthropic.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] });
    expect(Number(await stack.redis.get(stack.keys.accountBalance(account.id)))).toBeGreaterThan(0);

    const config = { ...stack.config, DATABASE_URL: remade.url };
    const log = createLogger(config, 'test');
    const refusals = await Promise.all([
      startRelay(config, log).then(async (r) => { await r.close(); return null; }, (err: unknown) => err),
      startBilling(config, log).then(async (b) => { await b.close(); return null; }, (err: unknown) => err),
      assertRedisOfDatabase(remadeSql, stack.redis, stack.keys, config.REDIS_PREFIX).then(() => null, (err: unknown) => err),
    ]);
    for (const refused of refusals) {
      expect(refused).toBeInstanceOf(ConfigError);
      expect((refused as Error).message).toContain('REDIS_PREFIX: the Redis at REDIS_URL');
      expect((refused as Error).message).toContain(prefixDeletion(config.REDIS_PREFIX));
    }
    // The old database's relay still serves.
    const again = await anthropic.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] });
    expect(again.type).toBe('message');
  }, 60_000);

  it('a Redis that lost the id (a restart without persistence) is bound again by the first to ask', async () => {
    const ours = await databaseInstanceId(stack.sql);
    const held = stack.keys.databaseInstance();
    await stack.redis.del(held);
    expect(await redisBoundTo(stack.redis, stack.keys, ours)).toBe(true);
    expect(await stack.redis.get(held)).toBe(ours);
    expect(await redisBoundTo(stack.redis, stack.keys, await databaseInstanceId(remadeSql))).toBe(false);
  });

  it('a database whose row is gone makes a new id, one for every service asking at once', async () => {
    const before = await databaseInstanceId(remadeSql);
    const other = createSql({ ...stack.config, DATABASE_URL: remade.url });
    try {
      for (let i = 0; i < 10; i++) {
        await remadeSql`DELETE FROM database_instance`;
        // Two services starting together: with a second SELECT, the one that lost the insert saw no row.
        const ids = await Promise.all([databaseInstanceId(remadeSql), databaseInstanceId(other), databaseInstanceId(remadeSql), databaseInstanceId(other)]);
        expect(new Set(ids).size).toBe(1);
        expect(ids[0]).not.toBe(before);
      }
    } finally {
      await other.end({ timeout: 5 });
    }
  });

  it('the deletion command the refusal gives removes the prefix\'s keys, names with quotes and spaces too, and no other', async () => {
    const prefix = `${stack.config.REDIS_PREFIX}-gone`;
    const names = [`${prefix}:{a1}:balance`, `${prefix}:console:{ip:1.2.3.4}:login:it's "me" `, ...Array.from({ length: 250 }, (_, i) => `${prefix}:{a${i}}:adj:${i}`)];
    for (const name of names) await stack.redis.set(name, '1');
    await stack.redis.set(`${prefix}x:kept`, '1');
    execFileSync('bash', ['-c', prefixDeletion(prefix)], { env: { ...process.env, REDIS_URL: stack.config.REDIS_URL } });
    expect(await stack.redis.exists(...names)).toBe(0);
    expect(await stack.redis.get(`${prefix}x:kept`)).toBe('1');
    await stack.redis.del(`${prefix}x:kept`);
  });
});
