// A console money write whose COMMIT reached Postgres and whose answer was lost (a failover, a load
// balancer's reset): it was answered 503 "retry shortly", and the retry credited twice (add_quota
// +1000 became +2000; a redemption was both "failed" and its code spent). The outcome is settled on a
// new connection, after the lost transaction's row locks: committed, the write is answered as done;
// rolled back, the 503 stands and a retry is safe; neither can be told, an answer saying so, without
// "retry" (review faults).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresBalanceSource } from '../../core/quota/postgres-balance-source.js';
import { QuotaStore } from '../../core/quota/quota-store.js';
import { createLogger } from '../../infra/logger.js';
import { createSql, type Sql } from '../../infra/postgres/client.js';
import { isDatabaseUnavailable } from '../../infra/postgres/unavailable.js';
import { createRedis, deleteKeysWithPrefix, redisKeysFor, type Redis } from '../../infra/redis/client.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { createTestDatabase, type TestDatabase } from '../../infra/testing/test-database.js';
import { startTcpProxy, type ChunkVerdict, type ProxiedConnection, type TcpProxy } from '../../tests/chaos/tcp-proxy.js';
import { ConsoleError } from '../http/errors.js';
import { debitTransaction, manageRequestId, recordConsoleCredit } from './console-ledger.js';

let db: TestDatabase;
let proxy: TcpProxy;
let direct: Sql;
let proxied: Sql;
let redis: Redis;
let ctx: Parameters<typeof debitTransaction>[0];
let onCommit: ChunkVerdict = 'forward';
let prefix = '';

/** Whether a chunk a client sent holds its COMMIT (postgres.js sends it as a named statement after its first use). */
function commitOf(text: string, conn: ProxiedConnection): boolean {
  const parsed = /P[\s\S]{4}([^\0]*)\0commit\0/.exec(text);
  if (parsed && parsed[1]) conn.notes.commit = parsed[1];
  const name = conn.notes.commit as string | undefined;
  return parsed !== null || /\0commit\0/.test(text) || (name !== undefined && text.includes(`\0${name}\0`));
}

beforeAll(async () => {
  db = await createTestDatabase('commitlost');
  const u = new URL(db.url);
  proxy = await startTcpProxy({ host: u.hostname, port: Number(u.port || 5432) }, {
    onClientChunk: (text, conn) => {
      // Read on every chunk: a connection names its COMMIT statement once, when it first prepares it.
      const isCommit = commitOf(text, conn);
      if (onCommit === 'forward' || !isCommit) return 'forward';
      const verdict = onCommit;
      onCommit = 'forward';
      return verdict;
    },
  });
  const config = testConfig({ DATABASE_URL: db.url });
  prefix = config.REDIS_PREFIX;
  u.host = `127.0.0.1:${proxy.port}`;
  direct = createSql(config);
  proxied = createSql({ ...config, DATABASE_URL: u.toString() });
  redis = createRedis(config, 'test');
  ctx = { sql: proxied, quotaStore: new QuotaStore(redis, redisKeysFor(config), postgresBalanceSource(direct)), logger: createLogger(config, 'test') };
});

afterAll(async () => {
  await proxied?.end({ timeout: 2 });
  await direct?.end({ timeout: 2 });
  if (redis) {
    await deleteKeysWithPrefix(redis, prefix);
    await redis.quit();
  }
  await proxy?.close();
  await db?.drop();
});

async function account(quota: number): Promise<number> {
  const [row] = await direct<{ id: number }[]>`
    INSERT INTO users (username, display_name, password_hash, role, quota, aff_code)
    VALUES (${`u${Math.random().toString(36).slice(2, 10)}`}, 'u', 'x', 1, ${quota}, ${Math.random().toString(36).slice(2, 10)}) RETURNING id`;
  return Number(row!.id);
}

const balance = async (id: number): Promise<number> => Number((await direct<{ quota: string }[]>`SELECT quota FROM users WHERE id = ${id}`)[0]!.quota);
const ledgerRows = async (id: number): Promise<number> => Number((await direct<{ n: number }[]>`SELECT count(*)::int AS n FROM ledger WHERE user_id = ${id}`)[0]!.n);

function credit(userId: number, delta: number) {
  return debitTransaction(ctx, async (tx) => {
    const c = await recordConsoleCredit(tx, { requestId: manageRequestId(), type: 3, userId, delta, content: `+${delta}`, createdAt: Math.floor(Date.now() / 1000) });
    return c!;
  });
}

describe('a console credit whose COMMIT answer was lost', () => {
  it('committed: answered as done, once (a retry is not asked for)', async () => {
    const id = await account(100_000);
    onCommit = 'forwardThenCut';
    const done = await credit(id, 1000);
    expect(done.delta).toBe(1000);
    expect(done.balance).toBe(101_000);
    expect(await balance(id)).toBe(101_000);
    expect(await ledgerRows(id)).toBe(1);
  });

  it('the COMMIT never reached Postgres: rolled back, answered as the database unreachable, which a retry may follow', async () => {
    const id = await account(100_000);
    onCommit = 'cut';
    const err = await credit(id, 1000).then(() => null, (e: unknown) => e);
    expect(isDatabaseUnavailable(err)).toBe(true);
    expect(await balance(id)).toBe(100_000);
    expect(await ledgerRows(id)).toBe(0);
    // The retry the 503 asks for credits once.
    await credit(id, 1000);
    expect(await balance(id)).toBe(101_000);
  });

  it('neither can be told (the database still out of reach): an answer saying the change may have been made, without "retry"', async () => {
    const id = await account(100_000);
    onCommit = 'forwardThenCut';
    // New connections refused from the moment the COMMIT goes out: the outcome cannot be read.
    const pending = credit(id, 1000).then(() => null, (e: unknown) => e);
    await new Promise((r) => setTimeout(r, 20));
    proxy.cut();
    const err = await pending;
    proxy.restore();
    expect(err).toBeInstanceOf(ConsoleError);
    expect((err as ConsoleError).code).toBe('COMMIT_OUTCOME_UNKNOWN');
    expect((err as ConsoleError).retryAfterSec).toBeUndefined();
    expect((err as ConsoleError).message).not.toMatch(/retry shortly/);
  });
});
