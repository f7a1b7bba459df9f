-- The cache tokens of a request apart, as they are priced (core/pricing/quota-cost.ts): reads at the
-- cache read ratio, 5-minute and 1-hour writes at their own. prompt_tokens keeps counting them too.
-- Rows written before this migration read 0: their cache tokens were priced as plain input.
ALTER TABLE ledger ADD COLUMN IF NOT EXISTS cache_read_tokens INT NOT NULL DEFAULT 0;
ALTER TABLE ledger ADD COLUMN IF NOT EXISTS cache_write_5m_tokens INT NOT NULL DEFAULT 0;
ALTER TABLE ledger ADD COLUMN IF NOT EXISTS cache_write_1h_tokens INT NOT NULL DEFAULT 0;
