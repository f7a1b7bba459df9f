-- The request log. Month partitions; ordered for per-account time-range queries; ReplacingMergeTree
-- collapses a replayed request (same user, time and request id) into one row, and queries read FINAL
-- so that a duplicate is never counted before the merge happens.
CREATE TABLE IF NOT EXISTS logs
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
    use_time            UInt32,
    is_stream           Bool,
    channel             UInt32,
    token_id            UInt64,
    `group`             LowCardinality(String),
    request_id          String,
    upstream_request_id String,
    ip                  String DEFAULT '',
    INDEX idx_request_id request_id TYPE bloom_filter GRANULARITY 4,
    INDEX idx_token_name token_name TYPE bloom_filter GRANULARITY 4
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(created_at)
ORDER BY (user_id, created_at, request_id)
SETTINGS index_granularity = 8192
