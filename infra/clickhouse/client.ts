import { ClickHouseLogLevel, type ClickHouseClient, createClient } from '@clickhouse/client';
import type { Config } from '../config.js';

export type { ClickHouseClient };

// The same settings against the embedded server (local-server.ts) and a real one.
export function clickHouseOptions(config: Config) {
  return {
    url: config.CLICKHOUSE_URL,
    username: config.CLICKHOUSE_USER,
    password: config.CLICKHOUSE_PASSWORD,
    application: 'meter-gateway',
    request_timeout: 30_000,
    max_open_connections: 10,
    // Below the server's keep-alive timeout (local server: 10 s, ClickHouse default: 10 s), so that a
    // socket is never reused just as the server closes it.
    keep_alive: { enabled: true, idle_socket_ttl: 2_500 },
    // The client's own logger writes plain text to the console, some twenty lines per failed insert,
    // into services' JSON logs; every failure reaches its caller as an error, which logs it in JSON.
    log: { level: ClickHouseLogLevel.OFF },
    clickhouse_settings: {
      // Rows may carry ISO-8601 timestamps ('2024-05-01T12:00:00Z') as well as 'YYYY-MM-DD hh:mm:ss'.
      date_time_input_format: 'best_effort' as const,
      ...(config.CLICKHOUSE_CLUSTER ? CLUSTER_SETTINGS : {}),
    },
  };
}

/**
 * On a cluster (CLICKHOUSE_CLUSTER, infra/clickhouse/migrations-cluster/): an insert into the
 * Distributed `logs` returns once the shards have the rows, not once they are queued on the node that
 * took them: billing deletes its outbox rows on that answer (billing/log-outbox.ts), and each shard's
 * part of the insert carries the batch's insert_deduplication_token, which that shard's replicated
 * tables check through Keeper whichever replica receives a repeat.
 */
const CLUSTER_SETTINGS = {
  distributed_foreground_insert: 1,
} as Record<string, unknown>;

/** `requestTimeoutMs`: longer than the default 30 s for statements that rewrite a table (migrations). */
export function createClickHouse(config: Config, requestTimeoutMs?: number): ClickHouseClient {
  return createClient({ ...clickHouseOptions(config), database: config.CLICKHOUSE_DATABASE, ...(requestTimeoutMs ? { request_timeout: requestTimeoutMs } : {}) });
}

/** Connected to the server's `default` database: for CREATE DATABASE before the real one exists. */
export function createClickHouseAdmin(config: Config): ClickHouseClient {
  return createClient(clickHouseOptions(config));
}
