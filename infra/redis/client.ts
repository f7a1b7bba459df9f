import { Cluster, Redis } from 'ioredis';
import { CONFIG_ERROR_EXIT_CODE, ConfigError, type Config } from '../config.js';
import { redisKeys, type RedisKeys } from './keys.js';

/** Seed nodes of a Redis Cluster, or null for a single Redis (REDIS_CLUSTER_NODES, redis+cluster:// URL). */
export function redisClusterNodes(config: Pick<Config, 'REDIS_URL' | 'REDIS_CLUSTER_NODES'>): { host: string; port: number }[] | null {
  let list = config.REDIS_CLUSTER_NODES?.trim();
  if (!list && config.REDIS_URL.startsWith('redis+cluster://')) list = config.REDIS_URL.slice('redis+cluster://'.length).replace(/\/.*$/, '');
  if (!list) return null;
  return list.split(',').map((s) => s.trim()).filter(Boolean).map((hostPort) => {
    const m = /^(.+):(\d+)$/.exec(hostPort);
    if (!m) throw new Error(`Redis Cluster node "${hostPort}" is not host:port`);
    return { host: m[1]!, port: Number(m[2]) };
  });
}

/** Virtual shards of the key layout (infra/redis/keys.ts): REDIS_SHARDS, else 64 on a cluster and 0 on one Redis. */
export function redisShardCount(config: Pick<Config, 'REDIS_URL' | 'REDIS_CLUSTER_NODES' | 'REDIS_SHARDS'>): number {
  const cluster = redisClusterNodes(config) !== null;
  const shards = config.REDIS_SHARDS ?? (cluster ? 64 : 0);
  if (cluster && shards === 0) throw new Error('REDIS_SHARDS=0 (the unsharded layout) cannot run on a Redis Cluster: its scripts would touch several slots');
  return shards;
}

/** Replicas a settlement must reach before a relay's spool lets it go: REDIS_SETTLE_WAIT_REPLICAS, else 1 on a cluster, 0 on one Redis. */
export function settleWaitReplicas(config: Pick<Config, 'REDIS_URL' | 'REDIS_CLUSTER_NODES' | 'REDIS_SETTLE_WAIT_REPLICAS'>): number {
  return config.REDIS_SETTLE_WAIT_REPLICAS ?? (redisClusterNodes(config) !== null ? 1 : 0);
}

/**
 * `blocking` connections carry XREADGROUP BLOCK and SUBSCRIBE: they must not share auto-pipelined
 * batches with ordinary commands. `commandTimeoutMs`: a command unanswered this long fails (the relay's
 * hot path must not wait on a stalled Redis); unset, a command waits as long as its connection lives.
 *
 * On a cluster the client is an ioredis Cluster, typed as Redis: it has the same command methods, routes
 * each command by its key's slot, follows MOVED/ASK and a failover (a replica promoted), and runs a
 * script by EVALSHA on the key's master, sending it once with EVAL where that master lacks it
 * (core/quota/scripts.ts also loads them on every master up front). Multi-key commands, scripts and
 * MULTI must name keys of one slot, which the sharded key layout guarantees.
 */
export function createRedis(config: Config, name: string, opts: { blocking?: boolean; commandTimeoutMs?: number } = {}): Redis {
  const redisOptions = {
    connectionName: name,
    maxRetriesPerRequest: opts.blocking ? null : 2,
    ...(opts.commandTimeoutMs !== undefined ? { commandTimeout: opts.commandTimeoutMs } : {}),
  };
  const nodes = redisClusterNodes(config);
  if (nodes === null) {
    const client = new Redis(config.REDIS_URL, { ...redisOptions, enableAutoPipelining: !opts.blocking });
    return quietOnConnectionErrors(stopOnRefusedDatabase(client, config.REDIS_URL));
  }
  const cluster = new Cluster(nodes, {
    redisOptions,
    // Auto-pipelining groups commands per node, so it stays on for ordinary connections.
    enableAutoPipelining: !opts.blocking,
    // A failover takes a few seconds (cluster-node-timeout, then the replica's election): commands
    // wait for the new master rather than fail at once.
    retryDelayOnFailover: 200,
    retryDelayOnClusterDown: 300,
    retryDelayOnTryAgain: 100,
    maxRedirections: 32,
    slotsRefreshTimeout: 2000,
    // An auto-pipelined batch to one node is redirected only when all its errors are one message, and
    // a MOVED names its slot: after a graceful slot move (CLUSTER FAILOVER, a reshard) a batch that
    // spans several shards of that node gets several MOVEDs, no redirect and no refresh of the slot
    // table, and fails the same way for as long as no command goes to that node alone. The periodic
    // refresh bounds that to about a second.
    slotsRefreshInterval: 1000,
  });
  return quietOnConnectionErrors(cluster) as unknown as Redis;
}
export type { Redis };

/**
 * A database the server does not have (REDIS_URL's /99 on a server of 16): ioredis reports the failed
 * SELECT as an 'error' event and goes on to serve the connection on database 0, another stack's keys.
 * The connection is closed at once, before the handshake ends, so no command runs there (those queued
 * fail "Connection is closed"); the process then fails uncaught, which each service's process guards
 * log as fatal and exit 1 on: a wrong database is no fault a running process can wait out.
 */
let databaseRefused = false;

/**
 * The exit code of a process whose start failed: CONFIG_ERROR_EXIT_CODE (78) when a Redis server
 * refused REDIS_URL's database (the start then fails on a closed connection, before the process
 * guards' own exit with 78), else 1. Started again, the first would only fail the same way.
 */
export function startFailureExitCode(): number {
  return databaseRefused ? CONFIG_ERROR_EXIT_CODE : 1;
}

function stopOnRefusedDatabase(client: Redis, url: string): Redis {
  client.on('error', (err: Error & { command?: { name?: string; args?: unknown[] } }) => {
    if (err.command?.name !== 'select') return;
    client.disconnect();
    // Every connection of the process meets it: one report is enough.
    if (databaseRefused) return;
    databaseRefused = true;
    const db = String(err.command.args?.[0] ?? '');
    const refused = new ConfigError([{ name: 'REDIS_URL', problem: `the Redis server refused database ${db} (${err.message}); expected a database it has (16 by default: 0 to 15)`, value: url }]);
    process.nextTick(() => {
      throw refused;
    });
  });
  return client;
}

/**
 * A listener for the client's 'error' events: a connection reset or refused (CLIENT KILL, a restart,
 * a failover) is emitted there while ioredis reconnects by itself. With no listener, ioredis writes
 * each one to stderr as "[ioredis] Unhandled error event", plain text among the services' JSON log
 * lines. What such an error costs is reported where it is felt: the commands it fails reject, and
 * each service answers or logs that (529 quota_store_unavailable, the billing worker's /health).
 */
function quietOnConnectionErrors<T extends { on(event: 'error', listener: (err: Error) => void): unknown }>(client: T): T {
  client.on('error', () => {});
  return client;
}

/**
 * A MULTI's replies, thrown on when it was aborted or when any of its commands failed: ioredis
 * answers each command's error in place, which a caller reading only the values would miss.
 */
export async function execOrThrow(multi: ReturnType<Redis['multi']>, what: string): Promise<[Error | null, unknown][]> {
  const replies = await multi.exec();
  if (!replies) throw new Error(`${what}: transaction aborted`);
  for (const [err] of replies) if (err) throw err;
  return replies;
}

/** A MOVED reply: the node did not run the command, so sending it again is safe. */
export function isMoved(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('MOVED ');
}

/** Reloads a cluster client's slot table (CLUSTER SLOTS); nothing on a single Redis. */
export function refreshSlots(redis: Redis): Promise<void> {
  if (!redis.isCluster) return Promise.resolve();
  return new Promise((resolve, reject) => {
    (redis as unknown as Cluster).refreshSlotsCache((err) => (err ? reject(err) : resolve()));
  });
}

/** What of an ioredis Cluster a MOVED's own answer updates: its slot table (a public field of its class). */
interface SlotTable { slots: string[][] }

/**
 * Reloads the slot table, then points the MOVED's slot at the node the MOVED names. The reload alone
 * is not enough: it asks one node picked at random, and a node that has not yet heard of a promotion
 * (gossip takes a few milliseconds) answers the old table, so the call sent again would be MOVED
 * again. The node that answered MOVED knows the slot's owner, as the Redis Cluster specification
 * has clients use it; ioredis does the same for a command sent alone, but not for an auto-pipelined
 * batch whose commands were MOVED to several slots (createRedis above).
 */
export async function followMoved(redis: Redis, moved: unknown): Promise<void> {
  await refreshSlots(redis);
  pointSlotAsMoved(redis, moved);
}

/** The slot table's entry for a MOVED's slot set to the node it names (see followMoved). */
export function pointSlotAsMoved(redis: Redis, moved: unknown): void {
  if (!redis.isCluster || !isMoved(moved)) return;
  const [, slotText, node] = (moved as Error).message.split(' ');
  const slot = Number(slotText);
  // Only a well-formed answer is applied (a slot number indexes an array: never "__proto__").
  if (!Number.isInteger(slot) || slot < 0 || slot >= 16384 || node === undefined || !/^\S+:\d+$/.test(node)) return;
  const table = redis as unknown as SlotTable;
  if (!Array.isArray(table.slots) || table.slots[slot]?.[0] === node) return;
  // Only the node a command of this slot goes to. Not its group (`_groupsBySlot`, which ioredis's own
  // MOVED handlers set too): an auto-pipelined batch already queued holds commands of this slot and of
  // others that were one group with it, and a batch whose slots' groups differ is refused whole ("All
  // keys in the pipeline should belong to the same slots allocation group": 4 store calls in 2 of 6
  // runs of tests/cluster/slot-move.integration.test.ts). The next reload sets the groups again.
  table.slots[slot] = [node];
}

/** Sends again after a MOVED: one more time than a slot moving twice in a row needs. */
const MOVED_RESENDS = 3;

/**
 * A slot being moved (a reshard: MIGRATING on its node, IMPORTING on the next) answers a script whose
 * keys are not all on one side TRYAGAIN, and one whose keys have all left ASK: the node ran nothing.
 * The call is sent again after TRYAGAIN_DELAY_MS, for at most TRYAGAIN_RESENDS times (about a second
 * in all), by when a slot of ordinary size has moved; ioredis's own retryDelayOnTryAgain does not
 * apply to a command of an auto-pipelined batch, and an ASK it follows only for a command sent alone.
 */
export const TRYAGAIN_DELAY_MS = 100;
const TRYAGAIN_RESENDS = 10;

/** TRYAGAIN or ASK: the slot is being moved and the node did not run the command. */
export function isSlotMoving(err: unknown): boolean {
  return err instanceof Error && (err.message.startsWith('TRYAGAIN') || err.message.startsWith('ASK '));
}

/**
 * ioredis's refusal of an auto-pipelined batch whose slots' groups no longer match (a slot pointed at
 * its new node by a MOVED, pointSlotAsMoved, before the next reload set the groups again): raised
 * before anything is sent, so nothing ran. Answered 529 at once during a reshard (review reshard).
 */
export function isSlotGroupSplit(err: unknown): boolean {
  return err instanceof Error && err.message.includes('should belong to the same slots allocation group');
}

/**
 * `f` sent again after `err`: after each MOVED, up to MOVED_RESENDS times, once the slot table follows
 * it (followMoved), or after a batch refused for its slots' groups (isSlotGroupSplit), once the table is
 * reloaded; after each TRYAGAIN or ASK (a slot being moved), up to TRYAGAIN_RESENDS times,
 * TRYAGAIN_DELAY_MS later. `err` itself when it is neither or this is not a cluster. `f` runs again
 * whole, so it must be safe to run twice (one command, or idempotent ones): a node that answers these
 * ran nothing.
 */
export async function resendAfterMoved<T>(redis: Redis, err: unknown, f: () => Promise<T>): Promise<T> {
  let moves = 0;
  let waits = 0;
  while (redis.isCluster) {
    if (isMoved(err) && moves < MOVED_RESENDS) {
      moves++;
      await followMoved(redis, err);
    } else if (isSlotGroupSplit(err) && moves < MOVED_RESENDS) {
      // A reload sets the slots' groups again.
      moves++;
      await refreshSlots(redis);
    } else if (isSlotMoving(err) && waits < TRYAGAIN_RESENDS) {
      waits++;
      await new Promise((r) => setTimeout(r, TRYAGAIN_DELAY_MS));
    } else break;
    try {
      return await f();
    } catch (again) {
      err = again;
    }
  }
  throw err;
}

/**
 * Runs `f`, and again while it fails with MOVED (resendAfterMoved; see slotsRefreshInterval above: a
 * batch of commands can be MOVED without ioredis following it).
 */
export async function retryOnMoved<T>(redis: Redis, f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    return resendAfterMoved(redis, err, f);
  }
}

/**
 * `f` itself on a single Redis; on a cluster, `f` sent again through retryOnMoved when answered MOVED
 * (for a script or command that is safe to send twice: a MOVED one did not run).
 */
export function resendingMoved<A extends unknown[], T>(redis: Redis, f: (...args: A) => Promise<T>): (...args: A) => Promise<T> {
  return redis.isCluster ? (...args: A) => retryOnMoved(redis, () => f(...args)) : f;
}

/** The key layout of this configuration: REDIS_PREFIX with its shard count (redisShardCount). */
export function redisKeysFor(config: Config): RedisKeys {
  return redisKeys(config.REDIS_PREFIX, redisShardCount(config));
}

/**
 * Deletes every key starting with `prefix:` (a test stack's or the bench's own), on each master of a
 * cluster (KEYS answers for one node only) or on the single Redis; one key per DEL, as a cluster needs.
 */
export async function deleteKeysWithPrefix(redis: Redis, prefix: string): Promise<void> {
  const nodes = redis.isCluster ? (redis as unknown as Cluster).nodes('master') : [redis];
  for (const node of nodes) {
    const left = await node.keys(`${prefix}:*`);
    if (!redis.isCluster) {
      if (left.length) await node.del(...left);
      continue;
    }
    await Promise.all(left.map((k) => redis.del(k)));
  }
}
