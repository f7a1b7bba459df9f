-- Console: signed quota changes of console ledger rows, payment-provider references of top-up orders,
-- channel test results, and the indexes the console's admin listings and searches use.

-- Console events (1 top-up, 3 management) carry the signed balance change here; ledger.quota stays
-- the non-negative amount the log row shows. Relay events leave it 0.
ALTER TABLE ledger ADD COLUMN IF NOT EXISTS quota_delta BIGINT NOT NULL DEFAULT 0;

-- The provider's own reference of a paid order (epay trade_no, card-provider session / event id).
ALTER TABLE topups ADD COLUMN IF NOT EXISTS provider_trade_no TEXT NOT NULL DEFAULT '';

-- Result of the last GET /api/channel/test/:id: milliseconds and Unix seconds (0 = never tested).
ALTER TABLE channels ADD COLUMN IF NOT EXISTS response_time INT NOT NULL DEFAULT 0;
ALTER TABLE channels ADD COLUMN IF NOT EXISTS test_time BIGINT NOT NULL DEFAULT 0;

CREATE INDEX IF NOT EXISTS redemptions_id_desc ON redemptions (id DESC);
CREATE INDEX IF NOT EXISTS topups_status_created ON topups (status, create_time);
