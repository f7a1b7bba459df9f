-- A key's remain_quota edit (console PUT /api/token/) moves the relay's Redis mirror of the key after
-- COMMIT. The edit is kept here, pending, until that step is done: the billing worker's follow-up
-- retries a row the console left (billing/console-follow-up.ts), once per row (a marker in Redis), and
-- a key mirror seeded from tokens.remain_quota after the commit already holds the edit: tokens.quota_seq
-- is incremented with each edit and stored with a seeded mirror, as users.credit_seq is for accounts.
ALTER TABLE tokens ADD COLUMN IF NOT EXISTS quota_seq BIGINT NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS key_quota_edits (
  id                BIGSERIAL PRIMARY KEY,
  user_id           BIGINT NOT NULL REFERENCES users(id),
  token_id          BIGINT NOT NULL REFERENCES tokens(id),
  delta             BIGINT NOT NULL,
  quota_seq         BIGINT NOT NULL,
  created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
  follow_up_pending BOOLEAN NOT NULL DEFAULT true
);
CREATE INDEX IF NOT EXISTS key_quota_edits_pending ON key_quota_edits (id) WHERE follow_up_pending;
