// How many times a Redis connection under a client has dropped, for a call to tell whether Redis may
// have run it more than once. ioredis sends again, after a reconnect, the commands a dropped
// connection left unanswered; an ioredis Cluster does so without a reconnect of its own: a node's
// connection that closes fails its commands with "Connection is closed." and the cluster client sends
// them again to the slot's node after `retryDelayOnFailover` (ioredis cluster/index.js, handleError),
// over a node connection made anew ('+node'). So on a cluster every node's connection is counted.
import type { Cluster, Redis } from 'ioredis';

export class ConnectionDrops {
  #count = 0;
  readonly #redis: Redis;
  readonly #onClose = (): void => {
    this.#count++;
  };
  readonly #onNode = (node: Redis): void => {
    node.on('close', this.#onClose);
  };

  /** `redis`: a single Redis, or a Cluster typed as one (infra/redis/client.ts, createRedis). */
  constructor(redis: Redis) {
    this.#redis = redis;
    redis.on('close', this.#onClose);
    const cluster = clusterOf(redis);
    if (cluster !== null) {
      for (const node of cluster.nodes('all')) this.#onNode(node);
      cluster.on('+node', this.#onNode);
      // A node dropped from the pool: its connection is gone with it (its 'close' came first, or it
      // never connected); counted again, which only makes a call in flight more careful.
      cluster.on('-node', this.#onClose);
    }
  }

  /**
   * Connections dropped so far (the client's, or any node's of a cluster): a call that saw this change
   * between its sending and its answer may have run on the server more than once, or on another one.
   */
  get count(): number {
    return this.#count;
  }

  stop(): void {
    this.#redis.off('close', this.#onClose);
    const cluster = clusterOf(this.#redis);
    if (cluster === null) return;
    cluster.off('+node', this.#onNode);
    cluster.off('-node', this.#onClose);
    for (const node of cluster.nodes('all')) node.off('close', this.#onClose);
  }
}

function clusterOf(redis: Redis): Cluster | null {
  return redis.isCluster ? redis as unknown as Cluster : null;
}
