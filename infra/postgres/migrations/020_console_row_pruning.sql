-- Console rows that end, and the indexes that keep their limits and their pruning cheap.
--
-- Top-up orders: an account may have at most 10 unpaid (pending) orders opened in the last hour
-- (console-api/payments/topup-orders.ts); the count reads this partial index, which holds only the
-- open orders, rather than every order the account ever made (topups_user). Unpaid orders become
-- 'expired' after a day (billing/console-row-pruning.ts, through topups_status_created of 002);
-- the column has no CHECK, so the status needs no schema change. An expired order is kept: a paid
-- notice arriving later still completes it, once.
CREATE INDEX IF NOT EXISTS topups_user_pending ON topups (user_id, create_time) WHERE status = 'pending';

-- Console credentials and e-mail codes are deleted a while after they stop working (7 days, 1 day):
-- each delete reads one of these by range instead of the whole table. Partial, so the live access
-- tokens (no expiry, not revoked) are in neither.
CREATE INDEX IF NOT EXISTS access_tokens_expires ON access_tokens (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS access_tokens_revoked ON access_tokens (revoked_at) WHERE revoked_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS email_codes_expires ON email_codes (expires_at);
