-- log_stats_15m_local fed by logs_local directly, the first-seen filter removed: the counterpart of
-- migrations/012 (the reasons are there). On a cluster the repeat of a batch is dropped by the
-- replicated tables through Keeper (replicated_deduplication_window, 10,000 blocks and an hour by
-- default): on whichever replica of the shard it lands, where log_keys was each host's own.
DROP VIEW IF EXISTS logs_first_seen_mv ON CLUSTER '{cluster}';
DROP VIEW IF EXISTS log_keys_mv ON CLUSTER '{cluster}';
DROP VIEW IF EXISTS log_stats_15m_mv ON CLUSTER '{cluster}';
CREATE MATERIALIZED VIEW IF NOT EXISTS log_stats_15m_from_logs_mv ON CLUSTER '{cluster}' TO log_stats_15m_local AS
SELECT user_id, toStartOfFifteenMinutes(created_at) AS bucket, type, model_name, token_name, `group`, channel,
       count() AS requests, sum(quota) AS quota,
       sum(toUInt64(prompt_tokens)) AS prompt_tokens, sum(toUInt64(completion_tokens)) AS completion_tokens
FROM logs_local
GROUP BY user_id, bucket, type, model_name, token_name, `group`, channel;
DROP TABLE IF EXISTS logs_first_seen ON CLUSTER '{cluster}';
DROP TABLE IF EXISTS log_keys ON CLUSTER '{cluster}'
