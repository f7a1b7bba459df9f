-- Redemption codes at rest as API keys are (tokens): key_hash, HMAC-SHA256 under a key derived from
-- KEY_SECRET, is what redemption and the exact-code search look up; key_ciphertext (AES-256-GCM) only
-- an administrator's reveal opens; key_mask is for listings. A dump holds no code anyone could redeem.
-- The plain codes of earlier rows were hashed and sealed by the migrator, in this transaction just
-- before this file, into redemption_codes_sealed (infra/postgres/migration-steps.ts): KEY_SECRET is
-- not SQL's to see. Applied by hand, without that table, this file fails and changes nothing.
ALTER TABLE redemptions
  ADD COLUMN key_hash BYTEA,
  ADD COLUMN key_ciphertext BYTEA,
  ADD COLUMN key_mask TEXT,
  ALTER COLUMN key DROP NOT NULL;

-- key = NULL too: the row versions left behind hold no code once vacuumed, not only the dump.
UPDATE redemptions r
SET key = NULL, key_hash = s.key_hash, key_ciphertext = s.key_ciphertext, key_mask = s.key_mask
FROM redemption_codes_sealed s
WHERE s.id = r.id;

ALTER TABLE redemptions
  DROP COLUMN key,
  ALTER COLUMN key_hash SET NOT NULL,
  ALTER COLUMN key_ciphertext SET NOT NULL,
  ALTER COLUMN key_mask SET NOT NULL,
  ADD CONSTRAINT redemptions_key_hash_key UNIQUE (key_hash);
