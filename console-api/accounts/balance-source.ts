// The book-of-record values the QuotaStore seeds a missing Redis mirror from.
import type { Db } from '../db.js';
import type { BalanceSource } from '../../relay/quota/quota-store.js';

export function postgresBalanceSource(db: Db): BalanceSource {
  return {
    async accountQuota(userId) {
      const [row] = await db<{ quota: number }[]>`SELECT quota FROM users WHERE id = ${userId}`;
      return Number(row?.quota ?? 0);
    },
    async tokenRemainQuota(tokenId) {
      const [row] = await db<{ remain_quota: number }[]>`SELECT remain_quota FROM tokens WHERE id = ${tokenId}`;
      return Number(row?.remain_quota ?? 0);
    },
  };
}
