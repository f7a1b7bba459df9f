// Single sign-on with a generic OpenID Connect provider (new-api's "OIDC" login and its options
// oidc.enabled, oidc.well_known, oidc.client_id, oidc.client_secret; plus oidc.allowed_email_domains).
// openid-client is the relying party:
//   GET /api/oauth/oidc/start  the authorization URL: authorization code flow with PKCE (S256), a
//                              random state and nonce. The verifier and nonce stay here (oidc_states,
//                              migration 012, keyed by the state's SHA-256), never in the browser.
//                              With a console credential it starts a binding of the caller's account
//                              (the credential's hash kept with the state, migration 023).
//                              It also sets the browser's `console_oidc` cookie (random, HttpOnly,
//                              SameSite=Lax, path /api/oauth/oidc; kept if the browser has one), whose
//                              hash the state row holds (migration 017). Over HTTPS it is
//                              `__Host-console_oidc` (Secure, Path=/, no Domain) and only that name is
//                              read, as the session cookies (auth/browser-session.ts): a value planted
//                              by a sibling subdomain or a plain-http page would otherwise be adopted,
//                              and a sign-on the attacker started with it finished in the victim's
//                              browser (login CSRF).
//   GET /api/oauth/oidc        the redirect URI (<ServerAddress>/api/oauth/oidc): the state is used
//                              once (deleted as it is read), and only by the browser that started it
//                              (its cookie): else an attacker could send a victim the link of a sign-on
//                              the attacker started, and sign the victim into the attacker's account
//                              or bind the victim's identity to it (login CSRF). Lax, not the session's
//                              Strict: the provider's redirect is a cross-site navigation. Then the
//                              code is exchanged with the verifier, the ID token's issuer, audience,
//                              nonce and signature (against the provider's JWKS: enableNonRepudiationChecks,
//                              so an HS* signed ID token is refused) checked by openid-client.
// A binding completes only while the credential that started it is live and the account enabled
// (auth/sessions.ts lockIssuer, under the account's row lock): a password change, a reset or a ban
// revoked it meanwhile, the binding is refused. An account is created (not a plain sign-in) only within
// REGISTER_RATE_LIMIT per client address, as registration. Starts are counted per client address
// (auth/login-limiter.ts countOidcStart: LOGIN_IP_RATE_LIMIT per LOGIN_RATE_WINDOW_SEC), each writing
// a state row; states expire after OIDC_STATE_TTL_SEC and every start deletes the expired ones.
// The claims a provider passes on from what its user typed get registration's checks: the `name`
// claim is cleaned into a display name (http/validation.ts toDisplayText; refusing it would refuse a
// legitimate sign-in), the username derived passes registration's rules, an e-mail address only
// counts if it is one by a provider's rule (providerAddress: looser than registration's, which refuses
// IDN domains and RFC 5322 atext; one with a control character, NUL included, counts as none), and a `sub` longer than OpenID's 255 characters or with a control character is refused 400.
// A sign-in finds the account by users.oidc_id (the ID token's `sub`) and opens a session exactly as
// password login does (auth/sessions.ts issueSession); a browser's navigation (Sec-Fetch-Mode:
// navigate) gets it as the web console's cookies (auth/browser-session.ts) and a 303 to /; an unknown identity creates an account when
// RegisterEnabled (with the invitation code given at start, as registration takes it), unless its
// e-mail address belongs to an existing account: that account must log in and bind (an identity
// provider asserting an address is not proof enough to take over an account that has it).
// The issuer's discovery is cached for DISCOVERY_TTL_MS; an http issuer is accepted on loopback only.
// Changing oidc.well_known to another issuer: subjects of different issuers may collide, so clear the
// accounts' oidc_id first.
import { createHash, randomBytes } from 'node:crypto';
import { domainToASCII } from 'node:url';
import * as oidc from 'openid-client';
import { z } from 'zod';
import { findUserById, insertAccount } from '../accounts/account-store.js';
import { type UserRow, toAccountSummary } from '../accounts/account-view.js';
import { ACCOUNT_STATUS } from '../accounts/roles.js';
import { bearerToken } from '../auth/require-user.js';
import { HOST_PREFIX, overHttps, setSessionCookies } from '../auth/browser-session.js';
import { countOidcStart, countRegistration } from '../auth/login-limiter.js';
import { hashCredential, issueSession, lockIssuer, resolveSession } from '../auth/sessions.js';
import { findUserByEmail, lockEmailAddress } from '../email/email-codes.js';
import type { ConsoleContext } from '../context.js';
import type { Api } from '../http/api.js';
import type { FastifyRequest } from 'fastify';
import { ok } from '../http/envelope.js';
import { ConsoleError } from '../http/errors.js';
import { loginDataSchema } from '../http/schemas.js';
import { toDisplayText, usernameSchema } from '../http/validation.js';
import { isLoopbackHost, loadOptionView, type Options } from '../options/option-catalogue.js';
import { afterConsoleCredit, type RecordedCredit } from '../ledger/console-ledger.js';
import { acceptInvitation, AFF_CODE_MAX_LENGTH, creditNewAccount } from '../referrals/referrals.js';
import { loadRegistrationPolicy } from '../registration/registration-policy.js';

export const OIDC_STATE_TTL_SEC = 600;
/** OpenID Connect Core 1.0, 2: a `sub` "MUST NOT exceed 255 ASCII characters in length". */
export const OIDC_SUBJECT_MAX_LENGTH = 255;
/** users.display_name as registration bounds it (displayText(50)). */
const DISPLAY_NAME_MAX = 50;
const DISCOVERY_TTL_MS = 5 * 60_000;
const DISCOVERY_TIMEOUT_SEC = 10;

export const oidcStartQuery = z.object({
  aff_code: z.string({ error: 'must be a string' }).max(AFF_CODE_MAX_LENGTH, { error: `must be at most ${AFF_CODE_MAX_LENGTH} characters` }).optional(),
});
export const oidcCallbackQuery = z.object({
  code: z.string({ error: 'must be a string' }).min(1, { error: 'is required' }).max(2048, { error: 'must be at most 2,048 characters' }),
  state: z.string({ error: 'must be a string' }).min(1, { error: 'is required' }).max(512, { error: 'must be at most 512 characters' }),
  iss: z.string().max(2048).optional(),
  session_state: z.string().max(2048).optional(),
});

interface OidcSettings {
  issuer: string;
  clientId: string;
  clientSecret: string;
  allowedDomains: string[];
  redirectUri: string;
}

/** Whether sign-on can start: enabled, with an issuer and a client id (GET /api/status says it too). */
export function oidcConfigured(o: Options): boolean {
  return o.get<boolean>('oidc.enabled') && o.get<string>('oidc.well_known') !== '' && o.get<string>('oidc.client_id') !== '';
}

async function loadOidcSettings(ctx: ConsoleContext): Promise<OidcSettings> {
  const o = await loadOptionView(ctx.sql);
  const issuer = o.get<string>('oidc.well_known');
  const clientId = o.get<string>('oidc.client_id');
  if (!oidcConfigured(o)) throw new ConsoleError('FEATURE_DISABLED', 'OpenID Connect sign-on is not enabled');
  return {
    issuer,
    clientId,
    clientSecret: o.get<string>('oidc.client_secret'),
    // In the ASCII (punycode) form, as addresses are compared; an entry that is no host name stays as
    // written (lower case), matching nothing.
    allowedDomains: o.get<string>('oidc.allowed_email_domains').split(',').map((d) => d.trim()).filter(Boolean)
      .map((d) => asciiDomain(d) || d.toLowerCase()),
    redirectUri: `${o.get<string>('ServerAddress')}/api/oauth/oidc`,
  };
}

const discoveries = new Map<string, { config: oidc.Configuration; at: number }>();

async function discover(ctx: ConsoleContext, s: OidcSettings): Promise<oidc.Configuration> {
  const key = createHash('sha256').update(`${s.issuer}\0${s.clientId}\0${s.clientSecret}`).digest('hex');
  const cached = discoveries.get(key);
  if (cached && Date.now() - cached.at < DISCOVERY_TTL_MS) return cached.config;
  const url = new URL(s.issuer);
  const insecure = url.protocol === 'http:';
  if (insecure && !isLoopbackHost(url.hostname)) throw new ConsoleError('FEATURE_DISABLED', 'oidc.well_known must be an https URL (http only on loopback)');
  try {
    const config = await oidc.discovery(url, s.clientId, s.clientSecret || undefined, undefined, {
      timeout: DISCOVERY_TIMEOUT_SEC,
      // The ID token's signature checked against the provider's JWKS (openid-client checks only the
      // claims without it); an HS* (client secret) signed ID token is refused.
      execute: [oidc.enableNonRepudiationChecks, ...(insecure ? [oidc.allowInsecureRequests] : [])],
    });
    discoveries.set(key, { config, at: Date.now() });
    return config;
  } catch (err) {
    ctx.logger.warn({ oidcError: (err as Error).message, issuer: s.issuer }, 'OpenID Connect discovery failed');
    throw new ConsoleError('UPSTREAM_FAILED', 'the OpenID provider could not be reached (discovery failed)');
  }
}

const stateHash = (state: string): Buffer => createHash('sha256').update(state, 'utf8').digest();

/** The cookie that ties a sign-on to the browser that started it (over HTTPS `__Host-` prefixed). */
export const OIDC_BROWSER_COOKIE = 'console_oidc';
const BROWSER_BINDING = /^[A-Za-z0-9_-]{43}$/;

/** The browser cookie's name for this request: over HTTPS only the `__Host-` name is set and read. */
function browserCookieName(request: FastifyRequest): string {
  return overHttps(request) ? HOST_PREFIX + OIDC_BROWSER_COOKIE : OIDC_BROWSER_COOKIE;
}

function browserCookieOptions(request: FastifyRequest) {
  // `__Host-` needs Secure, Path=/ and no Domain; over plain HTTP the path stays the sign-on's own.
  return overHttps(request)
    ? { path: '/', httpOnly: true, sameSite: 'lax' as const, secure: true, maxAge: OIDC_STATE_TTL_SEC }
    : { path: '/api/oauth/oidc', httpOnly: true, sameSite: 'lax' as const, secure: false, maxAge: OIDC_STATE_TTL_SEC };
}

/** The first code points of `s` that fit in `max` UTF-16 units: never half a surrogate pair. */
function cutCodePoints(s: string, max: number): string {
  let out = '';
  for (const c of s) {
    if (out.length + c.length > max) break;
    out += c;
  }
  return out;
}

/**
 * A username for a new account from the provider's claims, passing registration's rules
 * (usernameSchema: 3–20 characters, no spaces or control characters, no mix of look-alike scripts);
 * a suffix when taken.
 */
function usernameFrom(claims: Record<string, unknown>, attempt: number): string {
  const raw = typeof claims.preferred_username === 'string' ? claims.preferred_username
    : typeof claims.email === 'string' ? claims.email.split('@')[0]! : '';
  // 13 UTF-16 units, so that `_` and the 6-digit suffix keep it within 20; cut between code points.
  let base = cutCodePoints(raw.replace(/[^\p{L}\p{N}_.-]/gu, ''), 13);
  // Refused by registration's rules (too short, mixing look-alike scripts): a neutral base instead.
  if (!usernameSchema.safeParse(base).success) base = 'oidc';
  const name = attempt === 0 ? base : `${base}_${randomBytes(3).toString('hex')}`;
  return usernameSchema.safeParse(name).success ? name : `oidc_${randomBytes(3).toString('hex')}`;
}

/** The `name` claim as a display name (registration's displayText, cleaned rather than refused); undefined: the username. */
function displayNameFrom(claims: Record<string, unknown>): string | undefined {
  return typeof claims.name === 'string' ? toDisplayText(claims.name, DISPLAY_NAME_MAX) || undefined : undefined;
}

/** A control character (NUL among them; Postgres text cannot hold NUL) or a lone surrogate. */
const CONTROL = /[\p{Cc}\p{Cs}]/u;

/**
 * The ID token's `sub` as the account's oidc_id: refused (400) when it is longer than OpenID allows
 * (an 8,000-character one did not fit the unique index, and was answered 409 "was just bound") or
 * holds a control character (a NUL answered 500).
 */
function subjectOf(claims: Record<string, unknown>): string {
  const sub = typeof claims.sub === 'string' ? claims.sub : '';
  if (sub === '' || sub.length > OIDC_SUBJECT_MAX_LENGTH || CONTROL.test(sub)) {
    throw new ConsoleError('VALIDATION_FAILED',
      `the sign-on identity's subject (the ID token's sub) is longer than ${OIDC_SUBJECT_MAX_LENGTH} characters or contains control characters; this provider cannot be used for sign-on`);
  }
  return sub;
}

/**
 * The e-mail address the claims assert, if it is one (providerAddress); else ''. One with a control
 * character (a NUL answered 500) is no address either, as before: never stored, never a domain, and
 * the identity still signs in (its account is found by oidc_id, not by the address).
 */
function emailOf(ctx: ConsoleContext, claims: Record<string, unknown>, subject: string): string {
  if (typeof claims.email !== 'string') return '';
  if (CONTROL.test(claims.email)) {
    ctx.logger.warn({ oidcSubject: subject }, 'the sign-on identity\'s e-mail claim contains control characters: taken as no address');
    return '';
  }
  return providerAddress(claims.email) ? claims.email : '';
}

/** A host name in its ASCII form: dot-separated LDH labels of 1–63, at least two, the last not all digits. */
const LDH_LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
function isHostName(ascii: string): boolean {
  if (ascii.length === 0 || ascii.length > 253) return false;
  const labels = ascii.split('.');
  return labels.length >= 2 && labels.every((l) => LDH_LABEL.test(l)) && !/^[0-9]+$/.test(labels[labels.length - 1]!);
}

/**
 * A domain in its ASCII (punycode, lower-case) form, as node:url's domainToASCII makes it
 * (`münchen.de` → `xn--mnchen-3ya.de`); '' when it is not a valid host name.
 */
export function asciiDomain(domain: string): string {
  const ascii = domainToASCII(domain);
  return isHostName(ascii) ? ascii : '';
}

/**
 * An address an identity provider asserts, by a looser rule than registration's (whose z.email()
 * refuses internationalised domains, even in punycode, and RFC 5322 atext such as `~ & = # ! / %`):
 * a plain address (isPlainAddress: one `@`, no white space, quotes or brackets), a local part without
 * control or invisible formatting characters, and a domain whose ASCII form is a valid host name.
 */
export function providerAddress(email: string): boolean {
  if (!isPlainAddress(email)) return false;
  const at = email.indexOf('@');
  const local = email.slice(0, at);
  return local !== '' && !/[\p{C}\p{Z}]/u.test(local) && asciiDomain(email.slice(at + 1)) !== '';
}

/**
 * The unique violation (23505) on users.oidc_id: the identity bound to another account meanwhile.
 * Postgres names the same index on other errors (an index row too large, 54000), which are not that.
 */
export function isOidcIdConflict(err: unknown): boolean {
  const e = err as { code?: string; constraint_name?: string } | null;
  return e?.code === '23505' && e.constraint_name === 'users_oidc_id';
}

/**
 * A plain address: one `@`, no white space, quotes, comments or brackets (`x@corp.test@evil.org` or
 * `"x@corp.test"@evil.org` are not, whatever a provider marks verified).
 */
const PLAIN_ADDRESS = /^[^\s@"(),:;<>[\]\\]+@[^\s@"(),:;<>[\]\\]+$/u;
export const isPlainAddress = (email: string): boolean => email.length <= 254 && PLAIN_ADDRESS.test(email);

function assertAllowedDomain(s: OidcSettings, email: string, verified: boolean): void {
  if (s.allowedDomains.length === 0) return;
  // Refused before the domain is read: the text after the first `@` of `x@corp.test@evil.org` passed.
  // Compared in the ASCII (punycode) form, as the list is: `münchen.de` is `xn--mnchen-3ya.de`.
  const domain = isPlainAddress(email) ? asciiDomain(email.slice(email.indexOf('@') + 1)) : '';
  if (!verified || domain === '' || !s.allowedDomains.includes(domain)) {
    throw new ConsoleError('INSUFFICIENT_ROLE', 'this sign-on identity has no verified e-mail address in an allowed domain (oidc.allowed_email_domains)');
  }
}

export function registerOidcRoutes(api: Api, ctx: ConsoleContext): void {
  const { sql } = ctx;

  api.route({
    method: 'GET', path: '/api/oauth/oidc/start', tag: 'account: sign-on', access: 'public', query: oidcStartQuery,
    data: z.object({ authorization_url: z.string() }),
    summary: 'Start OpenID Connect sign-on: the provider URL to send the browser to (PKCE, state, nonce); with a console credential, binds the caller\'s account',
    description: 'The state is valid 10 minutes, once. aff_code is applied if the sign-on creates an account. ' +
      'At most LOGIN_IP_RATE_LIMIT (30) starts per client address per LOGIN_RATE_WINDOW_SEC (60 s); then 429 with Retry-After.',
    errors: ['FEATURE_DISABLED', 'UPSTREAM_FAILED', 'RATE_LIMITED'],
  }, async ({ query, request, reply }) => {
    const s = await loadOidcSettings(ctx);
    // Each start writes a state row: counted per client address before anything is written.
    await countOidcStart(ctx, request.ip);
    const config = await discover(ctx, s);
    const bearer = bearerToken(request.headers.authorization);
    const binder = bearer ? await resolveSession(sql, bearer, ctx.now()) : undefined;
    if (bearer && !binder) throw new ConsoleError('INVALID_ACCESS_TOKEN');
    // The browser's binding is kept if it has one, so that sign-ons started in two tabs both finish.
    // Over HTTPS only the `__Host-` cookie counts: an unprefixed one may have been planted.
    const cookieName = browserCookieName(request);
    const had = request.cookies[cookieName];
    const browser = had !== undefined && BROWSER_BINDING.test(had) ? had : randomBytes(32).toString('base64url');
    reply.setCookie(cookieName, browser, browserCookieOptions(request));
    const state = oidc.randomState();
    const nonce = oidc.randomNonce();
    const verifier = oidc.randomPKCECodeVerifier();
    const now = ctx.now();
    await sql`DELETE FROM oidc_states WHERE expires_at <= ${now}`;
    await sql`
      INSERT INTO oidc_states (state_hash, code_verifier, nonce, bind_user_id, aff_code, expires_at, browser_hash, bind_credential_hash)
      VALUES (${stateHash(state)}, ${verifier}, ${nonce}, ${binder ? Number(binder.id) : 0}, ${query.aff_code ?? ''}, ${now + OIDC_STATE_TTL_SEC}, ${stateHash(browser)},
        ${binder ? hashCredential(bearer!) : null})`;
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: s.redirectUri,
      scope: 'openid email profile',
      response_type: 'code',
      state,
      nonce,
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    });
    return ok({ authorization_url: url.href });
  });

  api.route({
    method: 'GET', path: '/api/oauth/oidc', tag: 'account: sign-on', access: 'public', query: oidcCallbackQuery, data: loginDataSchema,
    summary: 'The OpenID Connect redirect URI: signs in (a session token, as login), creates the account, or binds it (token empty); a browser navigation gets the web console\'s session cookies and a 303 to /',
    description: 'Signing in finds the account by oidc_id; an unknown identity creates an account when RegisterEnabled, unless its e-mail belongs ' +
      'to an account (409: log in and bind). oidc.allowed_email_domains, when set, needs a verified e-mail address in one of the domains.',
    errors: ['FEATURE_DISABLED', 'UPSTREAM_FAILED', 'INVALID_CODE', 'VALIDATION_FAILED', 'STATE_CONFLICT', 'ACCOUNT_BANNED', 'INSUFFICIENT_ROLE', 'RATE_LIMITED'],
  }, async ({ request, reply }) => {
    // A browser arriving from the provider (a top-level navigation) goes back to the web console,
    // signed in by its session cookie; an API client reads the JSON answer.
    const browser = request.headers['sec-fetch-mode'] === 'navigate';
    const s = await loadOidcSettings(ctx);
    const config = await discover(ctx, s);
    const params = new URL(request.url, 'http://callback').searchParams;
    const now = ctx.now();
    // Used once, and only by the browser that started it (its cookie): another browser leaves it be.
    const binding = request.cookies[browserCookieName(request)] ?? '';
    const [pending] = await sql<{ code_verifier: string; nonce: string; bind_user_id: number; aff_code: string; bind_credential_hash: Buffer | null }[]>`
      DELETE FROM oidc_states WHERE state_hash = ${stateHash(params.get('state') ?? '')} AND expires_at > ${now}
        AND browser_hash = ${stateHash(binding)}
      RETURNING code_verifier, nonce, bind_user_id, aff_code, bind_credential_hash`;
    if (!pending) {
      throw new ConsoleError('INVALID_CODE', 'the sign-on state is unknown, expired or already used, or this browser did not start it; start again from this browser');
    }
    const currentUrl = new URL(s.redirectUri);
    currentUrl.search = params.toString();
    let claims: Record<string, unknown>;
    try {
      const tokens = await oidc.authorizationCodeGrant(config, currentUrl, {
        pkceCodeVerifier: pending.code_verifier,
        expectedState: params.get('state')!,
        expectedNonce: pending.nonce,
        idTokenExpected: true,
      }, { redirect_uri: s.redirectUri });
      claims = { ...tokens.claims() };
      if (claims.email === undefined && tokens.access_token) {
        const info = await oidc.fetchUserInfo(config, tokens.access_token, String(claims.sub));
        claims = { ...info, ...claims, email: info.email, email_verified: info.email_verified };
      }
    } catch (err) {
      // The provider's or the library's reason (a bad code, a failed check): never the tokens.
      ctx.logger.warn({ oidcError: (err as Error).message }, 'OpenID Connect code exchange refused');
      throw new ConsoleError('INVALID_CODE', 'the sign-on could not be completed (the provider refused the code or a check failed); start again');
    }
    const subject = subjectOf(claims);
    // An address that is not a plain one (two `@`, quotes), has a control character or no valid
    // domain is no address: never stored, never a domain.
    const email = emailOf(ctx, claims, subject);
    const verified = claims.email_verified === true;
    assertAllowedDomain(s, email, verified);

    const [owner] = await sql<UserRow[]>`SELECT * FROM users WHERE oidc_id = ${subject} AND deleted_at IS NULL`;
    if (Number(pending.bind_user_id) !== 0) {
      if (owner && Number(owner.id) !== Number(pending.bind_user_id)) {
        throw new ConsoleError('STATE_CONFLICT', 'this sign-on identity is already bound to another account');
      }
      const bindUserId = Number(pending.bind_user_id);
      const credentialHash = pending.bind_credential_hash;
      const bound = await sql.begin(async (tx) => {
        // Under the account's row lock, as a credential is issued: the session or access token that
        // started the binding still live and the account enabled. A password change, a reset or a ban
        // revokes under the same lock, so a binding a stolen credential started is refused after it.
        if (credentialHash === null || !(await lockIssuer(tx, bindUserId, { credentialHash }, ctx.now()))) return null;
        const [row] = await tx<UserRow[]>`UPDATE users SET oidc_id = ${subject} WHERE id = ${bindUserId} AND deleted_at IS NULL RETURNING *`;
        return row ?? null;
      }).catch((err: unknown) => {
        if (isOidcIdConflict(err)) throw new ConsoleError('STATE_CONFLICT', 'this sign-on identity is already bound to another account');
        throw err;
      });
      if (!bound) {
        const [exists] = await sql`SELECT 1 FROM users WHERE id = ${bindUserId} AND deleted_at IS NULL`;
        if (!exists) throw new ConsoleError('NOT_FOUND', 'account not found');
        throw new ConsoleError('INVALID_CODE', 'the sign-on could not be completed (the credential that started the binding was signed out or revoked, or the account is banned); log in and start again');
      }
      if (browser) return reply.redirect('/', 303);
      return ok({ ...toAccountSummary(bound), token: '' });
    }

    let user = owner;
    if (!user) user = await createOidcAccount(ctx, claims, subject, email, verified, pending.aff_code, request.ip);
    if (user.status !== ACCOUNT_STATUS.enabled) throw new ConsoleError('ACCOUNT_BANNED');
    // The same session as a password login.
    const token = await issueSession(sql, user.id, ctx.config.SESSION_TTL_SEC, ctx.now());
    // Banned or deleted while signing on.
    if (token === null) throw new ConsoleError('ACCOUNT_BANNED');
    if (browser) {
      setSessionCookies(reply, token, ctx.config.SESSION_TTL_SEC);
      return reply.redirect('/', 303);
    }
    return ok({ ...toAccountSummary(user), token });
  });
}

const EMAIL_EXISTS = 'an account with this e-mail address exists: log in to it and bind sign-on (GET /api/oauth/oidc/start with its credential)';

async function createOidcAccount(ctx: ConsoleContext, claims: Record<string, unknown>, subject: string, email: string, verified: boolean, affCode: string, clientIp: string): Promise<UserRow> {
  const { sql } = ctx;
  const policy = await loadRegistrationPolicy(sql);
  if (!policy.registerEnabled) throw new ConsoleError('FEATURE_DISABLED', 'registration is closed');
  if (email !== '') {
    const [taken] = await sql`SELECT 1 FROM users WHERE lower(email) = ${email.toLowerCase()} AND deleted_at IS NULL`;
    if (taken) throw new ConsoleError('STATE_CONFLICT', EMAIL_EXISTS);
  }
  // An account created by sign-on counts against REGISTER_RATE_LIMIT as a registration does (the
  // invitation rewards are paid per account); a sign-in of a known identity does not.
  await countRegistration(ctx, clientIp);
  // No password: the account signs in through its provider (a password can be set by a reset).
  const passwordHash = await ctx.passwords.hash(randomBytes(32).toString('base64url'));
  for (let attempt = 0; ; attempt++) {
    try {
      const { user, credits } = await sql.begin(async (tx) => {
        if (verified && email !== '') {
          // Checked again under the address's lock, as every writer of an address checks (one address,
          // one account): a binding or a registration of it may have committed since the check above.
          await lockEmailAddress(tx, email);
          if (await findUserByEmail(tx, email)) throw new ConsoleError('STATE_CONFLICT', EMAIL_EXISTS);
        }
        const created = await insertAccount(tx, {
          username: usernameFrom(claims, attempt),
          passwordHash,
          displayName: displayNameFrom(claims),
          email: verified ? email : '',
        });
        const [withOidc] = await tx<UserRow[]>`UPDATE users SET oidc_id = ${subject} WHERE id = ${created.id} RETURNING *`;
        const credits: RecordedCredit[] = await creditNewAccount(tx, withOidc!, policy.quotaForNewUser, ctx.now());
        if (affCode) credits.push(...await acceptInvitation(tx, withOidc!, affCode, { inviter: policy.quotaForInviter, invitee: policy.quotaForInvitee }, ctx.now()));
        return { user: withOidc!, credits };
      });
      for (const c of credits) await afterConsoleCredit(ctx, c);
      return (await findUserById(sql, Number(user.id))) ?? user;
    } catch (err) {
      if (err instanceof ConsoleError && err.code === 'USERNAME_TAKEN' && attempt < 5) continue;
      // The same identity's callback finishing twice at once: the unique oidc_id lets one account exist.
      if (isOidcIdConflict(err)) throw new ConsoleError('STATE_CONFLICT', 'this sign-on identity was just bound to an account; sign in again');
      throw err;
    }
  }
}
