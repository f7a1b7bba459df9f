// Sending e-mail: verification codes and password resets (console), low-balance notices (billing).
// The SMTP settings are options (SMTPServer, SMTPPort, SMTPSSLEnabled, SMTPAccount, SMTPFrom,
// SMTPToken; new-api's names, super administrator only), read when a message is sent so that a change
// needs no restart. SMTPToken is stored sealed (core/options/option-secrets.ts). nodemailer speaks
// SMTP; a transport is built per message (these are rare and a pooled connection would hold a socket
// open to the provider for nothing).
import nodemailer from 'nodemailer';
import type { OptionSealer } from '../options/option-secrets.js';
import { loadOptions } from '../options/options-source.js';

type Queryable = Parameters<typeof loadOptions>[0];

export const SMTP_OPTION_KEYS = ['SMTPServer', 'SMTPPort', 'SMTPSSLEnabled', 'SMTPAccount', 'SMTPFrom', 'SMTPToken'] as const;

export interface SmtpSettings {
  host: string;
  port: number;
  secure: boolean;
  user: string;
  from: string;
  password: string;
}

export interface MailMessage {
  to: string;
  subject: string;
  text: string;
}

/** The SMTP settings of the options table, or undefined when SMTPServer is not set (e-mail is off). */
export async function loadSmtpSettings(sql: Queryable, secrets: OptionSealer): Promise<SmtpSettings | undefined> {
  const o = await loadOptions(sql, SMTP_OPTION_KEYS);
  const host = o.get('SMTPServer') ?? '';
  if (host === '') return undefined;
  const port = Number(o.get('SMTPPort') ?? '587');
  const user = o.get('SMTPAccount') ?? '';
  return {
    host,
    port: Number.isInteger(port) && port > 0 && port < 65536 ? port : 587,
    secure: o.get('SMTPSSLEnabled') === 'true' || port === 465,
    user,
    from: o.get('SMTPFrom') || user,
    // Opened when a message is sent: a token that cannot be opened fails that send, not every caller
    // that only asks whether mail is configured (password reset answers the same for every address).
    get password() { return secrets.open('SMTPToken', o.get('SMTPToken') ?? ''); },
  };
}

/** Sends one message; throws what the SMTP server answered (never the message text). */
export async function sendMail(s: SmtpSettings, m: MailMessage, timeoutMs = 10_000): Promise<void> {
  const transport = nodemailer.createTransport({
    host: s.host,
    port: s.port,
    secure: s.secure,
    auth: s.user !== '' ? { user: s.user, pass: s.password } : undefined,
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs,
    // nodemailer's own logger would print the message, verification codes included.
    logger: false,
    debug: false,
  });
  try {
    await transport.sendMail({ from: s.from || 'gateway@localhost', to: m.to, subject: m.subject, text: m.text });
  } finally {
    transport.close();
  }
}
