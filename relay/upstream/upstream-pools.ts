// One undici Pool per provider origin, kept alive across requests, so that a request to the provider
// costs no TCP (or TLS) handshake.
import { Pool } from 'undici';

export interface UpstreamPoolOptions {
  connections: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
}

export class UpstreamPools {
  readonly #pools = new Map<string, Pool>();
  readonly #opts: UpstreamPoolOptions;

  constructor(opts: UpstreamPoolOptions) {
    this.#opts = opts;
  }

  for(origin: string): Pool {
    let pool = this.#pools.get(origin);
    if (!pool) {
      pool = new Pool(origin, {
        connections: this.#opts.connections,
        pipelining: 1,
        keepAliveTimeout: 30_000,
        headersTimeout: this.#opts.headersTimeoutMs,
        bodyTimeout: this.#opts.bodyTimeoutMs,
      });
      this.#pools.set(origin, pool);
    }
    return pool;
  }

  /** Cuts every provider call still open (their bodies error), and forgets the pools. */
  async destroy(): Promise<void> {
    await Promise.all([...this.#pools.values()].map((p) => p.destroy()));
    this.#pools.clear();
  }

  async close(): Promise<void> {
    await Promise.all([...this.#pools.values()].map((p) => p.close()));
    this.#pools.clear();
  }
}
