-- migrations/009_log_stats.sql on a cluster: the quarter-hour statistics and their first-seen filter,
-- created on every host over the shard's `logs_local` (the materialized views fire on the inserts a
-- host receives into logs_local), and a Distributed `log_stats_15m` the console reads as on one server.
--
--   logs (Distributed, by user_id) ─▶ logs_local on one replica of the account's shard
--   logs_local ─(logs_first_seen_mv: one row per key within the block, ANTI JOIN log_keys)─▶ logs_first_seen (Null)
--        logs_first_seen ─(log_keys_mv)─▶ log_keys (EmbeddedRocksDB, local to the host)
--        logs_first_seen ─(log_stats_15m_mv)─▶ log_stats_15m_local (ReplicatedSummingMergeTree)
--   log_stats_15m (Distributed over log_stats_15m_local) ◀─ the console's queries
--
-- Why the per-shard filter is exact: the key sipHash128(user_id, created_at, request_id) contains the
-- sharding key, so every insert of a request, a replay included, is routed to the same shard; that
-- shard's log_keys is the only place the key can have been counted, and no other shard ever sees it.
-- Sums over shards therefore add disjoint sets of requests.
--
-- Replicas: a materialized view fires only on the host the insert reached, not on the replicas that
-- fetch the part. Hence log_stats_15m_local is replicated (every replica gets the sums), while
-- log_keys (EmbeddedRocksDB cannot be replicated) holds the keys of the inserts THIS replica received.
-- A replay is caught when it reaches the replica that took the original. Which replica an insert
-- reaches is the Distributed table's choice (load_balancing; with prefer_localhost_replica the host
-- the client called, if it is one of the shard's replicas), so the gateway's client sends
-- load_balancing = 'in_order' and prefer_localhost_replica = 0 (infra/clickhouse/client.ts): each shard's
-- inserts then go to its first healthy replica, whichever host billing called (docs/scaling.md). A
-- replay that crosses a replica switch (the first replica down between an insert and its replay) can
-- be counted twice in log_stats_15m; `logs` itself still collapses it (ReplacingMergeTree, replicated).
--
-- No backfill (migrations/009 counts the rows already in `logs`): this set is applied whole, to an
-- empty cluster, before any service writes, so the chain exists before the first row. Rows copied in
-- from a single server later (INSERT INTO logs SELECT ... FROM remote(...)) go through the chain.
CREATE TABLE IF NOT EXISTS log_keys ON CLUSTER '{cluster}'
(
    key FixedString(16),
    created_at DateTime
)
ENGINE = EmbeddedRocksDB
PRIMARY KEY key;

CREATE TABLE IF NOT EXISTS logs_first_seen ON CLUSTER '{cluster}'
(
    key                 FixedString(16),
    user_id             UInt64,
    created_at          DateTime,
    type                UInt8,
    model_name          LowCardinality(String),
    token_name          String,
    `group`             LowCardinality(String),
    channel             UInt32,
    quota               Int64,
    prompt_tokens       UInt32,
    completion_tokens   UInt32
)
ENGINE = Null;

CREATE TABLE IF NOT EXISTS log_stats_15m_local ON CLUSTER '{cluster}'
(
    user_id             UInt64,
    bucket              DateTime,
    type                UInt8,
    model_name          LowCardinality(String),
    token_name          String,
    `group`             LowCardinality(String),
    channel             UInt32,
    requests            UInt64,
    quota               Int64,
    prompt_tokens       UInt64,
    completion_tokens   UInt64
)
ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/{database}/log_stats_15m_local', '{replica}')
PARTITION BY toYYYYMM(bucket)
ORDER BY (user_id, bucket, type, model_name, token_name, `group`, channel);

-- Read-only for the gateway (the views write log_stats_15m_local); sharded by user_id like `logs` so
-- that a per-account query can be sent to one shard (optimize_skip_unused_shards).
CREATE TABLE IF NOT EXISTS log_stats_15m ON CLUSTER '{cluster}' AS log_stats_15m_local
ENGINE = Distributed('{cluster}', currentDatabase(), log_stats_15m_local, user_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS log_keys_mv ON CLUSTER '{cluster}' TO log_keys AS
SELECT key, created_at FROM logs_first_seen;

CREATE MATERIALIZED VIEW IF NOT EXISTS log_stats_15m_mv ON CLUSTER '{cluster}' TO log_stats_15m_local AS
SELECT user_id, toStartOfFifteenMinutes(created_at) AS bucket, type, model_name, token_name, `group`, channel,
       count() AS requests, sum(quota) AS quota,
       sum(toUInt64(prompt_tokens)) AS prompt_tokens, sum(toUInt64(completion_tokens)) AS completion_tokens
FROM logs_first_seen
GROUP BY user_id, bucket, type, model_name, token_name, `group`, channel;

-- Created last, as in migrations/009: the first view to fire once rows arrive, when its targets exist.
CREATE MATERIALIZED VIEW IF NOT EXISTS logs_first_seen_mv ON CLUSTER '{cluster}' TO logs_first_seen AS
SELECT s.key AS key, s.user_id AS user_id, s.created_at AS created_at, s.type AS type, s.model_name AS model_name,
       s.token_name AS token_name, s.`group` AS `group`, s.channel AS channel, s.quota AS quota,
       s.prompt_tokens AS prompt_tokens, s.completion_tokens AS completion_tokens
FROM
(
    SELECT sipHash128(user_id, created_at, request_id) AS key, user_id, created_at, type, model_name, token_name,
           `group`, channel, quota, prompt_tokens, completion_tokens
    FROM logs_local
    LIMIT 1 BY key
) AS s
LEFT ANTI JOIN log_keys AS k ON s.key = k.key
SETTINGS join_algorithm = 'direct'
