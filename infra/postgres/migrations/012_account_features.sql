-- Account features (issue 16): referral quota in the ledger, e-mail verification codes, low-balance
-- notices and the single sign-on identity.
--
-- A referral movement is a console credit (console-api/ledger/console-ledger.ts) that may also move the
-- account's referral quota: the inviter's reward adds to users.aff_quota (and aff_history_quota), a
-- transfer moves aff_quota into users.quota. aff_quota_delta keeps that second movement on the ledger
-- row, so users.aff_quota = Σ ledger.aff_quota_delta holds like users.quota's invariant does. Rows
-- written before this migration read 0: nothing moved referral quota before it.
ALTER TABLE ledger ADD COLUMN IF NOT EXISTS aff_quota_delta BIGINT NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS users_inviter ON users (inviter_id) WHERE inviter_id <> 0;

-- One-time codes sent by e-mail (console-api/email/): binding an address, registering with a verified
-- address, resetting a forgotten password. Only an HMAC of the code is stored; a code expires, is used
-- once (used_at) and stops working after a few wrong attempts. The rows are also the rate limit's
-- count (per address, per account, per client address), taken under a transaction-scoped advisory lock
-- so that parallel requests cannot pass it together.
CREATE TABLE IF NOT EXISTS email_codes (
  id          BIGSERIAL PRIMARY KEY,
  purpose     TEXT   NOT NULL CHECK (purpose IN ('bind', 'register', 'reset')),
  email       TEXT   NOT NULL,
  user_id     BIGINT NOT NULL DEFAULT 0,
  client_ip   TEXT   NOT NULL DEFAULT '',
  code_hash   BYTEA  NOT NULL,
  created_at  BIGINT NOT NULL,
  expires_at  BIGINT NOT NULL,
  attempts    INT    NOT NULL DEFAULT 0,
  used_at     BIGINT
);
CREATE INDEX IF NOT EXISTS email_codes_lookup ON email_codes (purpose, email, id) WHERE used_at IS NULL;
CREATE INDEX IF NOT EXISTS email_codes_address ON email_codes (email, created_at);
CREATE INDEX IF NOT EXISTS email_codes_account ON email_codes (user_id, created_at) WHERE user_id <> 0;
CREATE INDEX IF NOT EXISTS email_codes_client ON email_codes (client_ip, created_at);

-- Low-balance notices (billing/low-balance-notices.ts): the settlement transaction that takes a
-- balance from at or above the account's warning threshold to below it inserts one row; the billing
-- worker delivers it (e-mail or signed webhook) with retries, never inside the settlement.
CREATE TABLE IF NOT EXISTS balance_notices (
  id              BIGSERIAL PRIMARY KEY,
  user_id         BIGINT NOT NULL,
  balance         BIGINT NOT NULL,
  threshold       BIGINT NOT NULL,
  created_at      BIGINT NOT NULL,
  attempts        INT    NOT NULL DEFAULT 0,
  next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  sent_at         TIMESTAMPTZ,
  failed_at       TIMESTAMPTZ,
  last_error      TEXT   NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS balance_notices_pending ON balance_notices (next_attempt_at) WHERE sent_at IS NULL AND failed_at IS NULL;

-- An OpenID Connect identity (issuer + subject) signs in one account only.
CREATE UNIQUE INDEX IF NOT EXISTS users_oidc_id ON users (oidc_id) WHERE oidc_id <> '' AND deleted_at IS NULL;

-- A sign-on in progress (console-api/oidc/): the state sent to the provider, with the PKCE verifier and
-- the nonce kept here, never in the browser. Only a SHA-256 of the state is stored; the callback deletes
-- the row it uses (single use), and an expired row is refused and swept.
CREATE TABLE IF NOT EXISTS oidc_states (
  state_hash    BYTEA  PRIMARY KEY,
  code_verifier TEXT   NOT NULL,
  nonce         TEXT   NOT NULL,
  bind_user_id  BIGINT NOT NULL DEFAULT 0,
  aff_code      TEXT   NOT NULL DEFAULT '',
  expires_at    BIGINT NOT NULL
);
