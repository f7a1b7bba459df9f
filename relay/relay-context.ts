// What every relay route is handed: the process's clients, caches and settings, built once by
// server.ts. The free endpoints take the part they need (FreeEndpointContext, CountTokensContext).
import type { Logger } from '../infra/logger.js';
import type { LogThrottle } from '../infra/log-throttle.js';
import type { GroupPolicy } from '../core/groups/group-policy.js';
import type { Ratios } from '../core/pricing/ratios.js';
import type { InputBounds } from '../core/pricing/input-bound.js';
import type { QuotaStore } from '../core/quota/quota-store.js';
import type { ClientAddressResolver } from './auth/client-address.js';
import type { KeyDirectory } from './auth/key-directory.js';
import type { ChannelRegistry } from './routing/channel-registry.js';
import type { ChannelHealth } from './routing/channel-health.js';
import type { TokenCounter } from './token-count/token-counter.js';
import type { UpstreamPools } from './upstream/upstream-pools.js';
import type { ReservationHeartbeat } from './messages/reservation-heartbeat.js';
import type { SettlementSpool } from './messages/settlement-spool.js';

export interface RelayContext {
  log: Logger;
  /** The lines a provider's fault repeats per request, held back past one per kind and channel an interval. */
  repeatedLog: LogThrottle;
  keys: KeyDirectory;
  channels: ChannelRegistry;
  /** Per-channel fault counting and automatic disabling (routing/channel-health.ts). */
  health?: ChannelHealth;
  quota: QuotaStore;
  /**
   * Whether the quota store's Redis connection is up and known to hold this database's accounts
   * (core/quota/database-binding.ts): a request is refused at once (529) when not.
   */
  quotaReady(): boolean;
  /** Whether the quota store's Redis holds another database's accounts (the refusal then says so). */
  quotaForeign(): boolean;
  /**
   * The quota store client's connection number, which its reconnect changes (RedisBindingWatch.connection):
   * a reservation out across one may have reached another server. A cluster node's connection alone
   * does not change it (a graceful failover closes those while the client serves on: slot-move test).
   */
  quotaConnection(): number;
  /**
   * The quota store's connections dropped so far, any node's of a cluster (ConnectionDrops.count): a
   * settlement out across one may have run twice, so its "no reservation" is never taken for a lost one.
   */
  quotaConnectionDrops(): number;
  /** A settlement that finds no reservation may be sent again as lost (no settled markers; settlement.ts). */
  billsLostReservations: boolean;
  pools: UpstreamPools;
  ratios(): Ratios;
  /** What bounds a reservation's input when the bytes do not: context windows, server-tool fees. */
  inputBounds(): InputBounds;
  groups(): GroupPolicy;
  clientAddress: ClientAddressResolver;
  maxBodyBytes: number;
  maxTries: number;
  /** Wait for a streaming answer's headers (they come before the generation). */
  streamHeadersTimeoutMs: number;
  /** Wait for a non-streaming answer's headers (they come after the whole generation). */
  messageHeadersTimeoutMs: number;
  reservationTtlMs: number;
  /** Renews the deadlines of the reservations this relay holds, so the reaper leaves them alone. */
  heartbeat: ReservationHeartbeat;
  /** Settlements on disk until Redis took them (settlement-spool.ts). */
  spool?: SettlementSpool;
  tokens: TokenCounter;
  /**
   * Bodies larger than this whose byte-bound reservation the balance refuses are token-counted and
   * reserved again with the counted estimate; smaller ones reserve their byte length only.
   */
  countPromptAboveBytes: number;
  /** Token counts (count_tokens calls, prompt counts) per key per minute. */
  countsPerMinute: number;
  /** Prompt counts one account may have queued or running at once (COUNT_TOKENS_IN_FLIGHT_PER_ACCOUNT). */
  countsInFlightPerAccount: number;
  /** Reserved input tokens = min(body bytes, counted × this + 16). */
  tokenEstimateFactor: number;
  /** Batch size of delivered-text counting. */
  deliveredFlushBytes: number;
}
