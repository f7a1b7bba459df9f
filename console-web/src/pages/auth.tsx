import { useLayoutEffect, useState } from 'preact/hooks';
import { api, call } from '../api/client';
import { EmailWithCode } from '../components/email-code';
import { ErrorText, Field, splitFieldError, useAction } from '../components/ui';
import { linkClick } from '../router';
import { passwordRegistrationOpen, type ServiceStatus, useServiceStatus } from '../status';

export type AuthMode = 'login' | 'register' | 'reset';

const TITLES: Record<AuthMode, string> = { login: 'Log in', register: 'Register', reset: 'Reset password' };

export function AuthPage({ mode, onLoggedIn, notice }: { mode: AuthMode; onLoggedIn: () => void; notice?: string | undefined }) {
  // What the server offers (GET /api/status): registration open, an e-mail code needed, mail, sign-on.
  const status = useServiceStatus();
  return (
    <main class="auth">
      <h1>{TITLES[mode]}</h1>
      {notice && <p class="notice" role="status">{notice}</p>}
      {mode === 'reset' ? <ResetForm /> : <LoginOrRegister mode={mode} status={status} onLoggedIn={onLoggedIn} />}
      {status?.oidc_enabled && mode !== 'reset' && (mode === 'login' || status.register_enabled) && <SignOn mode={mode} />}
      <AuthLinks mode={mode} status={status} />
    </main>
  );
}

function LoginOrRegister({ mode, status, onLoggedIn }: { mode: 'login' | 'register'; status: ServiceStatus | null | undefined; onLoggedIn: () => void }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [again, setAgain] = useState('');
  // Before a Register press an empty repeat is only not typed yet, not an error to show.
  const [triedRegister, setTriedRegister] = useState(false);
  const [displayName, setDisplayName] = useState('');
  const [email, setEmail] = useState('');
  const [code, setCode] = useState('');
  // An invitation link is /register?aff=CODE (new-api's form).
  const [affCode, setAffCode] = useState(() => new URLSearchParams(location.search).get('aff') ?? '');
  const action = useAction();
  // An error is about the form it was given for: a refused login is not the Register form's.
  useLayoutEffect(() => { action.setError(null); setTriedRegister(false); }, [mode]);
  const [fieldErrors, formError] = splitFieldError(action.error, ['username', 'password', 'display_name', 'aff_code', 'email', 'verification_code']);
  const withEmail = mode === 'register' && status?.email_verification === true;

  // As Profile's "New password again": a typo in a new password would lock the new account out.
  const mismatch = mode === 'register' && again !== password && (again !== '' || triedRegister)
    ? again === '' ? 'type the password again' : 'the two passwords differ' : undefined;

  if (mode === 'register' && !passwordRegistrationOpen(status)) {
    return (
      <p class="notice" role="status">
        {status?.register_enabled && status.oidc_enabled
          ? 'Registration with a password is closed; an account can be created by signing in with OpenID Connect below.'
          : 'Registration is closed: new accounts cannot be created at the moment. Ask an administrator for an account.'}
      </p>
    );
  }

  const submit = (e: Event) => {
    e.preventDefault();
    if (mode === 'register') {
      setTriedRegister(true);
      if (again !== password) {
        action.setError(null);
        return;
      }
    }
    void action.run(async () => {
      if (mode === 'register') {
        await call(api.POST('/api/user/register', { body: {
          username, password, ...(displayName ? { display_name: displayName } : {}), ...(affCode.trim() ? { aff_code: affCode.trim() } : {}),
          ...(withEmail ? { email: email.trim(), verification_code: code.trim() } : {}),
        } }));
      }
      await call(api.POST('/api/user/login', { body: { username, password } }));
      onLoggedIn();
    });
  };

  return (
    <form onSubmit={submit} aria-label={TITLES[mode]}>
      <Field label="Username" value={username} onValue={setUsername} autoComplete="username" required error={fieldErrors.username} />
      <Field label="Password" type="password" value={password} onValue={setPassword} required
        autoComplete={mode === 'login' ? 'current-password' : 'new-password'} error={fieldErrors.password}
        hint={mode === 'register' ? '8 to 64 characters' : undefined} />
      {mode === 'register' && <Field label="Repeat password" type="password" value={again} onValue={setAgain} required autoComplete="new-password" error={mismatch} />}
      {withEmail && <EmailWithCode email={email} onEmail={setEmail} purpose="register" error={fieldErrors.email} />}
      {withEmail && <Field label="Verification code" value={code} onValue={setCode} required autoComplete="one-time-code" inputMode="numeric" maxLength={64}
        error={fieldErrors.verification_code ? 'type the code mailed to the address (press Send code first)' : undefined} hint="the 6-digit code mailed to the address" />}
      {mode === 'register' && <Field label="Display name" value={displayName} onValue={setDisplayName} maxLength={50} error={fieldErrors.display_name} hint="optional, at most 50 characters" />}
      {mode === 'register' && <Field label="Invitation code" value={affCode} onValue={setAffCode} error={fieldErrors.aff_code} hint="optional" />}
      <button type="submit" class="primary" disabled={action.busy}>{action.busy ? 'Please wait…' : TITLES[mode]}</button>
      <ErrorText error={formError} />
    </form>
  );
}

/** OpenID Connect sign-on: the API gives the provider's address (and ties the sign-on to this browser); the page goes there. */
function SignOn({ mode }: { mode: 'login' | 'register' }) {
  const action = useAction();
  const start = () => void action.run(async () => {
    const aff = mode === 'register' ? new URLSearchParams(location.search).get('aff')?.trim() : undefined;
    const { authorization_url } = await call(api.GET('/api/oauth/oidc/start', { params: { query: aff ? { aff_code: aff } : {} } }));
    location.assign(authorization_url);
  });
  return (
    <div class="buttons sign-on">
      <button type="button" disabled={action.busy} onClick={start}>{action.busy ? 'Please wait…' : 'Sign in with OpenID Connect'}</button>
      <ErrorText error={action.error} />
    </div>
  );
}

function AuthLinks({ mode, status }: { mode: AuthMode; status: ServiceStatus | null | undefined }) {
  // Until the status is read the login page offers no Register link (it may be closed).
  if (status === undefined && mode === 'login') return null;
  const canRegister = passwordRegistrationOpen(status) || (status?.register_enabled === true && status.oidc_enabled);
  return (
    <>
      {mode === 'login' && canRegister && <p>No account yet? <a href="/register" onClick={linkClick}>Register</a></p>}
      {mode === 'login' && status?.email_enabled && <p><a href="/reset" onClick={linkClick}>Forgot password?</a></p>}
      {mode !== 'login' && <p>{mode === 'register' ? 'Already registered? ' : 'Remembered it? '}<a href="/login" onClick={linkClick}>Log in</a></p>}
    </>
  );
}

/** A forgotten password: a code mailed to the account's address (GET /api/reset_password), then POST /api/user/reset. */
function ResetForm() {
  const [email, setEmail] = useState('');
  const [code, setCode] = useState('');
  const [password, setPassword] = useState('');
  const [again, setAgain] = useState('');
  const [done, setDone] = useState(false);
  const action = useAction();
  const [fe, formError] = splitFieldError(action.error, ['email', 'token', 'password']);
  const mismatch = again !== '' && again !== password ? 'the two passwords differ' : undefined;
  if (done) {
    return <p class="ok" role="status">Password changed; every session of the account was signed out. <a href="/login" onClick={linkClick}>Log in</a> with the new password.</p>;
  }
  return (
    <form aria-label="Reset password" onSubmit={(e) => {
      e.preventDefault();
      if (password !== again) return;
      void action.run(async () => {
        await call(api.POST('/api/user/reset', { body: { email: email.trim(), token: code.trim(), password } }));
        setDone(true);
      });
    }}>
      <p class="hint">A reset code is mailed to the address bound to the account.</p>
      <EmailWithCode email={email} onEmail={setEmail} purpose="reset" error={fe.email} />
      <Field label="Reset code" value={code} onValue={(v) => { setCode(v); action.setError(null); }} required autoComplete="one-time-code" maxLength={64}
        error={fe.token} hint="the code from the e-mail (copy and paste it)" />
      <Field label="New password" type="password" autoComplete="new-password" value={password} onValue={setPassword} required error={fe.password} hint="8 to 64 characters" />
      <Field label="New password again" type="password" autoComplete="new-password" value={again} onValue={setAgain} required error={mismatch} />
      <button type="submit" class="primary" disabled={action.busy}>{action.busy ? 'Please wait…' : 'Reset password'}</button>
      <ErrorText error={formError} />
    </form>
  );
}
