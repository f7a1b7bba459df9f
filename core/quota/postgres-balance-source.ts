import type { Sql } from '../../infra/postgres/client.js';
import type { BalanceSource } from './quota-store.js';

/**
 * The book-of-record values a missing Redis mirror is seeded from; a deleted (or missing) row's
 * mirror is seeded to expire as a deletion's mirrors do (quota-store.ts DELETED_MIRROR_TTL_SEC).
 */
export function postgresBalanceSource(sql: Sql): BalanceSource {
  return {
    async accountQuota(userId) {
      const [row] = await sql`SELECT quota FROM users WHERE id = ${userId}`;
      return Number(row?.quota ?? 0);
    },
    async accountSeed(userId) {
      const [row] = await sql`SELECT quota, credit_seq, deleted_at IS NOT NULL AS deleted FROM users WHERE id = ${userId}`;
      return { quota: Number(row?.quota ?? 0), creditSeq: Number(row?.credit_seq ?? 0), deleted: row === undefined || row.deleted === true };
    },
    async tokenRemainQuota(tokenId) {
      const [row] = await sql`SELECT remain_quota FROM tokens WHERE id = ${tokenId}`;
      return Number(row?.remain_quota ?? 0);
    },
    async tokenSeed(tokenId) {
      const [row] = await sql`SELECT remain_quota, quota_seq, deleted_at IS NOT NULL AS deleted FROM tokens WHERE id = ${tokenId}`;
      return { remain: Number(row?.remain_quota ?? 0), quotaSeq: Number(row?.quota_seq ?? 0), deleted: row === undefined || row.deleted === true };
    },
  };
}
