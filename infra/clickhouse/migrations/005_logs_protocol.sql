-- The protocol the client spoke: 'anthropic' (POST /v1/messages) or 'openai' (POST
-- /v1/chat/completions). Metadata only; rows written before read 'anthropic', the only protocol there was.
ALTER TABLE logs ADD COLUMN IF NOT EXISTS protocol LowCardinality(String) DEFAULT 'anthropic' AFTER ip
