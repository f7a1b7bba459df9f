// One undici Pool per provider origin, kept alive across requests, so that a request to the provider
// costs no TCP (or TLS) handshake.
//
// Each new connection obeys the root option ChannelAllowPrivateNetworks (core/net/outbound-guard.ts):
// while it is off, a channel's host that is, or now resolves to, a private, loopback or link-local
// address is refused there. The console checks base_url when it is saved, but a name can be rebound
// to 127.0.0.1 afterwards by whoever owns it, and the relay would then send the channel's credential
// and the caller's request into the gateway's own network.
import { buildConnector, Pool } from 'undici';
import { guardedConnector, PRIVATE_TARGET } from '../../core/net/outbound-guard.js';

export interface UpstreamPoolOptions {
  connections: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
}

/**
 * The guard's refusal as the relay's callers see it: messages-handler.ts retries another channel, and
 * tells the user "provider connection failed", only for connect-phase codes (NOT_SENT_CODES), and
 * nothing was sent. The guard's error, which names the address, stays the cause for the service log.
 */
function refusedConnection(err: Error): Error {
  return Object.assign(new Error(`${err.message}; the option ChannelAllowPrivateNetworks is off`, { cause: err }), { code: 'ECONNREFUSED' });
}

export class UpstreamPools {
  readonly #pools = new Map<string, Pool>();
  /** Pools replaced when private targets stopped being allowed, finishing the calls they hold. */
  readonly #retiring = new Set<Pool>();
  readonly #opts: UpstreamPoolOptions;
  /** Off until the options say otherwise: a relay that has not read them yet connects guarded. */
  #allowPrivate = false;
  readonly #open = buildConnector({});
  readonly #guarded = guardedConnector();
  /** Read per connection, not per pool, so a pool made under one setting never outlives it unchecked. */
  readonly #connect: buildConnector.connector = (options, callback) => {
    if (this.#allowPrivate) return this.#open(options, callback);
    this.#guarded(options, (err, socket) => {
      if (err) callback((err as { code?: unknown }).code === PRIVATE_TARGET ? refusedConnection(err) : err, null);
      else callback(null, socket!);
    });
  };

  constructor(opts: UpstreamPoolOptions) {
    this.#opts = opts;
  }

  /**
   * Follows ChannelAllowPrivateNetworks (relay/server.ts, at each options reload). Turned off, every
   * pool is replaced: a connection it keeps alive may lead to a private address, and would serve
   * further requests without a new lookup.
   */
  allowPrivateNetworks(allow: boolean): void {
    if (allow === this.#allowPrivate) return;
    this.#allowPrivate = allow;
    if (allow) return;
    for (const pool of this.#pools.values()) {
      this.#retiring.add(pool);
      const retired = (): void => void this.#retiring.delete(pool);
      pool.close().then(retired, retired);
    }
    this.#pools.clear();
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
        connect: this.#connect,
      });
      this.#pools.set(origin, pool);
    }
    return pool;
  }

  /**
   * Whether destroy() cut the calls still open (a closing relay whose grace is over): a call failing
   * from then on failed because of the relay, not the provider.
   */
  cut = false;

  /** Cuts every provider call still open (their bodies error), and forgets the pools. */
  async destroy(): Promise<void> {
    this.cut = true;
    await Promise.all([...this.#pools.values(), ...this.#retiring].map((p) => p.destroy()));
    this.#pools.clear();
    this.#retiring.clear();
  }

  async close(): Promise<void> {
    await Promise.all([...this.#pools.values(), ...this.#retiring].map((p) => p.close()));
    this.#pools.clear();
    this.#retiring.clear();
  }
}
