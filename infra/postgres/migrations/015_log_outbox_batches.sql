-- The log outbox's batch in flight (billing/log-outbox.ts). A batch is fixed here and committed before
-- it is inserted into ClickHouse: which outbox rows it holds, and the token it is inserted with
-- (insert_deduplication_token). If ClickHouse took the insert but the rows' delete was lost (the
-- worker, its connection or Postgres died in between), the batch is sent again, first, with the same
-- rows and the same token, and ClickHouse drops the repeat whole: in `logs` and in the
-- quarter-hour table its view feeds. So every log row is counted once in the stats without a store
-- of every key ever logged (ClickHouse migration 012 removed it).
--
-- The token is random, not the id: a database restored or recreated against the same ClickHouse
-- starts its sequences again, and a reused token would make ClickHouse drop a new batch as a repeat.
CREATE TABLE IF NOT EXISTS log_outbox_batches (
  id      BIGSERIAL PRIMARY KEY,
  token   UUID NOT NULL DEFAULT gen_random_uuid(),
  row_ids BIGINT[] NOT NULL
);
