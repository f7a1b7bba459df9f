// Confirms that settlements Redis answered have reached its replicas (docs/scaling.md, "Failover").
// Replication is asynchronous: a settlement a master took and died with before its replica had it is
// gone, and a spool that had already let it go cannot replay it. So with replicas the spool lets a
// settlement go only once this says the replicas have it.
//
// WAIT counts the replicas that acknowledged the last write of the connection it is sent on, so each
// check writes a probe key in the shard's slot (infra/redis/keys.ts replicationProbe) and sends WAIT
// right behind it, both in one pipeline: on a cluster a pipeline goes to the node of its key's slot,
// WAIT included. A replica applies the stream in order, so one that has the probe has every settlement
// the master took before it. One check per shard per batch (the settlements that finished while the
// previous check was waiting), never one per request; on a connection of its own, because WAIT holds
// its connection until the replicas answer or the timeout passes.
//
// WAIT answers for the node the slot is on now, which need not be the one that took the settlements:
// a master that died before its replicas had them is replaced by one of them, and that one, with a
// replica of its own (two replicas per master, or replica migration), acknowledges the probe though
// it never had the settlements. So the same pipeline also reads each settlement's marker (its
// account's set of settled reservations, settleReservations-9n.lua, written with replicas only): one
// missing on the node that answered WAIT is not confirmed, and its replay settles it there (a lost
// reservation's settlement bills once).
//
// A shard whose replicas confirm nothing for `giveUpMs` (its replica is down or gone: a replica that
// comes back resyncs everything its master has) has its settlements confirmed on its master alone,
// with a warning a minute and gateway_relay_settlements_unreplicated_total. Held until the replica
// returned, they grew the spool's memory without bound (a probe: 9,216 in 35 s on one relay; some
// 1.5 KB each), and every replay sent each of them to Redis again. What the wait still guards against
// past that point is the master dying before its replica is back, which no failover can then save
// (nothing is left to promote but a replica without those writes): the master's AOF keeps them.
import type { Redis } from 'ioredis';
import type { Logger } from '../../infra/logger.js';
import { followMoved, isMoved } from '../../infra/redis/client.js';
import type { RedisKeys } from '../../infra/redis/keys.js';
import { deadlineMember, type SettleRequest } from '../../core/quota/quota-store.js';

/** Returns the settlements of `batch` whose shard's replicas have them; the rest are replayed later. */
export type ReplicationCheck = (batch: readonly SettleRequest[]) => Promise<SettleRequest[]>;

/** Beyond WAIT's own timeout, what a check may take before its settlements count as unconfirmed. */
const CHECK_SLACK_MS = 1000;

/**
 * How long after its `minute` a settlement may still be taken for a lost reservation's: the marker's
 * life (SETTLED_MARKER_SEC, relay/server.ts) less LOST_RESERVATION_MARGIN_SEC (core/quota/quota-store.ts).
 */
const LOST_WINDOW_MS = (600 - 60) * 1000;

export interface ReplicationCheckOptions {
  /** LOST_WINDOW_MS unless given: a relay with another marker life passes its own. */
  lostWindowMs?: number;
  /** A shard whose replicas confirmed nothing for this long is confirmed on its master alone; 0: never (REDIS_SETTLE_WAIT_GIVE_UP_MS). */
  giveUpMs?: number;
  /** Called with the number of settlements confirmed on a master alone. */
  onUnreplicated?: (count: number) => void;
}

/** How often the warning about a shard confirmed on its master alone is repeated. */
const UNREPLICATED_WARN_MS = 60_000;

/**
 * A settlement whose replay could bill a lost reservation, and whose marker must therefore be found.
 * The others leave none when their reservation is already gone (a request reserved from a credit
 * slice, which has no marker; one spooled by an older relay, without minute or limited; one past the
 * window, which its script no longer takes for lost), and a replay would change nothing: a missing
 * marker would keep them in the spool for good.
 */
function needsMarker(s: SettleRequest, nowMs: number, lostWindowMs: number): boolean {
  return s.slice === undefined && s.limited !== undefined && s.minute !== undefined && nowMs < s.minute * 60_000 + lostWindowMs;
}

/** The settlements of `group` whose marker must be found, by account (one set of markers each). */
function markedByAccount(group: readonly SettleRequest[], nowMs: number, lostWindowMs: number): Map<number, SettleRequest[]> {
  const byAccount = new Map<number, SettleRequest[]>();
  for (const s of group) {
    if (!needsMarker(s, nowMs, lostWindowMs)) continue;
    const list = byAccount.get(s.userId);
    if (list === undefined) byAccount.set(s.userId, [s]);
    else list.push(s);
  }
  return byAccount;
}

export function replicationCheck(
  redis: Redis, keys: RedisKeys, replicas: number, timeoutMs: number, log: Logger, opts: ReplicationCheckOptions = {},
): ReplicationCheck {
  const lostWindowMs = opts.lostWindowMs ?? LOST_WINDOW_MS;
  const giveUpMs = opts.giveUpMs ?? 0;
  /** Per shard: when its replicas last confirmed (or when it was first checked). */
  const replicatedAt = new Map<number, number>();
  const warnedAt = new Map<number, number>();
  return async (batch) => {
    const byShard = new Map<number, SettleRequest[]>();
    for (const s of batch) {
      const shard = keys.shardOf(s.userId);
      let group = byShard.get(shard);
      if (group === undefined) byShard.set(shard, group = []);
      group.push(s);
    }
    const confirmed: SettleRequest[] = [];
    await Promise.all([...byShard].map(async ([shard, group]) => {
      let timer: NodeJS.Timeout | undefined;
      try {
        const nowMs = Date.now();
        const marked = markedByAccount(group, nowMs, lostWindowMs);
        const pipeline = redis.pipeline().incr(keys.replicationProbe(shard));
        // The markers are in the shard's slot (keys.ts), so they go to the node that answers WAIT.
        for (const [userId, settlements] of marked) {
          pipeline.zmscore(keys.settledReservations(userId), ...settlements.map((s) => deadlineMember(s.userId, s.requestId)));
        }
        pipeline.call('WAIT', replicas, timeoutMs);
        // Bounded: a check sent to a master that just died would otherwise wait for the cluster to
        // reroute it, holding up the checks of every shard behind it.
        const results = await Promise.race([
          pipeline.exec(),
          new Promise<null>((resolve) => { timer = setTimeout(() => resolve(null), timeoutMs + CHECK_SLACK_MS); }),
        ]);
        const acked = results?.[results.length - 1];
        const markers = results?.slice(1, 1 + marked.size) ?? [];
        const answered = acked !== undefined && !acked[0] && !results![0]![0] && markers.every(([err]) => !err);
        const enough = answered && Number(acked[1]) >= replicas;
        if (enough || !replicatedAt.has(shard)) replicatedAt.set(shard, nowMs);
        const givenUp = answered && !enough && giveUpMs > 0 && nowMs - replicatedAt.get(shard)! >= giveUpMs;
        if (enough || givenUp) {
          const missing = new Set<SettleRequest>();
          let at = 0;
          for (const settlements of marked.values()) {
            const scores = markers[at++]![1] as (string | null)[];
            settlements.forEach((s, i) => { if (scores[i] === null || scores[i] === undefined) missing.add(s); });
          }
          const before = confirmed.length;
          for (const s of group) if (!missing.has(s)) confirmed.push(s);
          if (givenUp) {
            opts.onUnreplicated?.(confirmed.length - before);
            if (nowMs - (warnedAt.get(shard) ?? -Infinity) >= UNREPLICATED_WARN_MS) {
              warnedAt.set(shard, nowMs);
              log.warn({ shard, unreplicatedForMs: nowMs - replicatedAt.get(shard)!, acked: Number(acked[1]) },
                'no replica has confirmed this shard\'s settlements for REDIS_SETTLE_WAIT_GIVE_UP_MS: confirmed on its master alone until one does');
            }
          }
          if (missing.size > 0) log.warn({ shard, missing: missing.size }, 'settled markers missing on the node that answered WAIT (a failover lost them): kept for replay');
        } else {
          // A pipeline whose WAIT answered is not rerouted by ioredis when its write was MOVED (a
          // failover): the slot table follows the MOVED for the next check.
          if (isMoved(results?.[0]?.[0])) followMoved(redis, results![0]![0]).catch(() => undefined);
          log.debug({ shard, answer: results === null ? 'timed out' : results?.map(([err, v]) => err ? err.message : v) }, 'settlements not confirmed by a replica');
        }
      } catch (err) {
        // The shard's master is failing over: its settlements are replayed once a master answers.
        log.warn({ shard, err: (err as Error).message }, 'settlement replication check failed');
      } finally {
        clearTimeout(timer);
      }
    }));
    return confirmed;
  };
}
