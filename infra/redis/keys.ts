// Every Redis key of the system is built here. The gateway runs on a single Redis, not a Redis
// Cluster. Per-account keys share the hash tag {a<id>} and a console address's login keys share
// {ip:<address>}, as a cluster would need, but `usage`, `usage:dead` and `rsv-deadlines` have no tag
// and are written together with per-account keys (reserveQuota-6.lua, settleReservation-7.lua) or with
// each other (the billing worker's MULTI), which a cluster refuses across slots. Cluster mode is a later
// change (per-slot deadline sets and streams); until then nothing here is cluster-ready.
export interface RedisKeys {
  /** Spendable balance of an account: Postgres quota minus unsettled debits minus open reservations. */
  accountBalance(userId: number): string;
  /** Remaining quota of a limited API key, on the same terms as accountBalance. */
  tokenRemain(userId: number, tokenId: number): string;
  /** One open reservation (a hash), removed by settlement. */
  reservation(userId: number, requestId: string): string;
  /** Left by the reaper when it releases an expired reservation, so a late settlement still bills. */
  reapedReservation(userId: number, requestId: string): string;
  /** Set once a console change (ledger id) has moved the account's mirror: retries apply it once. */
  adjustmentApplied(userId: number, ledgerId: number): string;
  /** users.credit_seq the account mirror was seeded with: console changes up to it are in the mirror. */
  accountCreditSeq(userId: number): string;
  /** tokens.quota_seq a limited key's mirror was seeded with (accountCreditSeq for a key). */
  tokenQuotaSeq(userId: number, tokenId: number): string;
  /** Set once a key's remain_quota edit (key_quota_edits id) has moved the key's mirror. */
  keyQuotaEditApplied(userId: number, editId: number): string;
  /** Open reservations by deadline (sorted set: score Unix ms, member `<userId>:<requestId>`). */
  reservationDeadlines(): string;
  /** Requests of one API key in one wall-clock minute (`minute` = Unix minutes). */
  keyRequestsInMinute(userId: number, tokenId: number, minute: number): string;
  /** Tokens (input + output) of one API key in one wall-clock minute. */
  keyTokensInMinute(userId: number, tokenId: number, minute: number): string;
  /** Token counts (count_tokens calls and prompt counts) of one API key in one wall-clock minute. */
  keyCountsInMinute(userId: number, tokenId: number, minute: number): string;
  /** The usage events stream the billing worker consumes. */
  usageStream(): string;
  /** Entries of the usage stream the billing worker could not decode, set aside with their source id. */
  usageDeadLetterStream(): string;
  /** Console login attempts naming one account (hashed) from one address, in the current window. */
  loginAttempts(who: string, ip: string): string;
  /** Console login attempts from one address, whatever account they name, in the current window. */
  loginAttemptsFromAddress(ip: string): string;
  /** Console registrations from one address, in the current window. */
  registrationsFromAddress(ip: string): string;
  /** Pub/sub channel on which the console announces changed keys, accounts, channels and options. */
  invalidationChannel(): string;
}

export function redisKeys(prefix: string): RedisKeys {
  return {
    accountBalance: (userId) => `${prefix}:{a${userId}}:balance`,
    tokenRemain: (userId, tokenId) => `${prefix}:{a${userId}}:token:${tokenId}:remain`,
    reservation: (userId, requestId) => `${prefix}:{a${userId}}:rsv:${requestId}`,
    reapedReservation: (userId, requestId) => `${prefix}:{a${userId}}:reaped:${requestId}`,
    reservationDeadlines: () => `${prefix}:rsv-deadlines`,
    adjustmentApplied: (userId, ledgerId) => `${prefix}:{a${userId}}:adj:${ledgerId}`,
    accountCreditSeq: (userId) => `${prefix}:{a${userId}}:balance-seq`,
    tokenQuotaSeq: (userId, tokenId) => `${prefix}:{a${userId}}:token:${tokenId}:remain-seq`,
    keyQuotaEditApplied: (userId, editId) => `${prefix}:{a${userId}}:key-adj:${editId}`,
    keyRequestsInMinute: (userId, tokenId, minute) => `${prefix}:{a${userId}}:rl:${tokenId}:rpm:${minute}`,
    keyTokensInMinute: (userId, tokenId, minute) => `${prefix}:{a${userId}}:rl:${tokenId}:tpm:${minute}`,
    keyCountsInMinute: (userId, tokenId, minute) => `${prefix}:{a${userId}}:rl:${tokenId}:count:${minute}`,
    usageStream: () => `${prefix}:usage`,
    usageDeadLetterStream: () => `${prefix}:usage:dead`,
    // The address is the hash tag: one MULTI counts an attempt on both login keys of an address, and
    // Redis Cluster only runs a transaction whose keys share a slot.
    loginAttempts: (who, ip) => `${prefix}:console:{ip:${ip}}:login:${who}`,
    loginAttemptsFromAddress: (ip) => `${prefix}:console:{ip:${ip}}:login`,
    registrationsFromAddress: (ip) => `${prefix}:console:{ip:${ip}}:register`,
    invalidationChannel: () => `${prefix}:invalidate`,
  };
}
