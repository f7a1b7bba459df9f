// An e-mail address with a "Send code" button beside it: the 6-digit code console-api mails
// (GET /api/verification for registration and binding, GET /api/reset_password for a password reset),
// which the form's "Verification code" field then takes.
import { api, call } from '../api/client';
import { Field, splitFieldError, useAction } from './ui';
import { useState } from 'preact/hooks';

export type CodePurpose = 'register' | 'bind' | 'reset';

export function EmailWithCode({ email, onEmail, purpose, error, label = 'E-mail address' }: {
  email: string;
  onEmail: (v: string) => void;
  purpose: CodePurpose;
  /** The form's error about the address (from its own submission). */
  error?: string | undefined;
  label?: string;
}) {
  const send = useAction();
  // The address the last code went to: the confirmation is about it, and goes once the field changes.
  const [sentTo, setSentTo] = useState<string | null>(null);
  const [fe, rest] = splitFieldError(send.error, ['email']);
  const sendCode = () => {
    const address = email.trim();
    if (address === '') { send.setError('email: type the e-mail address first'); return; }
    void send.run(async () => {
      setSentTo(null);
      if (purpose === 'reset') await call(api.GET('/api/reset_password', { params: { query: { email: address } } }));
      else await call(api.GET('/api/verification', { params: { query: { email: address, purpose } } }));
      setSentTo(address);
    });
  };
  return (
    <div class="email-code">
      <div class="inline">
        <Field label={label} type="email" autoComplete="email" value={email} required maxLength={254}
          onValue={(v) => { onEmail(v); send.setError(null); }} error={fe.email ?? rest ?? error} />
        <button type="button" disabled={send.busy} onClick={sendCode}>{send.busy ? 'Sending…' : 'Send code'}</button>
      </div>
      {sentTo !== null && sentTo === email.trim() && (
        <p class="ok" role="status">
          {purpose === 'reset'
            ? `If an account has the address ${sentTo}, a reset code was sent to it. It is valid for 10 minutes.`
            : `A code was sent to ${sentTo}. It is valid for 10 minutes.`}
        </p>
      )}
    </div>
  );
}
