-- What a channel's provider charges for an answer served at the `flex` service tier, as a fraction of
-- its standard price (OpenAI bills flex at half; Groq at the on-demand price). The relay bills an
-- OpenAI-format answer at this ratio only when the request asked for flex and the answer says flex
-- served it (relay/messages/settlement.ts); reservations stay at the standard price, the upper bound.
-- 1 (the default) bills flex like any other answer, as before this column.
ALTER TABLE channels
  ADD COLUMN IF NOT EXISTS flex_ratio DOUBLE PRECISION NOT NULL DEFAULT 1
    CONSTRAINT channels_flex_ratio_range CHECK (flex_ratio > 0 AND flex_ratio <= 1);
