-- Per-key rate limits (0 = none: the key's group limit from the GroupRateLimits option applies).
ALTER TABLE tokens ADD COLUMN IF NOT EXISTS rate_limit_rpm INT NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN IF NOT EXISTS rate_limit_tpm INT NOT NULL DEFAULT 0;
