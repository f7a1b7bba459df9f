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
import type { Cluster, Redis } from 'ioredis';
import type { Logger } from '../../infra/logger.js';
import type { RedisKeys } from '../../infra/redis/keys.js';
import type { SettleRequest } from '../../core/quota/quota-store.js';

/** Returns the settlements of `batch` whose shard's replicas have them; the rest are replayed later. */
export type ReplicationCheck = (batch: readonly SettleRequest[]) => Promise<SettleRequest[]>;

/** Beyond WAIT's own timeout, what a check may take before its settlements count as unconfirmed. */
const CHECK_SLACK_MS = 1000;

export function replicationCheck(redis: Redis, keys: RedisKeys, replicas: number, timeoutMs: number, log: Logger): ReplicationCheck {
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
        // Bounded: a check sent to a master that just died would otherwise wait for the cluster to
        // reroute it, holding up the checks of every shard behind it.
        const results = await Promise.race([
          redis.pipeline().incr(keys.replicationProbe(shard)).call('WAIT', replicas, timeoutMs).exec(),
          new Promise<null>((resolve) => { timer = setTimeout(() => resolve(null), timeoutMs + CHECK_SLACK_MS); }),
        ]);
        const acked = results?.[1];
        if (acked && !acked[0] && Number(acked[1]) >= replicas && !results![0]![0]) confirmed.push(...group);
        else {
          // A pipeline whose WAIT answered is not rerouted by ioredis when its write was MOVED (a
          // failover): the slot table is refreshed for the next check.
          if (results?.[0]?.[0]?.message.startsWith('MOVED') && redis.isCluster) (redis as unknown as Cluster).refreshSlotsCache();
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
