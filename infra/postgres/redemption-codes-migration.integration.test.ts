// Migration 019 converts the redemption codes stored in plain text before it: hashed and sealed under
// KEY_SECRET (which SQL cannot see, so the migrator does it), the plain column gone.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedemptionCodeCrypto, maskRedemptionCode } from '../secrets/redemption-code-crypto.js';
import { TEST_DATABASE_URL, testConfig } from '../testing/test-config.js';
import { migratePostgres } from './migrate.js';

const MIGRATION = '019_redemption_code_hash.sql';
const LEGACY = ['0123456789abcdef0123456789abcdef', 'fedcba9876543210fedcba9876543210', 'short-old-code'];

function databaseUrl(name: string): string {
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

const names: string[] = [];
/** A database migrated up to, not including, 019, holding plain codes as the routes used to write them. */
async function legacyDatabase(): Promise<string> {
  const name = `gateway_test_redeem_${randomBytes(5).toString('hex')}`;
  names.push(name);
  const url = databaseUrl(name);
  await migratePostgres(testConfig({ DATABASE_URL: url }), { before: MIGRATION });
  await withClient(url, async (c) => {
    for (const [i, code] of LEGACY.entries()) {
      await c.query('INSERT INTO redemptions (created_by, name, key, status, quota) VALUES (1, $1, $2, $3, 100)', [`old-${i}`, code, i === 1 ? 3 : 1]);
    }
  });
  return url;
}

let admin: string;
beforeAll(() => {
  admin = databaseUrl('postgres');
});
afterAll(async () => {
  await withClient(admin, async (c) => {
    for (const name of names) await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  });
});

describe(`migration ${MIGRATION}`, () => {
  it('hashes, seals and masks every plain code, then drops the plain column; a second run changes nothing', async () => {
    const url = await legacyDatabase();
    const config = testConfig({ DATABASE_URL: url });
    expect(await migratePostgres(config)).toContain(MIGRATION);
    const crypto = createRedemptionCodeCrypto(config.KEY_SECRET);
    await withClient(url, async (c) => {
      const columns = (await c.query(`SELECT column_name FROM information_schema.columns WHERE table_name = 'redemptions'`)).rows.map((r) => r.column_name);
      expect(columns).not.toContain('key');
      const { rows } = await c.query('SELECT * FROM redemptions ORDER BY id');
      expect(rows).toHaveLength(LEGACY.length);
      for (const [i, row] of rows.entries()) {
        const code = LEGACY[i]!;
        expect(row).toMatchObject({ name: `old-${i}`, status: i === 1 ? 3 : 1 });
        expect((row.key_hash as Buffer).equals(crypto.hash(code))).toBe(true);
        expect(crypto.open(row.key_ciphertext as Buffer)).toBe(code);
        expect(row.key_mask).toBe(maskRedemptionCode(code));
        for (const value of Object.values(row)) if (typeof value === 'string') expect(value).not.toContain(code);
      }
      expect(maskRedemptionCode(LEGACY[2]!)).not.toContain('old');
    });
    expect(await migratePostgres(config)).toEqual([]);
  });

  it('refuses to convert plain codes without KEY_SECRET, and leaves them as they were', async () => {
    const url = await legacyDatabase();
    await expect(migratePostgres(testConfig({ DATABASE_URL: url, KEY_SECRET: '' }))).rejects.toThrow(/KEY_SECRET is not set/);
    await withClient(url, async (c) => {
      expect((await c.query('SELECT key FROM redemptions ORDER BY id')).rows.map((r) => r.key)).toEqual(LEGACY);
      expect((await c.query('SELECT name FROM schema_migrations WHERE name = $1', [MIGRATION])).rowCount).toBe(0);
    });
  });
});
