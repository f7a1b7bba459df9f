// Every Redis key of the system is built here, for two layouts.
//
// Unsharded (shards = 0, the default on a single Redis): the layout of before, unchanged, so an
// upgraded single-node gateway finds its stream, deadlines and mirrors where it left them. Per-account
// keys share the hash tag {a<id>}; the usage stream, its dead letters and the deadline set are global.
//
// Sharded (shards > 0; required on a Redis Cluster, REDIS_CLUSTER_NODES): each account belongs to one
// of `shards` virtual shards (user id modulo shards, fixed for the life of the data: changing it moves
// every mirror and orphans unbilled stream entries), and every key of an account carries its shard's
// hash tag {s<shard>}, as do that shard's usage stream, dead letters and deadline set. So each Lua
// script (reserveQuota, settleReservations, ...) and the billing worker's MULTI touch one slot, which
// a cluster requires; the shards spread over the masters by slot. A console address's login keys share
// {ip:<address>} in both layouts.
export interface RedisKeys {
  /** Virtual shards: 0 in the unsharded layout. */
  readonly shards: number;
  /** The shards whose streams and deadline sets exist: 0 .. streamShards-1 (1 when unsharded). */
  readonly streamShards: number;
  /** The shard of an account (0 when unsharded). */
  shardOf(userId: number): number;
  /** Spendable balance of an account: Postgres quota minus unsettled debits minus open reservations. */
  accountBalance(userId: number): string;
  /** Remaining quota of a limited API key, on the same terms as accountBalance. */
  tokenRemain(userId: number, tokenId: number): string;
  /** One open reservation (a hash), removed by settlement. */
  reservation(userId: number, requestId: string): string;
  /**
   * Left by the reaper when it releases an expired reservation, so a late settlement still bills (an
   * older relay also left its settled marker 'S' here).
   */
  reapedReservation(userId: number, requestId: string): string;
  /**
   * With replicas, an account's settled reservations, kept for minutes (settleReservations-9n.lua), so
   * a failover's lost reservation is told from a settled one. One sorted set, not a key per request:
   * a reshard moves a slot key by key.
   */
  settledReservations(userId: number): string;
  /** Written by a relay before WAIT on its shard's master: WAIT counts replicas that have this write and all before it. */
  replicationProbe(shard?: number): string;
  /** Set once a console change (ledger id) has moved the account's mirror: retries apply it once. */
  adjustmentApplied(userId: number, ledgerId: number): string;
  /** users.credit_seq the account mirror was seeded with: console changes up to it are in the mirror. */
  accountCreditSeq(userId: number): string;
  /** tokens.quota_seq a limited key's mirror was seeded with (accountCreditSeq for a key). */
  tokenQuotaSeq(userId: number, tokenId: number): string;
  /** Set once a key's remain_quota edit (key_quota_edits id) has moved the key's mirror. */
  keyQuotaEditApplied(userId: number, editId: number): string;
  /**
   * Set once the billing worker moved a limited key's mirror by debits that a Redis restart took out
   * of it (billing/mirror-repair.ts; ledger id: the first of those debits), as adjustmentApplied is for the account.
   */
  keyDebitApplied(userId: number, tokenId: number, ledgerId: number): string;
  /**
   * A random id of this Redis's data, created (SET NX) by the billing worker when missing: it vanishes
   * with the data, so a new id tells the worker that the mirrors its batch debited were lost.
   * On the shard's node, with the shard's stream.
   */
  redisIncarnation(shard?: number): string;
  /** Open reservations of a shard by deadline (sorted set: score Unix ms, member `<userId>:<requestId>`). */
  reservationDeadlines(shard?: number): string;
  /**
   * Requests of one API key in the last minute, a sliding window (hash: 10-second bucket number ->
   * requests; reserveQuota-8.lua).
   */
  keyRequestsInWindow(userId: number, tokenId: number): string;
  /**
   * Tokens (input + output) of one API key in the last minute, a sliding window like
   * keyRequestsInWindow's; a request's are counted in the bucket of its start.
   */
  keyTokensInWindow(userId: number, tokenId: number): string;
  /**
   * Requests of one account in one group in the last minute, all its keys of the group together: the
   * group's limit (GroupRateLimits) is the account's. A sliding window like keyRequestsInWindow's.
   */
  accountRequestsInGroupWindow(userId: number, group: string): string;
  /** Tokens of one account in one group in the last minute (keyTokensInWindow's terms, the group's limit). */
  accountTokensInGroupWindow(userId: number, group: string): string;
  /** Token counts (count_tokens calls and prompt counts) of one API key in one wall-clock minute. */
  keyCountsInMinute(userId: number, tokenId: number, minute: number): string;
  /**
   * API-key writes (create, update, delete: console-api/routes/token.ts) of one account in one
   * wall-clock minute of the console's clock. In the account's slot, next to what those writes grow.
   */
  apiKeyWritesInMinute(userId: number, minute: number): string;
  /** The usage events stream of a shard, which the billing workers consume. */
  usageStream(shard?: number): string;
  /** Entries of a shard's usage stream the billing worker could not decode, set aside with their source id. */
  usageDeadLetterStream(shard?: number): string;
  /** Which billing worker consumes a shard's stream now (a lease: value the worker's name, with a TTL). */
  billingShardLease(shard: number): string;
  /** Billing workers alive (hash: worker name -> Unix ms its registration runs out), to share the shards. */
  billingWorkers(): string;
  /** Console login attempts naming one account (hashed) from one address, in the current window. */
  loginAttempts(who: string, ip: string): string;
  /** Console login attempts from one address, whatever account they name, in the current window. */
  loginAttemptsFromAddress(ip: string): string;
  /** Console registrations from one address, in the current window. */
  registrationsFromAddress(ip: string): string;
  /** Console OpenID Connect sign-on starts (GET /api/oauth/oidc/start) from one address, in the current window. */
  oidcStartsFromAddress(ip: string): string;
  /** Access tokens issued to one account (GET /api/user/token) in the current window. In the account's slot. */
  accessTokenIssues(userId: number): string;
  /**
   * Names the node whose clock every relay and billing worker reads (core/quota/redis-clock.ts,
   * readClock-1.lua): never written. A fixed hash tag, so on a Redis Cluster all ask the same node.
   */
  clock(): string;
  /**
   * The id of the Postgres database (database_instance) whose accounts this Redis's mirrors, streams
   * and reservations belong to, set once (SET NX) by the first service to start on it
   * (core/quota/database-binding.ts). A fixed hash tag: one key for the whole Redis or cluster.
   */
  databaseInstance(): string;
  /** Pub/sub channel on which the console announces changed keys, accounts, channels and options. */
  invalidationChannel(): string;
  /** A channel's recent faults (sorted set: score Unix ms), since its last success or status change. */
  channelFaults(channelId: number): string;
  /** A channel's attempts and faults per time bucket of the fault-rate window (a hash). */
  channelOutcomes(channelId: number): string;
}

export function redisKeys(prefix: string, shards = 0): RedisKeys {
  if (!Number.isInteger(shards) || shards < 0) throw new Error(`shards must be a whole number >= 0, got ${shards}`);
  if (shards === 0) return unshardedKeys(prefix);
  // A per-account key: the shard's tag first (the slot), then the account.
  const a = (userId: number) => `${prefix}:{s${userId % shards}}:a${userId}`;
  return {
    shards,
    streamShards: shards,
    shardOf: (userId) => userId % shards,
    accountBalance: (userId) => `${a(userId)}:balance`,
    tokenRemain: (userId, tokenId) => `${a(userId)}:token:${tokenId}:remain`,
    reservation: (userId, requestId) => `${a(userId)}:rsv:${requestId}`,
    reapedReservation: (userId, requestId) => `${a(userId)}:reaped:${requestId}`,
    settledReservations: (userId) => `${a(userId)}:settled`,
    reservationDeadlines: (shard = 0) => `${prefix}:{s${shard}}:rsv-deadlines`,
    replicationProbe: (shard = 0) => `${prefix}:{s${shard}}:repl-probe`,
    adjustmentApplied: (userId, ledgerId) => `${a(userId)}:adj:${ledgerId}`,
    accountCreditSeq: (userId) => `${a(userId)}:balance-seq`,
    tokenQuotaSeq: (userId, tokenId) => `${a(userId)}:token:${tokenId}:remain-seq`,
    keyQuotaEditApplied: (userId, editId) => `${a(userId)}:key-adj:${editId}`,
    keyDebitApplied: (userId, tokenId, ledgerId) => `${a(userId)}:token:${tokenId}:debit-adj:${ledgerId}`,
    redisIncarnation: (shard = 0) => `${prefix}:{s${shard}}:incarnation`,
    keyRequestsInWindow: (userId, tokenId) => `${a(userId)}:rl:${tokenId}:rpm-window`,
    keyTokensInWindow: (userId, tokenId) => `${a(userId)}:rl:${tokenId}:tpm-window`,
    accountRequestsInGroupWindow: (userId, group) => `${a(userId)}:rl:group:${group}:rpm-window`,
    accountTokensInGroupWindow: (userId, group) => `${a(userId)}:rl:group:${group}:tpm-window`,
    keyCountsInMinute: (userId, tokenId, minute) => `${a(userId)}:rl:${tokenId}:count:${minute}`,
    apiKeyWritesInMinute: (userId, minute) => `${a(userId)}:console:key-writes:${minute}`,
    accessTokenIssues: (userId) => `${a(userId)}:console:access-token-issues`,
    usageStream: (shard = 0) => `${prefix}:{s${shard}}:usage`,
    usageDeadLetterStream: (shard = 0) => `${prefix}:{s${shard}}:usage:dead`,
    billingShardLease: (shard) => `${prefix}:{s${shard}}:billing-lease`,
    billingWorkers: () => `${prefix}:billing-workers`,
    ...consoleKeys(prefix),
  };
}

function consoleKeys(prefix: string): Pick<RedisKeys, 'clock' | 'databaseInstance' | 'loginAttempts' | 'loginAttemptsFromAddress' | 'registrationsFromAddress' | 'oidcStartsFromAddress' | 'invalidationChannel' | 'channelFaults' | 'channelOutcomes'> {
  return {
    clock: () => `${prefix}:{clock}:clock`,
    databaseInstance: () => `${prefix}:{db}:database-instance`,
    // The address is the hash tag: one MULTI counts an attempt on both login keys of an address, and
    // Redis Cluster only runs a transaction whose keys share a slot.
    loginAttempts: (who, ip) => `${prefix}:console:{ip:${ip}}:login:${who}`,
    loginAttemptsFromAddress: (ip) => `${prefix}:console:{ip:${ip}}:login`,
    registrationsFromAddress: (ip) => `${prefix}:console:{ip:${ip}}:register`,
    oidcStartsFromAddress: (ip) => `${prefix}:console:{ip:${ip}}:oidc-start`,
    // Published with PUBLISH, which a cluster delivers to the subscribers of every node.
    invalidationChannel: () => `${prefix}:invalidate`,
    // One hash tag per channel: recordChannelOutcome-2.lua writes both of a channel's keys at once.
    channelFaults: (channelId) => `${prefix}:{ch${channelId}}:faults`,
    channelOutcomes: (channelId) => `${prefix}:{ch${channelId}}:outcomes`,
  };
}

function unshardedKeys(prefix: string): RedisKeys {
  return {
    shards: 0,
    streamShards: 1,
    shardOf: () => 0,
    accountBalance: (userId) => `${prefix}:{a${userId}}:balance`,
    tokenRemain: (userId, tokenId) => `${prefix}:{a${userId}}:token:${tokenId}:remain`,
    reservation: (userId, requestId) => `${prefix}:{a${userId}}:rsv:${requestId}`,
    reapedReservation: (userId, requestId) => `${prefix}:{a${userId}}:reaped:${requestId}`,
    settledReservations: (userId) => `${prefix}:{a${userId}}:settled`,
    reservationDeadlines: () => `${prefix}:rsv-deadlines`,
    replicationProbe: () => `${prefix}:repl-probe`,
    adjustmentApplied: (userId, ledgerId) => `${prefix}:{a${userId}}:adj:${ledgerId}`,
    accountCreditSeq: (userId) => `${prefix}:{a${userId}}:balance-seq`,
    tokenQuotaSeq: (userId, tokenId) => `${prefix}:{a${userId}}:token:${tokenId}:remain-seq`,
    keyQuotaEditApplied: (userId, editId) => `${prefix}:{a${userId}}:key-adj:${editId}`,
    keyDebitApplied: (userId, tokenId, ledgerId) => `${prefix}:{a${userId}}:token:${tokenId}:debit-adj:${ledgerId}`,
    redisIncarnation: () => `${prefix}:incarnation`,
    keyRequestsInWindow: (userId, tokenId) => `${prefix}:{a${userId}}:rl:${tokenId}:rpm-window`,
    keyTokensInWindow: (userId, tokenId) => `${prefix}:{a${userId}}:rl:${tokenId}:tpm-window`,
    accountRequestsInGroupWindow: (userId, group) => `${prefix}:{a${userId}}:rl:group:${group}:rpm-window`,
    accountTokensInGroupWindow: (userId, group) => `${prefix}:{a${userId}}:rl:group:${group}:tpm-window`,
    keyCountsInMinute: (userId, tokenId, minute) => `${prefix}:{a${userId}}:rl:${tokenId}:count:${minute}`,
    apiKeyWritesInMinute: (userId, minute) => `${prefix}:{a${userId}}:console:key-writes:${minute}`,
    accessTokenIssues: (userId) => `${prefix}:{a${userId}}:console:access-token-issues`,
    usageStream: () => `${prefix}:usage`,
    usageDeadLetterStream: () => `${prefix}:usage:dead`,
    billingShardLease: () => `${prefix}:billing-lease`,
    billingWorkers: () => `${prefix}:billing-workers`,
    ...consoleKeys(prefix),
  };
}
