-- The cache tokens of a request apart, as they are priced (core/pricing/quota-cost.ts); cache_tokens
-- stays their sum. Metadata only; rows written before read 0 (their cache was priced as plain input).
ALTER TABLE logs ADD COLUMN IF NOT EXISTS cache_read_tokens UInt32 DEFAULT 0 AFTER cache_tokens;
ALTER TABLE logs ADD COLUMN IF NOT EXISTS cache_write_5m_tokens UInt32 DEFAULT 0 AFTER cache_read_tokens;
ALTER TABLE logs ADD COLUMN IF NOT EXISTS cache_write_1h_tokens UInt32 DEFAULT 0 AFTER cache_write_5m_tokens
