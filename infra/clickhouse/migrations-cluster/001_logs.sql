-- The request log on a ClickHouse cluster (CLICKHOUSE_CLUSTER set; docs/scaling.md, "ClickHouse
-- shards"). The same schema as migrations/001-005 + 010 applied in order, written as its end state:
-- the columns of `logs` with cache_read/write, web_search_requests and protocol in their places, and
-- no forced-merge setting (002 set it, 010 reset it). `{cluster}` is replaced by migrate.ts with the
-- setting; `{shard}`, `{replica}` and `{database}` are the servers' macros, expanded by ClickHouse.
--
-- Per shard, `logs_local` holds the rows of the accounts that shard owns, replicated to the shard's
-- replicas through Keeper. `logs` is a Distributed table over it, sharded by user_id: billing inserts
-- into `logs` and the console reads `logs` exactly as on one server. Sharding by account keeps every
-- row of a request (same user_id, created_at, request_id) on one shard, so ReplacingMergeTree still
-- collapses a replayed request there, and the console's per-account queries (always WHERE user_id =)
-- read one shard's rows.
--
-- Every statement is ON CLUSTER (the DDL runs on each host and the statement returns once all have
-- done it) and idempotent: a file interrupted half-way is run again from the start.
CREATE TABLE IF NOT EXISTS logs_local ON CLUSTER '{cluster}'
(
    id                  UInt64,
    user_id             UInt64,
    created_at          DateTime,
    type                UInt8,
    content             String,
    username            String,
    token_name          String,
    model_name          LowCardinality(String),
    quota               Int64,
    prompt_tokens       UInt32,
    completion_tokens   UInt32,
    cache_tokens        UInt32 DEFAULT 0,
    cache_read_tokens   UInt32 DEFAULT 0,
    cache_write_5m_tokens UInt32 DEFAULT 0,
    cache_write_1h_tokens UInt32 DEFAULT 0,
    web_search_requests UInt32 DEFAULT 0,
    use_time            UInt32,
    is_stream           Bool,
    channel             UInt32,
    token_id            UInt64,
    `group`             LowCardinality(String),
    request_id          String,
    upstream_request_id String,
    ip                  String DEFAULT '',
    protocol            LowCardinality(String) DEFAULT 'anthropic',
    INDEX idx_request_id request_id TYPE bloom_filter GRANULARITY 4,
    INDEX idx_token_name token_name TYPE bloom_filter GRANULARITY 4
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/logs_local', '{replica}')
PARTITION BY toYYYYMM(created_at)
ORDER BY (user_id, created_at, request_id)
SETTINGS index_granularity = 8192;

-- Named `logs` so that billing/log-outbox.ts and console-api/logs need no change. An insert is split by
-- user_id and each shard's rows go to one of its replicas (the cluster's shards must have
-- internal_replication = true: the replicas copy the part among themselves).
CREATE TABLE IF NOT EXISTS logs ON CLUSTER '{cluster}' AS logs_local
ENGINE = Distributed('{cluster}', currentDatabase(), logs_local, user_id)
