-- log_stats_15m fed by `logs` directly; the first-seen filter of 009 (log_keys, logs_first_seen and
-- their views) removed.
--
-- Why: the filter kept the quarter-hour table exact by remembering every request ever logged (an
-- EmbeddedRocksDB table growing with each one) and looking each inserted row up in it; writing and
-- looking up those keys was a third of ClickHouse's CPU per logged row (docs/performance.md,
-- "ClickHouse's ingest"). A row now reaches ClickHouse once by construction:
--   - Postgres writes a ledger row's log row to the outbox once (billing/settle-batch.ts: a replayed
--     event writes none);
--   - the outbox fixes each batch and its token in Postgres before inserting it, and sends a batch
--     whose delete was lost again, whole and first, with the same token (billing/log-outbox.ts);
--   - ClickHouse drops that repeat: `logs` and log_stats_15m keep a deduplication window (the insert
--     token and each view's block derived from it; deduplicate_blocks_in_dependent_materialized_views
--     is on by default), and the drain is one batch at a time, so the window needs to hold one insert.
-- `logs` stays a ReplacingMergeTree read FINAL: a row inserted twice some other way is still shown once.
--
-- Run before the services start (as every migration): an insert between the views' drop and the new
-- view's creation would not be counted. And after the old billing workers stopped cleanly (each ends
-- with a last pass): rows an old worker had inserted when it was killed, without their delete, would
-- be sent again by the new code in a batch of its own and counted twice. Each statement is idempotent.
ALTER TABLE logs MODIFY SETTING non_replicated_deduplication_window = 1000;
ALTER TABLE log_stats_15m MODIFY SETTING non_replicated_deduplication_window = 1000;
DROP VIEW IF EXISTS logs_first_seen_mv;
DROP VIEW IF EXISTS log_keys_mv;
DROP VIEW IF EXISTS log_stats_15m_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS log_stats_15m_from_logs_mv TO log_stats_15m AS
SELECT user_id, toStartOfFifteenMinutes(created_at) AS bucket, type, model_name, token_name, `group`, channel,
       count() AS requests, sum(quota) AS quota,
       sum(toUInt64(prompt_tokens)) AS prompt_tokens, sum(toUInt64(completion_tokens)) AS completion_tokens
FROM logs
GROUP BY user_id, bucket, type, model_name, token_name, `group`, channel;
DROP TABLE IF EXISTS logs_first_seen;
DROP TABLE IF EXISTS log_keys
