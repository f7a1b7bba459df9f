// A local stand-in for an epay ("易支付") gateway, for tests and `make run`. It implements the
// merchant side of the protocol independently of console-api (so a test exercises real
// interoperability, not one module talking to itself):
//
//   GET|POST /submit.php   the purchase form {pid, type, out_trade_no, notify_url, return_url, name,
//                          money, sign, sign_type}. The signature is checked with the merchant key
//                          (md5 of the sorted k=v&... string followed by the key). A valid purchase is
//                          "paid" at once (autoPay, the default): the sandbox calls notify_url with the
//                          signed notice and answers 302 to return_url once the merchant said
//                          `success` (or after `notifyAttempts` tries). A bad signature answers 400.
//   GET /api/orders        the sandbox's orders as JSON (for a look at what happened).
//
// Tests can also re-send a notice (`notify`) or send a forged one (`notify(order, {forge: true})`).
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';

export interface EpaySandboxOptions {
  pid: string;
  key: string;
  host?: string;
  /** 0 (default): a free port. */
  port?: number;
  /** Pay every valid purchase at once (default true). */
  autoPay?: boolean;
  /** Notify tries before giving up (default 3). */
  notifyAttempts?: number;
}

export interface EpayOrder {
  trade_no: string;
  out_trade_no: string;
  type: string;
  name: string;
  money: string;
  notify_url: string;
  return_url: string;
  status: 'unpaid' | 'paid' | 'notified';
  /** Answers of the merchant to each notify: `<status> <body>`. */
  notifyAnswers: string[];
}

export interface EpaySandbox {
  readonly url: string;
  readonly orders: Map<string, EpayOrder>;
  /** Sends (again) the payment notice of an order; returns the merchant's status and body. */
  notify(outTradeNo: string, opts?: { forge?: boolean; money?: string; method?: 'GET' | 'POST' }): Promise<{ status: number; body: string }>;
  close(): Promise<void>;
}

export function epaySandboxSign(params: Record<string, string>, key: string): string {
  const text = Object.keys(params)
    .filter((k) => k !== 'sign' && k !== 'sign_type' && params[k] !== '')
    .sort()
    .map((k) => `${k}=${params[k]}`)
    .join('&');
  return createHash('md5').update(text + key, 'utf8').digest('hex');
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function startEpaySandbox(opts: EpaySandboxOptions): Promise<EpaySandbox> {
  const orders = new Map<string, EpayOrder>();
  const attempts = opts.notifyAttempts ?? 3;

  const notice = (o: EpayOrder, money = o.money): Record<string, string> => {
    const params: Record<string, string> = {
      pid: opts.pid, trade_no: o.trade_no, out_trade_no: o.out_trade_no, type: o.type, name: o.name, money,
      trade_status: 'TRADE_SUCCESS',
    };
    return { ...params, sign: epaySandboxSign(params, opts.key), sign_type: 'MD5' };
  };

  const notify: EpaySandbox['notify'] = async (outTradeNo, o = {}) => {
    const order = orders.get(outTradeNo);
    if (!order) throw new Error(`no sandbox order ${outTradeNo}`);
    const params = notice(order, o.money);
    if (o.forge) params.sign = epaySandboxSign(params, `${opts.key}-wrong`);
    const qs = new URLSearchParams(params).toString();
    const res = (o.method ?? 'GET') === 'GET'
      ? await request(`${order.notify_url}?${qs}`, { method: 'GET' })
      : await request(order.notify_url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: qs });
    const body = await res.body.text();
    order.notifyAnswers.push(`${res.statusCode} ${body}`);
    if (res.statusCode === 200 && body.trim() === 'success' && !o.forge) order.status = 'notified';
    return { status: res.statusCode, body };
  };

  const server: Server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://sandbox');
      if (url.pathname === '/api/orders') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify([...orders.values()]));
        return;
      }
      if (url.pathname !== '/submit.php') {
        res.writeHead(404).end('not found');
        return;
      }
      const params: Record<string, string> = Object.fromEntries(url.searchParams);
      if (req.method === 'POST') for (const [k, v] of new URLSearchParams(await readBody(req))) params[k] = v;
      const required = ['pid', 'type', 'out_trade_no', 'notify_url', 'return_url', 'name', 'money', 'sign'];
      const missing = required.find((k) => !params[k]);
      if (missing) {
        res.writeHead(400, { 'content-type': 'text/plain' }).end(`missing ${missing}`);
        return;
      }
      if (params.pid !== opts.pid || params.sign !== epaySandboxSign(params, opts.key)) {
        res.writeHead(400, { 'content-type': 'text/plain' }).end('sign error');
        return;
      }
      let order = orders.get(params.out_trade_no!);
      if (!order) {
        order = {
          trade_no: `SBX${Date.now()}${randomBytes(4).toString('hex')}`, out_trade_no: params.out_trade_no!, type: params.type!,
          name: params.name!, money: params.money!, notify_url: params.notify_url!, return_url: params.return_url!,
          status: 'unpaid', notifyAnswers: [],
        };
        orders.set(order.out_trade_no, order);
      }
      if (opts.autoPay ?? true) {
        order.status = 'paid';
        for (let i = 0; i < attempts && (order.status as EpayOrder['status']) !== 'notified'; i++) {
          try {
            await notify(order.out_trade_no);
          } catch (err) {
            order.notifyAnswers.push(`error ${(err as Error).message}`);
          }
        }
      }
      const back = new URL(order.return_url);
      // As a real provider, the buyer is sent back with a signed notice only once the order is paid:
      // an unpaid order's redirect carrying one would hand the buyer a valid paid notice for free.
      if (order.status !== 'unpaid') for (const [k, v] of Object.entries(notice(order))) back.searchParams.set(k, v);
      res.writeHead(302, { location: back.toString() }).end();
    })().catch((err: unknown) => {
      res.writeHead(500).end(String(err));
    });
  });
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${opts.host ?? '127.0.0.1'}:${port}`,
    orders,
    notify,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
