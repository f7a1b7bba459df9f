// What a migration needs that SQL cannot do: run by the migrator (migrate.ts) in the migration's own
// transaction just before its file, leaving its results in temporary tables that the file reads.
import type pg from 'pg';
import type { Config } from '../config.js';
import { createRedemptionCodeCrypto, maskRedemptionCode } from '../secrets/redemption-code-crypto.js';

export type PrepareStep = (client: pg.Client, config: Config) => Promise<void>;

/**
 * The plain redemption codes of the rows made before 019, hashed, sealed and masked under KEY_SECRET
 * (SQL never sees it) into redemption_codes_sealed; 019 moves them into the rows and drops the plain
 * column. Here, not at the console's start: the migration is the one place that runs once, under
 * the migrator's lock, and the rows it leaves need no further conversion by any code path.
 */
async function sealRedemptionCodes(client: pg.Client, config: Config): Promise<void> {
  // Until the commit no other process (a console still running the code before 019) adds a plain code.
  await client.query('LOCK TABLE redemptions IN ACCESS EXCLUSIVE MODE');
  await client.query(`CREATE TEMP TABLE redemption_codes_sealed (
    id BIGINT PRIMARY KEY, key_hash BYTEA NOT NULL, key_ciphertext BYTEA NOT NULL, key_mask TEXT NOT NULL) ON COMMIT DROP`);
  const { rows } = await client.query<{ id: string; key: string }>('SELECT id, key FROM redemptions');
  if (rows.length === 0) return;
  // Refuses a missing KEY_SECRET: the migration fails and leaves the codes as they were.
  const crypto = createRedemptionCodeCrypto(config.KEY_SECRET);
  await client.query(
    `INSERT INTO redemption_codes_sealed
     SELECT id, decode(h, 'hex'), decode(c, 'hex'), m FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[]) AS t(id, h, c, m)`,
    [
      rows.map((r) => r.id),
      rows.map((r) => crypto.hash(r.key).toString('hex')),
      rows.map((r) => crypto.seal(r.key).toString('hex')),
      rows.map((r) => maskRedemptionCode(r.key)),
    ],
  );
}

export const PREPARE_STEPS: Readonly<Record<string, PrepareStep>> = {
  '019_redemption_code_hash.sql': sealRedemptionCodes,
};
