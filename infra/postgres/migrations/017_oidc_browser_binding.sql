-- oidc_states.browser_hash: the SHA-256 of the random cookie (console_oidc) that GET /api/oauth/oidc/start
-- set in the browser that started the sign-on. The redirect is completed only by a request that
-- carries it (console-api/oidc/oidc-routes.ts): without it, whoever held a state could have another
-- browser finish the flow (login CSRF: a victim signed into the attacker's account, or the victim's
-- identity bound to the attacker's account). Rows from before this migration have none and are
-- refused; a state lives 10 minutes.
ALTER TABLE oidc_states ADD COLUMN IF NOT EXISTS browser_hash BYTEA;
