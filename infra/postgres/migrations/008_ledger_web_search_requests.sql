-- The web searches of a request (the provider's usage.server_tool_use.web_search_requests), each
-- billed within `quota` at WebSearchCallPrice × group ratio (core/pricing/quota-cost.ts). Rows written
-- before this migration read 0: their searches were not billed.
ALTER TABLE ledger ADD COLUMN IF NOT EXISTS web_search_requests INT NOT NULL DEFAULT 0;
