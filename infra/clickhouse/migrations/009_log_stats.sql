-- Pre-aggregated consumption per account and quarter hour, kept exact by counting each request once
-- when it is first inserted (docs/log-query-plans.md).
--
-- Why: the console's stat, count and per-day queries summed the account's raw rows through `logs
-- FINAL` (a million rows for the heaviest account at 10 M). The quarter-hour table holds a few
-- thousand rows per account-month instead, and every UTC offset in use is a multiple of 15 minutes,
-- so local days are whole buckets too.
--
-- Exactness: `logs` may hold a request twice (an outbox insert replayed after its delete was lost,
-- billing/log-outbox.ts) until ReplacingMergeTree merges the parts, and a materialized view sees
-- every insert. So the rows go through a first-seen filter before they are counted:
--
--   logs ─(logs_first_seen_mv: one row per key within the block, ANTI JOIN log_keys)─▶ logs_first_seen (Null)
--        logs_first_seen ─(log_keys_mv)─▶ log_keys (EmbeddedRocksDB: the keys already counted)
--        logs_first_seen ─(log_stats_15m_mv)─▶ log_stats_15m (SummingMergeTree)
--
-- The key is sipHash128(user_id, created_at, request_id), the ordering key of `logs`, i.e. exactly
-- what ReplacingMergeTree collapses. The ANTI JOIN is a direct key lookup in RocksDB per inserted
-- row (join_algorithm = 'direct'), so an insert of a batch costs one lookup per row. Two inserts of
-- the same key running at the same instant on a multi-threaded server could both pass the filter;
-- the outbox's row locks (SKIP LOCKED) keep one batch's rows in one worker, and the embedded server
-- runs one statement at a time.
CREATE TABLE IF NOT EXISTS log_keys
(
    key FixedString(16),
    created_at DateTime
)
ENGINE = EmbeddedRocksDB
PRIMARY KEY key;

CREATE TABLE IF NOT EXISTS logs_first_seen
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

CREATE TABLE IF NOT EXISTS log_stats_15m
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
ENGINE = SummingMergeTree
PARTITION BY toYYYYMM(bucket)
ORDER BY (user_id, bucket, type, model_name, token_name, `group`, channel);

CREATE MATERIALIZED VIEW IF NOT EXISTS log_keys_mv TO log_keys AS
SELECT key, created_at FROM logs_first_seen;

CREATE MATERIALIZED VIEW IF NOT EXISTS log_stats_15m_mv TO log_stats_15m AS
SELECT user_id, toStartOfFifteenMinutes(created_at) AS bucket, type, model_name, token_name, `group`, channel,
       count() AS requests, sum(quota) AS quota,
       sum(toUInt64(prompt_tokens)) AS prompt_tokens, sum(toUInt64(completion_tokens)) AS completion_tokens
FROM logs_first_seen
GROUP BY user_id, bucket, type, model_name, token_name, `group`, channel;

CREATE MATERIALIZED VIEW IF NOT EXISTS logs_first_seen_mv TO logs_first_seen AS
SELECT s.key AS key, s.user_id AS user_id, s.created_at AS created_at, s.type AS type, s.model_name AS model_name,
       s.token_name AS token_name, s.`group` AS `group`, s.channel AS channel, s.quota AS quota,
       s.prompt_tokens AS prompt_tokens, s.completion_tokens AS completion_tokens
FROM
(
    SELECT sipHash128(user_id, created_at, request_id) AS key, user_id, created_at, type, model_name, token_name,
           `group`, channel, quota, prompt_tokens, completion_tokens
    FROM logs
    LIMIT 1 BY key
) AS s
LEFT ANTI JOIN log_keys AS k ON s.key = k.key
SETTINGS join_algorithm = 'direct';

-- The rows already there, once (FINAL: one row per key), skipping keys the views above already
-- counted: running this statement again adds nothing. Exact when nothing writes to `logs` meanwhile
-- (migrations run before the services start).
INSERT INTO logs_first_seen
SELECT s.key AS key, s.user_id AS user_id, s.created_at AS created_at, s.type AS type, s.model_name AS model_name,
       s.token_name AS token_name, s.`group` AS `group`, s.channel AS channel, s.quota AS quota,
       s.prompt_tokens AS prompt_tokens, s.completion_tokens AS completion_tokens
FROM
(
    SELECT sipHash128(user_id, created_at, request_id) AS key, user_id, created_at, type, model_name, token_name,
           `group`, channel, quota, prompt_tokens, completion_tokens
    FROM logs FINAL
) AS s
LEFT ANTI JOIN log_keys AS k ON s.key = k.key
SETTINGS join_algorithm = 'direct'
