-- The currency a card order was charged in: the checkout session is created in CardpayCurrency as it is
-- then, and the webhook is checked against this, not against the option now. Checking against the
-- option stranded every open card order when an operator changed it (paid, refused as a currency
-- mismatch, never credited). NULL for QR-code (epay) orders, which name no currency, and for card
-- orders made before this column; those are checked against CardpayCurrency, as before
-- (console-api/routes/topup.ts, the card webhook).
ALTER TABLE topups ADD COLUMN IF NOT EXISTS currency TEXT;
