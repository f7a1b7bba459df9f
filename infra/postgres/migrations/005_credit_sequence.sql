-- A console credit and a mirror refill must agree on whether the credit is already in the mirror: a
-- refill from users.quota after the commit already holds it, and the follow-up must not add it again.
-- Each console change of users.quota increments credit_seq in the same UPDATE and keeps the value on
-- its ledger row; a refill stores the credit_seq it read next to the mirror, and a pending credit moves
-- the mirror only when its sequence is newer (core/quota/lua/adjustBalanceOnce-3.lua).
ALTER TABLE users ADD COLUMN IF NOT EXISTS credit_seq BIGINT NOT NULL DEFAULT 0;
-- NULL on rows written before this migration: such a credit moves a loaded mirror as before.
ALTER TABLE ledger ADD COLUMN IF NOT EXISTS credit_seq BIGINT;
