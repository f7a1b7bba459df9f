-- oidc_states.bind_credential_hash: for a binding (GET /api/oauth/oidc/start called with a console
-- credential), the SHA-256 of that session or access token, as access_tokens.token_hash holds it. The
-- redirect binds the identity only if that credential is still live and the account enabled, checked
-- under the account's row lock (console-api/oidc/oidc-routes.ts, auth/sessions.ts lockIssuer): a
-- binding a stolen credential started no longer completes after the owner's password change, a reset
-- or a ban revoked it. Binding rows from before this migration have none and are refused (a state
-- lives 10 minutes).
ALTER TABLE oidc_states ADD COLUMN IF NOT EXISTS bind_credential_hash BYTEA;
