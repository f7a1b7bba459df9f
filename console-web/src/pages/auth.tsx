import { useLayoutEffect, useState } from 'preact/hooks';
import { api, call } from '../api/client';
import { ErrorText, Field, splitFieldError, useAction } from '../components/ui';
import { linkClick } from '../router';

export function AuthPage({ mode, onLoggedIn, notice }: { mode: 'login' | 'register'; onLoggedIn: () => void; notice?: string | undefined }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [again, setAgain] = useState('');
  // Before a Register press an empty repeat is only not typed yet, not an error to show.
  const [triedRegister, setTriedRegister] = useState(false);
  const [displayName, setDisplayName] = useState('');
  // An invitation link is /register?aff=CODE (new-api's form).
  const [affCode, setAffCode] = useState(() => new URLSearchParams(location.search).get('aff') ?? '');
  const action = useAction();
  // An error is about the form it was given for: a refused login is not the Register form's.
  useLayoutEffect(() => { action.setError(null); setTriedRegister(false); }, [mode]);
  const [fieldErrors, formError] = splitFieldError(action.error, ['username', 'password', 'display_name', 'aff_code']);

  // As Profile's "New password again": a typo in a new password would lock the new account out.
  const mismatch = mode === 'register' && again !== password && (again !== '' || triedRegister)
    ? again === '' ? 'type the password again' : 'the two passwords differ' : undefined;

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
        } }));
      }
      await call(api.POST('/api/user/login', { body: { username, password } }));
      onLoggedIn();
    });
  };

  return (
    <main class="auth">
      <h1>{mode === 'login' ? 'Log in' : 'Register'}</h1>
      {notice && <p class="notice" role="status">{notice}</p>}
      <form onSubmit={submit} aria-label={mode === 'login' ? 'Log in' : 'Register'}>
        <Field label="Username" value={username} onValue={setUsername} autoComplete="username" required error={fieldErrors.username} />
        <Field label="Password" type="password" value={password} onValue={setPassword} required
          autoComplete={mode === 'login' ? 'current-password' : 'new-password'} error={fieldErrors.password}
          hint={mode === 'register' ? '8 to 64 characters' : undefined} />
        {mode === 'register' && <Field label="Repeat password" type="password" value={again} onValue={setAgain} required autoComplete="new-password" error={mismatch} />}
        {mode === 'register' && <Field label="Display name" value={displayName} onValue={setDisplayName} maxLength={50} error={fieldErrors.display_name} hint="optional, at most 50 characters" />}
        {mode === 'register' && <Field label="Invitation code" value={affCode} onValue={setAffCode} error={fieldErrors.aff_code} hint="optional" />}
        <button type="submit" class="primary" disabled={action.busy}>{action.busy ? 'Please wait…' : mode === 'login' ? 'Log in' : 'Register'}</button>
        <ErrorText error={formError} />
      </form>
      <p>
        {mode === 'login'
          ? <>No account yet? <a href="/register" onClick={linkClick}>Register</a></>
          : <>Already registered? <a href="/login" onClick={linkClick}>Log in</a></>}
      </p>
    </main>
  );
}
