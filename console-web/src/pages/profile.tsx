import { useState } from 'preact/hooks';
import { api, call } from '../api/client';
import type { PageProps } from '../app';
import { EmailWithCode } from '../components/email-code';
import { Card, ConfirmButton, CopyButton, ErrorText, Field, splitFieldError, useAction } from '../components/ui';
import { useServiceStatus } from '../status';
import { count, dollars, dollarsError, dollarsInput, dollarsToQuota, quotaText, ROLE_NAMES } from '../format';

/**
 * The profile's forms: a form's confirmation, and its error, stay only while it is the last one used
 * (a refused name is not what the password form, used next, is about).
 */
type ProfileForm = 'aff' | 'name' | 'password' | 'token' | 'email';

export function ProfilePage({ account, refreshAccount }: PageProps) {
  const [lastUsed, setLastUsed] = useState<ProfileForm | null>(null);
  // The server revokes the access token with every password change: a token shown before one no longer works.
  const [passwordChanges, setPasswordChanges] = useState(0);
  // Binding an address needs mail (a code is sent to it): offered when the server has it.
  const status = useServiceStatus();
  return (
    <>
      <Card title="Account">
        <dl class="facts">
          <div><dt>Username</dt><dd>{account.username}</dd></div>
          <div><dt>Role</dt><dd>{ROLE_NAMES[account.role] ?? account.role}</dd></div>
          <div><dt>Group</dt><dd>{account.group}</dd></div>
          <div><dt>E-mail</dt><dd>{account.email || '—'}</dd></div>
          <div><dt>Invitation link</dt><dd><code>{`${location.origin}/register?aff=${account.aff_code}`}</code> <CopyButton text={`${location.origin}/register?aff=${account.aff_code}`} label="Copy link" /></dd></div>
          <div><dt>Invited accounts</dt><dd>{count(account.aff_count)}</dd></div>
          <div><dt>Referral quota</dt><dd>{quotaText(account.aff_quota)} (earned in all: {quotaText(account.aff_history_quota)})</dd></div>
        </dl>
        {account.aff_quota > 0 && <AffTransfer available={account.aff_quota} least={status?.aff_transfer_min_quota} onDone={refreshAccount} active={lastUsed === 'aff'} onUse={() => setLastUsed('aff')} />}
      </Card>
      <DisplayName current={account.display_name} onSaved={refreshAccount} active={lastUsed === 'name'} onUse={() => setLastUsed('name')} />
      {status?.email_enabled && <EmailBinding current={account.email} onBound={refreshAccount} active={lastUsed === 'email'} onUse={() => setLastUsed('email')} />}
      <PasswordChange active={lastUsed === 'password'} onUse={() => setLastUsed('password')} onChanged={() => setPasswordChanges((n) => n + 1)} />
      <AccessToken active={lastUsed === 'token'} onUse={() => setLastUsed('token')} passwordChanges={passwordChanges} />
    </>
  );
}

/** `least`: the smallest amount the server moves (GET /api/status), when known: said under the field and checked before sending. */
function AffTransfer({ available, least, onDone, active, onUse }: { available: number; least?: number; onDone: () => void; active: boolean; onUse: () => void }) {
  const [dollarsText, setDollarsText] = useState(dollarsInput(available));
  const action = useAction();
  const [local, setLocal] = useState<string | null>(null);
  const [fe, formError] = splitFieldError(active ? action.error : null, ['quota']);
  return (
    <form class="inline" aria-label="Move referral quota to the balance" onSubmit={(e) => {
      e.preventDefault();
      onUse();
      const quota = dollarsToQuota(dollarsText);
      if (quota === undefined || quota <= 0) { setLocal(dollarsError(dollarsText, 'a dollar amount above $0, such as 10 or 2.50')); return; }
      if (least !== undefined && quota < least) { setLocal(`At least ${dollars(least)} is moved at a time.`); return; }
      setLocal(null);
      void action.run(async () => {
        await call(api.POST('/api/user/aff_transfer', { body: { quota } }));
        onDone();
      });
    }}>
      <Field label="Referral quota to move (US dollars)" inputMode="decimal" value={dollarsText} onValue={(v) => { setDollarsText(v); setLocal(null); action.setError(null); }} error={(active ? local : null) ?? fe.quota ?? formError ?? undefined}
        hint={least !== undefined ? `at least ${dollars(least)}` : undefined} />
      <button type="submit" disabled={action.busy}>Move to balance</button>
    </form>
  );
}

function DisplayName({ current, onSaved, active, onUse }: { current: string; onSaved: () => void; active: boolean; onUse: () => void }) {
  const [name, setName] = useState(current);
  // The name saved last: "Saved." is about it, and goes once the field holds another.
  const [saved, setSaved] = useState<string | null>(null);
  const action = useAction();
  const [fe, formError] = splitFieldError(active ? action.error : null, ['display_name']);
  return (
    <Card title="Display name">
      <form class="inline" aria-label="Display name" onSubmit={(e) => {
        e.preventDefault();
        onUse();
        setSaved(null);
        const sent = name;
        void action.run(async () => { await call(api.PUT('/api/user/self', { body: { display_name: sent } })); setSaved(sent); onSaved(); });
      }}>
        <Field label="Display name" value={name} onValue={(v) => { setName(v); action.setError(null); }} maxLength={50} error={fe.display_name ?? formError ?? undefined} />
        <button type="submit" class="primary" disabled={action.busy}>Save name</button>
      </form>
      {active && saved !== null && saved === name && <p class="ok" role="status">Display name saved.</p>}
    </Card>
  );
}

function PasswordChange({ active, onUse, onChanged }: { active: boolean; onUse: () => void; onChanged: () => void }) {
  const [original, setOriginal] = useState('');
  const [next, setNext] = useState('');
  const [again, setAgain] = useState('');
  const [saved, setSaved] = useState(false);
  const action = useAction();
  const [fe, formError] = splitFieldError(active ? action.error : null, ['password', 'original_password']);
  const mismatch = again !== '' && again !== next ? 'the two new passwords differ' : undefined;
  return (
    <Card title="Password">
      <form aria-label="Change password" onSubmit={(e) => {
        e.preventDefault();
        onUse();
        setSaved(false);
        if (next !== again) return;
        void action.run(async () => {
          await call(api.PUT('/api/user/self', { body: { original_password: original, password: next } }));
          setSaved(true); setOriginal(''); setNext(''); setAgain('');
          onChanged();
        });
      }}>
        <Field label="Current password" type="password" autoComplete="current-password" value={original} onValue={(v) => { setOriginal(v); setSaved(false); if (fe.original_password) action.setError(null); }} required error={fe.original_password} />
        <Field label="New password" type="password" autoComplete="new-password" value={next} onValue={(v) => { setNext(v); setSaved(false); if (fe.password) action.setError(null); }} required error={fe.password} hint="8 to 64 characters" />
        <Field label="New password again" type="password" autoComplete="new-password" value={again} onValue={setAgain} required error={mismatch} />
        <button type="submit" class="primary" disabled={action.busy}>Change password</button>
        <ErrorText error={formError} />
      </form>
      {active && saved && <p class="ok" role="status">Password changed; your other sessions and access token were signed out.</p>}
    </Card>
  );
}

/** `passwordChanges`: how many times the password was changed on this page; a token issued before the last one is revoked. */
function AccessToken({ active, onUse, passwordChanges }: { active: boolean; onUse: () => void; passwordChanges: number }) {
  const [issued, setIssued] = useState<{ token: string; passwordChanges: number } | null>(null);
  const signedOut = issued !== null && issued.passwordChanges !== passwordChanges;
  const token = signedOut ? null : issued?.token;
  const [revoked, setRevoked] = useState<number | null>(null);
  const action = useAction();
  return (
    <Card title="Access token">
      <p>An access token lets scripts call this console's API (<code>Authorization: Bearer …</code>). Issuing one revokes the previous one.</p>
      <div class="buttons">
        <button type="button" disabled={action.busy} onClick={() => { onUse(); void action.run(async () => { setRevoked(null); setIssued({ token: await call(api.GET('/api/user/token')), passwordChanges }); }); }}>Issue access token</button>
        {/* Scripts using the token stop at once: asked first, as Delete is. */}
        <ConfirmButton label="Revoke access token" confirm="Confirm revoke" busy={action.busy}
          onConfirm={() => { onUse(); return action.run(async () => { setIssued(null); setRevoked((await call(api.DELETE('/api/user/token'))).revoked); }); }} />
      </div>
      {token && <p role="status"><code class="key">{token}</code> <CopyButton text={token} label="Copy token" /> Shown once.</p>}
      {signedOut && <p role="status">The access token was revoked by the password change; issue a new one for scripts.</p>}
      {revoked !== null && <p role="status">{revoked === 0 ? 'There was no access token.' : 'Access token revoked.'}</p>}
      <ErrorText error={active ? action.error : null} />
    </Card>
  );
}

/** Binds an address (new-api's "Bind e-mail"): a code mailed to it (GET /api/verification?purpose=bind), then POST /api/oauth/email/bind. */
function EmailBinding({ current, onBound, active, onUse }: { current: string; onBound: () => void; active: boolean; onUse: () => void }) {
  const [email, setEmail] = useState('');
  const [code, setCode] = useState('');
  const [password, setPassword] = useState('');
  const [bound, setBound] = useState<string | null>(null);
  const action = useAction();
  const [fe, formError] = splitFieldError(active ? action.error : null, ['email', 'code', 'original_password']);
  return (
    <Card title="E-mail address">
      <p>{current ? <>Bound address: <strong>{current}</strong>. Binding another replaces it; password reset codes go to the bound address.</> : 'No address is bound. A bound address can receive password reset codes.'}</p>
      <form aria-label="Bind e-mail address" onSubmit={(e) => {
        e.preventDefault();
        onUse();
        setBound(null);
        const address = email.trim();
        void action.run(async () => {
          // The address receives password reset codes: the API asks for the current password (an
          // account made by signing on with another service, which has none, binds within minutes of signing on).
          await call(api.POST('/api/oauth/email/bind', { body: { email: address, code: code.trim(), ...(password ? { original_password: password } : {}) } }));
          setBound(address); setCode(''); setPassword(''); onBound();
        });
      }}>
        <EmailWithCode email={email} onEmail={(v) => { setEmail(v); setBound(null); }} purpose="bind" label="New e-mail address" error={fe.email} />
        <Field label="Verification code" value={code} onValue={(v) => { setCode(v); action.setError(null); }} required autoComplete="one-time-code" inputMode="numeric" maxLength={64}
          error={fe.code} hint="the 6-digit code mailed to the new address" />
        <Field label="Current password" type="password" autoComplete="current-password" value={password}
          onValue={(v) => { setPassword(v); if (fe.original_password) action.setError(null); }} error={fe.original_password}
          hint="a bound address can reset the password; an account made by signing on with another service leaves this empty within 10 minutes of signing on" />
        <button type="submit" class="primary" disabled={action.busy}>Bind e-mail</button>
        <ErrorText error={formError} />
      </form>
      {active && bound !== null && <p class="ok" role="status">E-mail address {bound} bound.</p>}
    </Card>
  );
}
