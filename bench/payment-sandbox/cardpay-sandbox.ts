// A local stand-in for the card provider (a Stripe Checkout look-alike), for tests and `make run`.
// Written independently of console-api, so a test exercises the real protocol:
//
//   POST /v1/checkout/sessions   `Authorization: Bearer <apiSecret>`, form-encoded (Stripe's bracket
//                                notation) → {id, object: 'checkout.session', url, client_reference_id,
//                                amount_total, currency, payment_status: 'unpaid', metadata}
//   GET  /pay/:session_id        "the buyer pays": the session becomes paid, the sandbox POSTs the event
//                                checkout.session.completed to webhookUrl, signed with
//                                `Cardpay-Signature: t=<unix>,v1=<hex HMAC-SHA256(webhookSecret, t + '.' + body)>`,
//                                and answers 302 to success_url (after the webhook was answered).
//
// Tests can re-deliver an event (`deliver`) or send a forged one (`deliver(id, {forge: true})`).
import { createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';

export interface CardpaySandboxOptions {
  apiSecret: string;
  webhookSecret: string;
  /** Where events are delivered (the merchant's webhook endpoint). */
  webhookUrl: string;
  host?: string;
  port?: number;
}

export interface CardpaySession {
  id: string;
  object: 'checkout.session';
  url: string;
  client_reference_id: string | null;
  metadata: Record<string, string>;
  amount_total: number;
  currency: string;
  payment_status: 'unpaid' | 'paid';
  success_url: string;
  cancel_url: string;
  deliveries: string[];
}

export interface CardpaySandbox {
  readonly url: string;
  readonly sessions: Map<string, CardpaySession>;
  webhookUrl: string;
  /** Delivers checkout.session.completed for a paid session (again); returns the merchant's answer. */
  deliver(sessionId: string, opts?: { forge?: boolean; amountTotal?: number; timestamp?: number }): Promise<{ status: number; body: string }>;
  close(): Promise<void>;
}

export function cardpaySandboxSignature(secret: string, t: number, body: string): string {
  return `t=${t},v1=${createHmac('sha256', secret).update(`${t}.${body}`, 'utf8').digest('hex')}`;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function startCardpaySandbox(opts: CardpaySandboxOptions): Promise<CardpaySandbox> {
  const sessions = new Map<string, CardpaySession>();
  let base = '';
  const sandbox: CardpaySandbox = {
    get url() { return base; },
    sessions,
    webhookUrl: opts.webhookUrl,
    async deliver(sessionId, o = {}) {
      const s = sessions.get(sessionId);
      if (!s) throw new Error(`no sandbox session ${sessionId}`);
      const { deliveries: _d, success_url: _s, cancel_url: _c, ...object } = s;
      const event = {
        id: `evt_${randomBytes(12).toString('hex')}`,
        object: 'event',
        type: 'checkout.session.completed',
        created: Math.floor(Date.now() / 1000),
        data: { object: { ...object, amount_total: o.amountTotal ?? s.amount_total } },
      };
      const body = JSON.stringify(event);
      const t = o.timestamp ?? Math.floor(Date.now() / 1000);
      const signature = cardpaySandboxSignature(o.forge ? `${opts.webhookSecret}-wrong` : opts.webhookSecret, t, body);
      const res = await request(sandbox.webhookUrl, {
        method: 'POST', headers: { 'content-type': 'application/json', 'cardpay-signature': signature }, body,
      });
      const text = await res.body.text();
      s.deliveries.push(`${res.statusCode} ${text}`);
      return { status: res.statusCode, body: text };
    },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };

  const server: Server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://sandbox');
      const json = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      };
      if (req.method === 'POST' && url.pathname === '/v1/checkout/sessions') {
        if (req.headers.authorization !== `Bearer ${opts.apiSecret}`) {
          json(401, { error: { type: 'invalid_request_error', message: 'Invalid API Key provided' } });
          return;
        }
        const form = new URLSearchParams(await readBody(req));
        const amount = Number(form.get('line_items[0][price_data][unit_amount]')) * Number(form.get('line_items[0][quantity]') ?? '1');
        if (!Number.isInteger(amount) || amount <= 0) {
          json(400, { error: { type: 'invalid_request_error', message: 'line_items[0][price_data][unit_amount] is required' } });
          return;
        }
        const metadata: Record<string, string> = {};
        for (const [k, v] of form) {
          const m = /^metadata\[(.+)\]$/.exec(k);
          if (m) metadata[m[1]!] = v;
        }
        const id = `cs_test_${randomBytes(12).toString('hex')}`;
        const session: CardpaySession = {
          id, object: 'checkout.session', url: `${base}/pay/${id}`, client_reference_id: form.get('client_reference_id'),
          metadata, amount_total: amount, currency: form.get('line_items[0][price_data][currency]') ?? 'usd',
          payment_status: 'unpaid', success_url: form.get('success_url') ?? '', cancel_url: form.get('cancel_url') ?? '',
          deliveries: [],
        };
        sessions.set(id, session);
        const { deliveries: _d, ...view } = session;
        json(200, view);
        return;
      }
      const pay = /^\/pay\/(cs_test_[0-9a-f]+)$/.exec(url.pathname);
      if (req.method === 'GET' && pay) {
        const s = sessions.get(pay[1]!);
        if (!s) {
          json(404, { error: { type: 'invalid_request_error', message: 'No such checkout session' } });
          return;
        }
        s.payment_status = 'paid';
        try {
          await sandbox.deliver(s.id);
        } catch (err) {
          s.deliveries.push(`error ${(err as Error).message}`);
        }
        res.writeHead(302, { location: s.success_url || '/' }).end();
        return;
      }
      json(404, { error: { type: 'invalid_request_error', message: 'Unrecognized request URL' } });
    })().catch((err: unknown) => json500(res, err));
  });
  const json500 = (res: import('node:http').ServerResponse, err: unknown) => {
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
    res.end(String(err));
  };
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', resolve));
  base = `http://${opts.host ?? '127.0.0.1'}:${(server.address() as AddressInfo).port}`;
  return sandbox;
}
