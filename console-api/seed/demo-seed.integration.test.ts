// The demo seed of `make run` on a Postgres database of its own: both demo channels (the Anthropic
// mock, type 14, and the OpenAI-format mock, type 1) with their abilities and sealed credentials,
// and nothing created twice when it runs again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSql, type Sql } from '../../infra/postgres/client.js';
import { createOptionSealer } from '../../core/options/option-secrets.js';
import { createApiKeyCrypto } from '../../infra/secrets/api-key-crypto.js';
import { testConfig } from '../../infra/testing/test-config.js';
import { createTestDatabase, type TestDatabase } from '../../infra/testing/test-database.js';
import { ensureRootAccount } from '../accounts/root-account.js';
import { demoLogins, rootLogin, seedDemo } from './demo-seed.js';

let db: TestDatabase;
let sql: Sql;
const env = { DEMO_PASSWORD: 'demo-password-1', ADMIN_PASSWORD: 'admin-password-1', MOCK_OPENAI_PORT: '3193', MOCK_OPENAI_KEY: 'sk-proj-seed-test' };

beforeAll(async () => {
  db = await createTestDatabase('seed');
  sql = createSql(testConfig({ DATABASE_URL: db.url }));
}, 60_000);
afterAll(async () => {
  await sql?.end({ timeout: 5 });
  await db?.drop();
});

describe('seedDemo', () => {
  it('creates the Anthropic and the OpenAI-format demo channels once, with their abilities', async () => {
    const config = testConfig({ DATABASE_URL: db.url, ...env });
    const first = await seedDemo(sql, config);
    expect(first.created).toEqual(expect.arrayContaining(['channel mock-openai -> http://127.0.0.1:3193']));
    const channels = await sql<{ name: string; type: number; base_url: string; models: string; key_ciphertext: Buffer }[]>`
      SELECT name, type, base_url, models, key_ciphertext FROM channels ORDER BY name`;
    expect(channels.map((c) => [c.name, Number(c.type)])).toEqual([['mock-anthropic', 14], ['mock-openai', 1]]);
    const openai = channels[1]!;
    expect(openai).toMatchObject({ base_url: 'http://127.0.0.1:3193', models: 'gpt-4o-mini,gpt-4o,gpt-4.1' });
    expect(createApiKeyCrypto(config.KEY_SECRET).open(openai.key_ciphertext)).toBe('sk-proj-seed-test');
    const abilities = await sql<{ model: string }[]>`
      SELECT a.model FROM abilities a JOIN channels c ON c.id = a.channel_id WHERE c.name = 'mock-openai' AND a.enabled ORDER BY a.model`;
    expect(abilities.map((a) => a.model)).toEqual(['gpt-4.1', 'gpt-4o', 'gpt-4o-mini']);

    // The sandbox's payment secrets are sealed like any secret option.
    const [epayKey] = await sql<{ value: string }[]>`SELECT value FROM options WHERE key = 'EpayKey'`;
    expect(epayKey!.value).toMatch(/^sealed:v1:/);
    expect(createOptionSealer(config.KEY_SECRET).open('EpayKey', epayKey!.value)).toBe('epay-sandbox-key');

    const again = await seedDemo(sql, config);
    expect(again.created).toEqual([]);
    expect(again.demoKey).toBe(first.demoKey);
    expect(await sql`SELECT id FROM channels`).toHaveLength(2);
  });

  // Before (review operator): MOCK_UPSTREAM_PORT, MOCK_OPENAI_PORT and CONSOLE_PORT counted on the
  // first seed only: the mocks listened on the new ports, the channels still pointed at the old ones,
  // and the command `make run` printed got 500 upstream_unreachable.
  it('moves the demo channels and ServerAddress to the ports of this start; an address an administrator set is kept', async () => {
    const moved = testConfig({ DATABASE_URL: db.url, ...env, MOCK_UPSTREAM_PORT: '3290', MOCK_OPENAI_PORT: '3293', CONSOLE_PORT: '3201', EPAY_SANDBOX_PORT: '3291', CARDPAY_SANDBOX_PORT: '3292' });
    const result = await seedDemo(sql, moved);
    expect(result.created).toEqual(expect.arrayContaining(['channel mock-anthropic -> http://127.0.0.1:3290', 'channel mock-openai -> http://127.0.0.1:3293']));
    const urls = await sql<{ name: string; base_url: string }[]>`SELECT name, base_url FROM channels ORDER BY name`;
    expect(urls.map((c) => c.base_url)).toEqual(['http://127.0.0.1:3290', 'http://127.0.0.1:3293']);
    const [address] = await sql<{ value: string }[]>`SELECT value FROM options WHERE key = 'ServerAddress'`;
    expect(address!.value).toBe(`http://${moved.CONSOLE_HOST}:3201`);
    // The payment sandboxes too (checkout went to 3091 and 3092 whatever ports they listened on).
    const payment = await sql<{ key: string; value: string }[]>`SELECT key, value FROM options WHERE key IN ('PayAddress', 'CardpayApiAddress') ORDER BY key`;
    expect(payment.map((o) => [o.key, o.value])).toEqual([['CardpayApiAddress', 'http://127.0.0.1:3292'], ['PayAddress', 'http://127.0.0.1:3291']]);
    // Set by hand to somewhere else: left as it is.
    await sql`UPDATE channels SET base_url = 'https://api.anthropic.com' WHERE name = 'mock-anthropic'`;
    await sql`UPDATE options SET value = 'https://console.example.com' WHERE key = 'ServerAddress'`;
    await seedDemo(sql, testConfig({ DATABASE_URL: db.url, ...env }));
    const [kept] = await sql<{ base_url: string }[]>`SELECT base_url FROM channels WHERE name = 'mock-anthropic'`;
    expect(kept!.base_url).toBe('https://api.anthropic.com');
    const [keptAddress] = await sql<{ value: string }[]>`SELECT value FROM options WHERE key = 'ServerAddress'`;
    expect(keptAddress!.value).toBe('https://console.example.com');
  });

  // Before (review operator): a checkout whose .data/ was made after the accounts (another checkout's
  // database) printed its own passwords for them, which failed to log in.
  it('demoLogins shows a password only when it is the account\'s', async () => {
    expect(await demoLogins(sql, testConfig({ DATABASE_URL: db.url, ...env }))).toBe('demo / demo-password-1, admin / admin-password-1');
    expect(await demoLogins(sql, testConfig({ DATABASE_URL: db.url, ...env, DEMO_PASSWORD: 'another-checkout-1' })))
      .toBe("demo / (set before this checkout's .data/; not shown), admin / admin-password-1");
  });

  // Review run: a second `make run` printed a root password changed since (no longer a login), and a
  // command with the demo key its owner had disabled (401), saying nothing of either.
  it('rootLogin shows the generated root password only while it is root\'s; the seed says when the demo key is disabled or expired', async () => {
    await ensureRootAccount(sql, testConfig({ DATABASE_URL: db.url, ROOT_PASSWORD: 'root-password-1' }), () => {});
    expect(await rootLogin(sql, '.data/root-password', 'root-password-1')).toBe('root / root-password-1   (generated into .data/root-password)');
    expect(await rootLogin(sql, '.data/root-password', 'changed-since-1')).toBe('root / (changed since it was generated into .data/root-password; not shown)');
    const config = testConfig({ DATABASE_URL: db.url, ...env });
    expect((await seedDemo(sql, config)).demoKeyRefusal).toBe('');
    await sql`UPDATE tokens SET status = 2 WHERE name = 'demo'`;
    expect((await seedDemo(sql, config)).demoKeyRefusal).toBe('disabled');
    await sql`UPDATE tokens SET status = 1, expired_time = 1 WHERE name = 'demo'`;
    expect((await seedDemo(sql, config)).demoKeyRefusal).toBe('expired');
    await sql`UPDATE tokens SET expired_time = -1 WHERE name = 'demo'`;
    expect((await seedDemo(sql, config)).demoKeyRefusal).toBe('');
  });
});
