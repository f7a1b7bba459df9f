-- The ClickHouse log rows not yet inserted, written in the settlement transaction with their ledger
-- rows (billing/settle-batch.ts) and drained by the billing worker (billing/log-outbox.ts), which
-- deletes a row only after ClickHouse took it. Postgres debits and stream acknowledgements therefore
-- never wait for ClickHouse; a row inserted twice (a drain that died before its delete) collapses in
-- the ReplacingMergeTree. `id` is the ledger id, which is also the log id.
CREATE TABLE IF NOT EXISTS log_outbox (
  id  BIGINT PRIMARY KEY,
  row JSONB NOT NULL
);
