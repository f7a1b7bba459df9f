-- Console events (top-up, management) finish after COMMIT: the Redis mirror moves by the delta and the
-- log event goes to the usage stream. Until both are done the row stays pending, with its encoded log
-- event, so that the billing worker can finish what a failed console left (billing/console-follow-up.ts).
ALTER TABLE ledger ADD COLUMN IF NOT EXISTS follow_up_pending BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE ledger ADD COLUMN IF NOT EXISTS log_event TEXT;
CREATE INDEX IF NOT EXISTS ledger_follow_up_pending ON ledger (id) WHERE follow_up_pending;
