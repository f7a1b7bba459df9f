// Builds the relay from its parts and serves it on uWebSockets.js.
import uws from 'uWebSockets.js';
import type { Config } from '../infra/config.js';
import { createLogger, type Logger } from '../infra/logger.js';
import { createSql } from '../infra/postgres/client.js';
import { createRedis } from '../infra/redis/client.js';
import { redisKeys } from '../infra/redis/keys.js';
import { createApiKeyCrypto } from '../infra/secrets/api-key-crypto.js';
import { ClientAddressResolver } from './auth/client-address.js';
import { KeyDirectory } from './auth/key-directory.js';
import { errorBody, RelayError } from './errors.js';
import { subscribeInvalidations } from './invalidation.js';
import { handleMessages, type RelayContext } from './messages/messages-handler.js';
import { PROM_CONTENT_TYPE, relayMetrics } from './metrics/relay-metrics.js';
import { assertNativeUws } from './native-binding.js';
import { loadOptions } from './pricing/options-source.js';
import { ratiosFromOptions, type Ratios } from './pricing/ratios.js';
import { postgresBalanceSource } from './quota/postgres-balance-source.js';
import { QuotaStore } from './quota/quota-store.js';
import { ChannelRegistry } from './routing/channel-registry.js';
import { groupPolicyFromOptions, type GroupPolicy } from './routing/group-policy.js';
import { UpstreamPools } from './upstream/upstream-pools.js';
import { handleCountTokens } from './messages/count-tokens-handler.js';
import { handleListModels, handleRetrieveModel } from './models/models-route.js';
import { TokenCounter } from './tokens/token-counter.js';

export interface RunningRelay {
  port: number;
  /** Whether the routes include this enabled channel: lets a caller wait for a reload to land. */
  hasChannel(id: number): boolean;
  close(): Promise<void>;
}

/** Backstop for a missed invalidation message: channels and options are re-read this often. */
const RELOAD_INTERVAL_MS = 10_000;

export async function startRelay(config: Config, log: Logger = createLogger(config, 'relay')): Promise<RunningRelay> {
  assertNativeUws();
  const sql = createSql(config);
  const redis = createRedis(config, 'relay');
  const sub = createRedis(config, 'relay-sub', { blocking: true });
  const keys = redisKeys(config.REDIS_PREFIX);
  const crypto = createApiKeyCrypto(config.KEY_SECRET);
  const keyDirectory = new KeyDirectory(sql, crypto, config.KEY_CACHE_TTL_MS);
  const channels = new ChannelRegistry(sql, crypto, (id, err) =>
    log.error({ channel: id, err: err.message }, 'channel credential cannot be opened with KEY_SECRET; channel skipped'));
  const pools = new UpstreamPools({
    connections: config.UPSTREAM_CONNECTIONS,
    headersTimeoutMs: config.UPSTREAM_HEADERS_TIMEOUT_MS,
    bodyTimeoutMs: config.UPSTREAM_BODY_TIMEOUT_MS,
  });
  const quota = new QuotaStore(redis, keys, postgresBalanceSource(sql));

  let ratios: Ratios;
  let groups: GroupPolicy;
  const reloadOptions = async () => {
    const options = await loadOptions(sql);
    ratios = ratiosFromOptions(options);
    groups = groupPolicyFromOptions(options, ratios);
  };
  await reloadOptions();
  await channels.reload();
  await subscribeInvalidations(sub, keys.invalidationChannel(), {
    token: (id) => keyDirectory.invalidate({ tokenId: id }),
    user: (id) => keyDirectory.invalidate({ userId: id }),
    channels: () => channels.reload(),
    options: reloadOptions,
  }, log);
  const timer = setInterval(() => {
    Promise.all([channels.reload(), reloadOptions()]).catch((err: unknown) => log.error({ err }, 'periodic reload failed'));
  }, RELOAD_INTERVAL_MS);
  timer.unref();

  const tokens = new TokenCounter({ minThreads: 1, maxThreads: config.TOKEN_WORKERS });
  const ctx: RelayContext = {
    log,
    keys: keyDirectory,
    channels,
    quota,
    pools,
    ratios: () => ratios,
    groups: () => groups,
    clientAddress: new ClientAddressResolver(config.TRUSTED_PROXIES),
    maxBodyBytes: config.MAX_BODY_BYTES,
    maxTries: config.RELAY_MAX_TRIES,
    reservationTtlMs: config.RESERVATION_TTL_SEC * 1000,
    tokens,
    countPromptAboveBytes: config.COUNT_PROMPT_ABOVE_BYTES,
    tokenEstimateFactor: config.TOKEN_ESTIMATE_FACTOR,
    deliveredFlushBytes: config.DELIVERED_FLUSH_BYTES,
  };

  const notFound = new RelayError('not_found');
  const app = uws.App()
    .post('/v1/messages', (res, req) => handleMessages(ctx, res, req))
    .post('/v1/messages/count_tokens', (res, req) => handleCountTokens(ctx, res, req))
    .get('/v1/models', (res, req) => handleListModels(ctx, res, req))
    .get('/v1/models/:model_id', (res, req) => handleRetrieveModel(ctx, res, req))
    .get('/metrics', (res) => {
      const text = relayMetrics.render();
      res.cork(() => res.writeHeader('content-type', PROM_CONTENT_TYPE).end(text));
    })
    .get('/health', (res) => {
      res.cork(() => res.writeHeader('content-type', 'application/json').end('{"status":"ok"}'));
    })
    .any('/*', (res, req) => {
      const body = errorBody(notFound.type, `${req.getMethod().toUpperCase()} ${req.getUrl()} does not exist.`);
      res.cork(() => res.writeStatus('404 Not Found').writeHeader('content-type', 'application/json').end(body));
    });

  const listenSocket = await new Promise<uws.us_listen_socket>((resolve, reject) => {
    app.listen(config.RELAY_HOST, config.RELAY_PORT, (socket) => {
      if (socket) resolve(socket);
      else reject(new Error(`relay could not listen on ${config.RELAY_HOST}:${config.RELAY_PORT}`));
    });
  });
  const port = uws.us_socket_local_port(listenSocket);
  log.info({ host: config.RELAY_HOST, port }, 'relay listening');

  return {
    port,
    hasChannel: (id) => channels.has(id),
    async close() {
      clearInterval(timer);
      uws.us_listen_socket_close(listenSocket);
      await pools.close();
      await tokens.close();
      sub.disconnect();
      await redis.quit();
      await sql.end({ timeout: 5 });
    },
  };
}
