-- The web searches of a request, each billed within `quota` at WebSearchCallPrice × group ratio
-- (core/pricing/quota-cost.ts). Metadata only; rows written before read 0 (their searches were free).
ALTER TABLE logs ADD COLUMN IF NOT EXISTS web_search_requests UInt32 DEFAULT 0 AFTER cache_write_1h_tokens
