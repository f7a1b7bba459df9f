// Every Redis key of the system is built here. Per-account keys share the hash tag {a<id>} so that
// one Lua script can touch an account's balance, its key's quota and its reservation in Redis Cluster.
export interface RedisKeys {
  /** Spendable balance of an account: Postgres quota minus unsettled debits minus open reservations. */
  accountBalance(userId: number): string;
  /** Remaining quota of a limited API key, on the same terms as accountBalance. */
  tokenRemain(userId: number, tokenId: number): string;
  /** One open reservation (a hash), removed by settlement. */
  reservation(userId: number, requestId: string): string;
  /** The usage events stream the billing worker consumes. */
  usageStream(): string;
  /** Pub/sub channel on which the console announces changed keys, accounts, channels and options. */
  invalidationChannel(): string;
}

export function redisKeys(prefix: string): RedisKeys {
  return {
    accountBalance: (userId) => `${prefix}:{a${userId}}:balance`,
    tokenRemain: (userId, tokenId) => `${prefix}:{a${userId}}:token:${tokenId}:remain`,
    reservation: (userId, requestId) => `${prefix}:{a${userId}}:rsv:${requestId}`,
    usageStream: () => `${prefix}:usage`,
    invalidationChannel: () => `${prefix}:invalidate`,
  };
}
