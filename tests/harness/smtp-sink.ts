// A local SMTP server for tests (smtp-server): accepts every message on 127.0.0.1 at a free port,
// without TLS or authentication, and keeps what it received. Never a real provider.
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import type { Sql } from '../../infra/postgres/client.js';

export interface SunkMail {
  from: string;
  to: string[];
  /** The raw message (headers and body). */
  raw: string;
}

export interface SmtpSink {
  port: number;
  messages: SunkMail[];
  /** Resolves with the first message to `to` received after the call, or from those already kept. */
  next(to: string, timeoutMs?: number): Promise<SunkMail>;
  /** Refuse (451) every message while true: a provider failing. */
  failing: boolean;
  close(): Promise<void>;
}

export async function startSmtpSink(): Promise<SmtpSink> {
  const messages: SunkMail[] = [];
  const waiters: { to: string; resolve: (m: SunkMail) => void }[] = [];
  const sink: SmtpSink = {
    port: 0,
    messages,
    failing: false,
    next(to, timeoutMs = 10_000) {
      const seen = messages.find((m) => m.to.includes(to.toLowerCase()));
      if (seen) {
        messages.splice(messages.indexOf(seen), 1);
        return Promise.resolve(seen);
      }
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no e-mail to ${to} within ${timeoutMs} ms`)), timeoutMs);
        waiters.push({ to: to.toLowerCase(), resolve: (m) => { clearTimeout(timer); resolve(m); } });
      });
    },
    close: () => new Promise((r) => server.close(() => r())),
  };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        if (sink.failing) return callback(Object.assign(new Error('try again later'), { responseCode: 451 }));
        const mail: SunkMail = {
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address.toLowerCase()),
          raw: Buffer.concat(chunks).toString('utf8'),
        };
        const w = waiters.findIndex((x) => mail.to.includes(x.to));
        if (w >= 0) waiters.splice(w, 1)[0]!.resolve(mail);
        else messages.push(mail);
        callback();
      });
    },
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  sink.port = (server.server.address() as AddressInfo).port;
  return sink;
}

/** The text body of a sunk message (quoted-printable soft breaks undone). */
export function mailText(m: SunkMail): string {
  const body = m.raw.slice(m.raw.indexOf('\r\n\r\n') + 4);
  return body.replace(/=\r\n/g, '').replace(/=([0-9A-F]{2})/g, (_s, h: string) => String.fromCharCode(parseInt(h, 16)));
}

/** Points the console's e-mail options (SMTPServer, SMTPPort, SMTPFrom) at the sink. */
export async function mailThroughSink(sql: Sql, sink: SmtpSink): Promise<void> {
  for (const [key, value] of [['SMTPServer', '127.0.0.1'], ['SMTPPort', String(sink.port)], ['SMTPFrom', 'gateway@example.test']] as const) {
    await sql`INSERT INTO options (key, value) VALUES (${key}, ${value}) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
  }
}
