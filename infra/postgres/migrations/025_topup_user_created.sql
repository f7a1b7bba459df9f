-- An account's orders of the last hour, whatever their status: the cap on orders opened and not paid
-- (console-api/payments/topup-orders.ts, OPENED_ORDERS_PER_WINDOW) counts the ones ended unpaid too,
-- which topups_user_pending (migration 020, open orders only) does not hold.
CREATE INDEX IF NOT EXISTS topups_user_created ON topups (user_id, create_time);
