-- The protocol the client spoke for each relay request: 'anthropic' (POST /v1/messages) or 'openai'
-- (POST /v1/chat/completions), so that the money of each can be summed apart (bench money audit).
-- Console rows and rows written before read 'anthropic', the only protocol there was.
ALTER TABLE ledger ADD COLUMN IF NOT EXISTS protocol TEXT NOT NULL DEFAULT 'anthropic';
