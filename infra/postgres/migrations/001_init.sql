-- Accounts, API keys, channels, top-up orders, redemption codes, options and the ledger of settled
-- requests. Quotas are BIGINT quota units (500000 = 1 US dollar); timestamps the contract exposes as
-- integers are stored as Unix seconds.

CREATE SEQUENCE IF NOT EXISTS log_id_seq;

CREATE TABLE IF NOT EXISTS users (
  id                     BIGSERIAL PRIMARY KEY,
  username               TEXT NOT NULL UNIQUE,
  display_name           TEXT NOT NULL DEFAULT '',
  password_hash          TEXT NOT NULL,
  role                   INT  NOT NULL DEFAULT 1,
  status                 INT  NOT NULL DEFAULT 1,
  email                  TEXT NOT NULL DEFAULT '',
  code_host_id           TEXT NOT NULL DEFAULT '',
  chat_platform_id       TEXT NOT NULL DEFAULT '',
  oidc_id                TEXT NOT NULL DEFAULT '',
  social_app_id          TEXT NOT NULL DEFAULT '',
  messenger_id           TEXT NOT NULL DEFAULT '',
  forum_id               TEXT NOT NULL DEFAULT '',
  "group"                TEXT NOT NULL DEFAULT 'default',
  quota                  BIGINT NOT NULL DEFAULT 0,
  used_quota             BIGINT NOT NULL DEFAULT 0,
  request_count          BIGINT NOT NULL DEFAULT 0,
  aff_code               TEXT NOT NULL UNIQUE,
  aff_count              INT  NOT NULL DEFAULT 0,
  aff_quota              BIGINT NOT NULL DEFAULT 0,
  aff_history_quota      BIGINT NOT NULL DEFAULT 0,
  inviter_id             BIGINT NOT NULL DEFAULT 0,
  setting                TEXT NOT NULL DEFAULT '',
  card_provider_customer TEXT NOT NULL DEFAULT '',
  sidebar_modules        TEXT NOT NULL DEFAULT '',
  created_at             BIGINT NOT NULL DEFAULT EXTRACT(EPOCH FROM now())::BIGINT,
  deleted_at             BIGINT
);

-- Console credentials: login sessions and long-lived access tokens. Only a SHA-256 of the token is
-- stored, so a dump cannot be replayed.
CREATE TABLE IF NOT EXISTS access_tokens (
  id          BIGSERIAL PRIMARY KEY,
  user_id     BIGINT NOT NULL REFERENCES users(id),
  token_hash  BYTEA  NOT NULL UNIQUE,
  kind        TEXT   NOT NULL CHECK (kind IN ('session', 'access')),
  created_at  BIGINT NOT NULL DEFAULT EXTRACT(EPOCH FROM now())::BIGINT,
  expires_at  BIGINT,
  revoked_at  BIGINT
);
CREATE INDEX IF NOT EXISTS access_tokens_user ON access_tokens (user_id);

-- API keys. key_hash (HMAC-SHA256 with the server secret) is what the relay looks up;
-- key_ciphertext (AES-256-GCM) exists only for the owner's reveal endpoint; key_mask is for listings.
CREATE TABLE IF NOT EXISTS tokens (
  id                   BIGSERIAL PRIMARY KEY,
  user_id              BIGINT NOT NULL REFERENCES users(id),
  name                 TEXT   NOT NULL,
  key_hash             BYTEA  NOT NULL UNIQUE,
  key_ciphertext       BYTEA  NOT NULL,
  key_mask             TEXT   NOT NULL,
  status               INT    NOT NULL DEFAULT 1,
  created_time         BIGINT NOT NULL DEFAULT EXTRACT(EPOCH FROM now())::BIGINT,
  accessed_time        BIGINT NOT NULL DEFAULT 0,
  expired_time         BIGINT NOT NULL DEFAULT -1,
  remain_quota         BIGINT NOT NULL DEFAULT 0,
  unlimited_quota      BOOLEAN NOT NULL DEFAULT false,
  used_quota           BIGINT NOT NULL DEFAULT 0,
  model_limits_enabled BOOLEAN NOT NULL DEFAULT false,
  model_limits         TEXT   NOT NULL DEFAULT '',
  allow_ips            TEXT,
  "group"              TEXT   NOT NULL DEFAULT '',
  cross_group_retry    BOOLEAN NOT NULL DEFAULT false,
  deleted_at           BIGINT
);
CREATE INDEX IF NOT EXISTS tokens_user ON tokens (user_id) WHERE deleted_at IS NULL;

CREATE TABLE IF NOT EXISTS channels (
  id             BIGSERIAL PRIMARY KEY,
  type           INT    NOT NULL DEFAULT 14,
  name           TEXT   NOT NULL,
  base_url       TEXT   NOT NULL,
  key_ciphertext BYTEA  NOT NULL,
  status         INT    NOT NULL DEFAULT 1,
  models         TEXT   NOT NULL,
  "group"        TEXT   NOT NULL DEFAULT 'default',
  priority       BIGINT NOT NULL DEFAULT 0,
  weight         INT    NOT NULL DEFAULT 1,
  model_mapping  TEXT   NOT NULL DEFAULT '',
  created_time   BIGINT NOT NULL DEFAULT EXTRACT(EPOCH FROM now())::BIGINT,
  used_quota     BIGINT NOT NULL DEFAULT 0
);

-- Which channel serves which (group, model): derived from channels.models x channels.group whenever a
-- channel is written, so routing never parses comma lists on the hot path.
CREATE TABLE IF NOT EXISTS abilities (
  "group"    TEXT    NOT NULL,
  model      TEXT    NOT NULL,
  channel_id BIGINT  NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
  enabled    BOOLEAN NOT NULL DEFAULT true,
  priority   BIGINT  NOT NULL DEFAULT 0,
  weight     INT     NOT NULL DEFAULT 1,
  PRIMARY KEY ("group", model, channel_id)
);

CREATE TABLE IF NOT EXISTS topups (
  id               BIGSERIAL PRIMARY KEY,
  user_id          BIGINT NOT NULL REFERENCES users(id),
  amount           BIGINT NOT NULL,
  money            NUMERIC(14, 2) NOT NULL,
  trade_no         TEXT   NOT NULL UNIQUE,
  payment_method   TEXT   NOT NULL,
  payment_provider TEXT   NOT NULL,
  status           TEXT   NOT NULL DEFAULT 'pending',
  create_time      BIGINT NOT NULL DEFAULT EXTRACT(EPOCH FROM now())::BIGINT,
  complete_time    BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS topups_user ON topups (user_id, id DESC);

CREATE TABLE IF NOT EXISTS redemptions (
  id             BIGSERIAL PRIMARY KEY,
  created_by     BIGINT NOT NULL,
  name           TEXT   NOT NULL,
  key            TEXT   NOT NULL UNIQUE,
  status         INT    NOT NULL DEFAULT 1,
  quota          BIGINT NOT NULL,
  created_time   BIGINT NOT NULL DEFAULT EXTRACT(EPOCH FROM now())::BIGINT,
  redeemed_time  BIGINT NOT NULL DEFAULT 0,
  used_user_id   BIGINT NOT NULL DEFAULT 0,
  expired_time   BIGINT NOT NULL DEFAULT -1
);

CREATE TABLE IF NOT EXISTS options (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

-- One row per settled request (and per credited top-up), keyed by request id: the billing worker's
-- idempotency guard and the source of the integer log id the contract exposes.
CREATE TABLE IF NOT EXISTS ledger (
  id                BIGINT PRIMARY KEY DEFAULT nextval('log_id_seq'),
  request_id        TEXT   NOT NULL UNIQUE,
  type              INT    NOT NULL,
  user_id           BIGINT NOT NULL,
  token_id          BIGINT NOT NULL DEFAULT 0,
  channel_id        BIGINT NOT NULL DEFAULT 0,
  model_name        TEXT   NOT NULL DEFAULT '',
  "group"           TEXT   NOT NULL DEFAULT '',
  quota             BIGINT NOT NULL,
  prompt_tokens     INT    NOT NULL DEFAULT 0,
  completion_tokens INT    NOT NULL DEFAULT 0,
  created_at        BIGINT NOT NULL,
  settled_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS ledger_user ON ledger (user_id, created_at);
