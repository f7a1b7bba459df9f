import { useEffect, useRef, useState } from 'preact/hooks';
import { api, call } from '../api/client';
import type { TopupInfo, TopupOrder } from '../api/types';
import { Card, ErrorText, Field, Loading, Pager, splitFieldError, Table, useAction, useLoad } from '../components/ui';
import type { PageProps } from '../app';
import { creditDollars, dateTime, discountText, dollars, dollarsToQuota, money, QUOTA_PER_DOLLAR, quotaText, typedDollars } from '../format';

/** Where an epay request goes: its URL with the signed parameters (the provider accepts GET). */
export function epayRedirectUrl(url: string, params: Record<string, string>): string {
  const u = new URL(url);
  if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error('The payment page is no web address; nothing was charged.');
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.toString();
}

/**
 * The top-up link as an href, or undefined: only http(s), as a javascript: or data: link the server
 * once took (or a stored one from before it checked) would run in the console's origin when clicked.
 */
export function topUpHref(link: string | undefined): string | undefined {
  return link && /^https?:\/\//i.test(link) ? link : undefined;
}

/**
 * The top-up quantity typed in the Amount field: whole US dollars (the API takes an integer), read by
 * the strict dollar reader, so "1e3" is not $1,000 and "0x10" not $16; undefined when it is not one.
 */
export function topupAmount(text: string): number | undefined {
  const quota = dollarsToQuota(text);
  // "20.5" and "20.0000001" (which would round to 20) are not whole dollars; "20.00" is.
  if (quota === undefined || quota <= 0 || quota % QUOTA_PER_DOLLAR !== 0 || /\.\d*[1-9]/.test(text)) return undefined;
  const n = quota / QUOTA_PER_DOLLAR;
  return n <= MAX_TOPUP_DOLLARS ? n : undefined;
}

/** The largest quantity the API takes in one order (MAX_TOPUP_AMOUNT, console-api/payments/pricing.ts). */
export const MAX_TOPUP_DOLLARS = 1_000_000;

/** Why topupAmount() refused the text: too much is named as such, not as a malformed amount. */
export function topupAmountError(text: string): string {
  const typed = typedDollars(text);
  return typed !== undefined && typed > MAX_TOPUP_DOLLARS
    ? `must be at most $${MAX_TOPUP_DOLLARS.toLocaleString('en-US')}`
    : 'a whole number of dollars, such as 20';
}

/**
 * What the address of a return from a payment provider says (console-api/routes/topup.ts names both
 * return addresses): epay appends its signed notice, whose trade_status is TRADE_SUCCESS for a paid
 * order; the card provider comes back to the success URL, ?paid=1. 'unknown': back from a provider
 * whose return does not say. Only the outcome is read: the amount in the address is the buyer's to
 * edit, and the balance shown is the API's.
 */
export type PaymentReturn = 'paid' | 'not-paid' | 'unknown';

/** The parameters a provider adds to the return address: epay's notice, and the card provider's `paid`. */
const RETURN_PARAMS = ['paid', 'pid', 'trade_no', 'out_trade_no', 'type', 'name', 'money', 'trade_status', 'sign', 'sign_type'] as const;

/** The return outcome in a query string, or null when the page was not reached from a provider. */
export function paymentReturn(search: string): PaymentReturn | null {
  const q = new URLSearchParams(search);
  // The status console-api's epay notify credits (EPAY_TRADE_SUCCESS, console-api/payments/epay.ts).
  if (q.has('trade_status')) return q.get('trade_status') === 'TRADE_SUCCESS' ? 'paid' : 'not-paid';
  if (q.has('paid')) return q.get('paid') === '1' ? 'paid' : 'not-paid';
  // Names only a provider's notice has: `type` or `name` alone may be anyone's link.
  return ['out_trade_no', 'trade_no', 'sign'].some((k) => q.has(k)) ? 'unknown' : null;
}

/** The query string without a provider's return parameters ('' when nothing else is left). */
export function withoutReturnParams(search: string): string {
  const q = new URLSearchParams(search);
  for (const k of RETURN_PARAMS) q.delete(k);
  const rest = q.toString();
  return rest ? `?${rest}` : '';
}

const RETURN_NOTICE: Record<PaymentReturn, string> = {
  paid: 'Back from the payment provider: payment received. Your balance will update in a moment, once the provider confirms the payment to this service; the order below then reads Completed.',
  'not-paid': 'Back from the payment provider: it reports the payment as not completed (cancelled or failed). Nothing is added to your balance unless the provider confirms a payment; you can try again below.',
  unknown: 'Back from the payment provider: the order below is completed once the provider confirms the payment.',
};

/** The page's forms: a form's error stays only while it is the last one used (it is about what it sent). */
type TopupForm = 'redeem' | 'pay';

export function TopupPage({ account, refreshAccount }: PageProps) {
  const [lastUsed, setLastUsed] = useState<TopupForm | null>(null);
  // The server records an order before the provider answers: every pay attempt sent may add one to "Your orders".
  const [payAttempts, setPayAttempts] = useState(0);
  const info = useLoad(() => call(api.GET('/api/user/topup/info')), []);
  // Read before the parameters leave the address bar: a reload must not say it again.
  const [returned] = useState(() => paymentReturn(location.search));
  useEffect(() => {
    if (returned) history.replaceState(history.state, '', `${location.pathname}${withoutReturnParams(location.search)}${location.hash}`);
  }, []);
  // The balance of now (a payment may have been credited since sign-in), and again when an order completes.
  // eslint-disable-next-line react-hooks/exhaustive-deps
  useEffect(() => refreshAccount(), []);
  return (
    <>
      <div class="tiles"><div class="tile" role="group" aria-label="Balance"><div class="tile-label">Balance</div><div class="tile-value" data-testid="balance">{dollars(account.quota)}</div><div class="tile-detail">{account.quota.toLocaleString('en-US')} quota</div></div></div>
      {returned && <p class={returned === 'not-paid' ? 'notice' : 'ok'} role="status">{RETURN_NOTICE[returned]}</p>}
      {info.loading && <Loading what="Loading payment options" />}
      <ErrorText error={info.error} />
      {info.data && (info.data.enable_redemption ? <Redeem onRedeemed={refreshAccount} active={lastUsed === 'redeem'} onUse={() => setLastUsed('redeem')} /> : <p>Redemption codes are switched off.</p>)}
      {info.data && <OnlinePayment info={info.data} active={lastUsed === 'pay'} onUse={() => setLastUsed('pay')} onAttempted={() => setPayAttempts((n) => n + 1)} />}
      <Orders onCompleted={refreshAccount} afterReturn={returned !== null} payAttempts={payAttempts} />
    </>
  );
}

function Redeem({ onRedeemed, active, onUse }: { onRedeemed: () => void; active: boolean; onUse: () => void }) {
  const [code, setCode] = useState('');
  const [added, setAdded] = useState<number | null>(null);
  const action = useAction();
  const [fieldErrors, formError] = splitFieldError(active ? action.error : null, ['key']);
  return (
    <Card title="Redeem a code">
      <form class="inline" aria-label="Redeem a code" onSubmit={(e) => {
        e.preventDefault();
        onUse();
        setAdded(null);
        void action.run(async () => {
          const quota = await call(api.POST('/api/user/topup', { body: { key: code.trim() } }));
          setAdded(quota);
          setCode('');
          onRedeemed();
        });
      }}>
        <Field label="Redemption code" value={code} onValue={(v) => { setCode(v); action.setError(null); }} required autoComplete="off" error={fieldErrors.key ?? formError ?? undefined} />
        <button type="submit" class="primary" disabled={action.busy || !code.trim()}>{action.busy ? 'Redeeming…' : 'Redeem'}</button>
      </form>
      {added !== null && <p class="ok" role="status">Added {quotaText(added)} to your balance.</p>}
    </Card>
  );
}

/** `onAttempted`: after each payment request the server answered, whether it then failed or not. */
function OnlinePayment({ info, active, onUse, onAttempted }: { info: TopupInfo; active: boolean; onUse: () => void; onAttempted: () => void }) {
  const [amount, setAmount] = useState(String(info.amount_options[0] ?? info.min_topup ?? 1));
  // A quote is the price of one way of paying: QR code (Price) and card (CardpayUnitPrice) differ.
  const [price, setPrice] = useState<{ price: string; method: QuoteMethod; amount: number } | null>(null);
  const action = useAction();
  const online = info.enable_online_topup && info.pay_methods.length > 0;
  const card = info.enable_cardpay_topup;
  const [chosen, setChosen] = useState<QuoteMethod>('epay');
  // The Amount field's own refusal (not a whole number of dollars), checked before anything is sent.
  const [amountError, setAmountError] = useState<string | null>(null);
  const quoteMethod: QuoteMethod = online && card ? chosen : card ? 'card' : 'epay';
  if (!online && !card) {
    const link = topUpHref(info.topup_link);
    return (
      <Card title="Pay online">
        {link ? <p>Top up at <a href={link} rel="noopener noreferrer">{link}</a>.</p> : <p>Online payment is not enabled on this service.</p>}
      </Card>
    );
  }
  const n = topupAmount(amount);
  const [fieldErrors, formError] = splitFieldError(active ? action.error : null, ['amount', 'payment_method']);
  // Every button reads the amount first: one not typed as whole dollars is refused next to the field.
  const withAmount = (pay: (amount: number) => Promise<void>) => {
    onUse();
    if (n === undefined) {
      action.setError(null);
      setAmountError(topupAmountError(amount));
      return;
    }
    setAmountError(null);
    void action.run(() => pay(n));
  };
  const quote = (method: QuoteMethod) => withAmount(async (amount) => {
    setPrice(null);
    const quoted = method === 'card'
      ? await call(api.POST('/api/user/cardpay/amount', { body: { amount } }))
      : await call(api.POST('/api/user/amount', { body: { amount } }));
    setPrice({ price: quoted, method, amount });
  });
  const payEpay = (method: TopupInfo['pay_methods'][number]) => withAmount(async (amount) => {
    // Each method has its own minimum (pay_methods[].min_topup): said here, before the provider's page.
    const least = methodMinimum(info, method);
    if (amount < least) throw new Error(`amount: must be at least ${least} to pay with ${method.name}`);
    const d = await call(api.POST('/api/user/pay', { body: { amount, payment_method: method.type } }).finally(onAttempted));
    location.assign(epayRedirectUrl(d.url, d.params));
  });
  const payCard = () => withAmount(async (amount) => {
    if (amount < info.cardpay_min_topup) throw new Error(`amount: must be at least ${info.cardpay_min_topup} to pay by card`);
    const d = await call(api.POST('/api/user/cardpay/pay', { body: { amount } }).finally(onAttempted));
    // The server hands on only an https page (payments/cardpay.ts isCheckoutPage); checked here too,
    // as a javascript: link assigned to location would run in the console's origin.
    const link = topUpHref(d.pay_link);
    if (link === undefined) throw new Error('The card provider answered a checkout page that is no web address; nothing was charged.');
    location.assign(link);
  });
  const edit = (v: string) => {
    setAmount(v);
    setPrice(null);
    setAmountError(null);
    if (fieldErrors.amount ?? fieldErrors.payment_method) action.setError(null);
  };
  return (
    <Card title="Pay online">
      <div class="quick" role="group" aria-label="Amounts">
        {info.amount_options.map((a) => (
          <button type="button" key={a} aria-pressed={String(a) === amount} onClick={() => edit(String(a))}>
            {amountLabel(a, info.discount)}
          </button>
        ))}
      </div>
      <Field label="Amount (US dollars of credit)" inputMode="numeric" value={amount} onValue={edit}
        hint={minimumHint(info, online, card)} error={(active ? amountError : null) ?? fieldErrors.amount ?? fieldErrors.payment_method} />
      {online && card && (
        <fieldset class="choice">
          <legend>Price of paying</legend>
          {(['epay', 'card'] as const).map((m) => (
            <label key={m}><input type="radio" name="quote-method" value={m} checked={quoteMethod === m} onChange={() => { setChosen(m); setPrice(null); }} /> {m === 'card' ? 'by card' : 'by QR code'}</label>
          ))}
        </fieldset>
      )}
      <div class="buttons">
        <button type="button" disabled={action.busy} onClick={() => quote(quoteMethod)}>Show price</button>
        {online && info.pay_methods.map((m) => (
          <button type="button" key={m.type} class="primary" disabled={action.busy} onClick={() => payEpay(m)}>Pay with {m.name}</button>
        ))}
        {card && <button type="button" class="primary" disabled={action.busy} onClick={() => payCard()}>Pay by card</button>}
      </div>
      {price !== null && <p role="status">{priceText(price.price, price.amount, info.discount, price.method)}</p>}
      <ErrorText error={formError} />
      <p class="hint">You are sent to the payment provider's page and come back here once paid; the order appears below.</p>
    </Card>
  );
}

/** The least amount a QR-code method takes: its own minimum (the API sends it, as a string), never below MinTopUp. */
export function methodMinimum(info: Pick<TopupInfo, 'min_topup'>, method: Pick<TopupInfo['pay_methods'][number], 'min_topup'>): number {
  const own = Number(method.min_topup);
  return Number.isFinite(own) && own > info.min_topup ? own : info.min_topup;
}

/** "$1 of credit is 500,000 quota; minimum $1, with Alipay $50, by card $5": every minimum the page's buttons hold to. */
export function minimumHint(info: Pick<TopupInfo, 'min_topup' | 'pay_methods' | 'cardpay_min_topup'>, online: boolean, card: boolean): string {
  let own = '';
  for (const m of online ? info.pay_methods : []) {
    const least = methodMinimum(info, m);
    if (least !== info.min_topup) own += `, with ${m.name} $${least}`;
  }
  return `$1 of credit is 500,000 quota; minimum $${info.min_topup}${own}${card ? `, by card $${info.cardpay_min_topup}` : ''}`;
}

/**
 * The price coefficient of a quantity, as the API computes it (console-api/payments/pricing.ts): the
 * coefficient of the largest AmountDiscount key not above the quantity, 1 if none.
 */
export function discountFor(amount: number, table: Readonly<Record<string, number>>): number {
  let best: number | undefined;
  let coefficient = 1;
  for (const [k, v] of Object.entries(table)) {
    const threshold = Number(k);
    if (threshold <= amount && (best === undefined || threshold > best)) {
      best = threshold;
      coefficient = v;
    }
  }
  return coefficient;
}

/** A quick amount: "$20", "$20 (5% off)". */
export function amountLabel(amount: number, table: Readonly<Record<string, number>>): string {
  const discount = discountText(discountFor(amount, table));
  return `$${amount}${discount ? ` (${discount})` : ''}`;
}

export type QuoteMethod = 'epay' | 'card';

/**
 * The quote of POST /api/user/amount (QR code: Price) or /api/user/cardpay/amount (card:
 * CardpayUnitPrice). Its money is in that provider's currency, which the API does not name (the
 * options are "money per unit of quantity"): so it says whose currency it is.
 */
export function priceText(price: string, amount: number, table: Readonly<Record<string, number>>, method: QuoteMethod = 'epay'): string {
  const discount = discountText(discountFor(amount, table));
  const paid = Number(price);
  const how = method === 'card' ? 'To pay by card' : 'To pay';
  const whose = method === 'card' ? "the card provider's currency" : "the payment provider's currency";
  return `${how}: ${Number.isFinite(paid) ? money(paid) : price} in ${whose}, for ${creditDollars(amount)} of credit${discount ? ` (${discount})` : ''}.`;
}

export function orderStatusText(status: string): string {
  return status === 'success' ? 'Completed' : status === 'pending' ? 'Awaiting payment' : status === 'expired' ? 'Expired' : status;
}

const ORDER_PAGE_SIZE = 10;

export function OrderTable({ items }: { items: TopupOrder[] }) {
  return (
    <>
      <Table>
        <thead><tr><th>Order number</th><th>Credit (US dollars)</th><th>Paid</th><th>Method</th><th>Provider</th><th>Status</th><th>Created</th><th>Completed</th></tr></thead>
        <tbody>
          {items.map((o) => (
            <tr key={o.id}>
              <td><code>{o.trade_no}</code></td><td class="amount">{creditDollars(o.amount)}</td><td class="amount">{money(o.money)}</td><td>{o.payment_method}</td><td>{o.payment_provider}</td>
              <td>{orderStatusText(o.status)}</td>
              <td>{dateTime(o.create_time)}</td><td>{dateTime(o.complete_time)}</td>
            </tr>
          ))}
        </tbody>
      </Table>
      <p class="hint">Credit is in US dollars (500,000 quota = $1). Paid is in the payment provider's currency, at the price this service sets for it.</p>
    </>
  );
}

/** A pending order younger than this is watched for its completion while the page is open... */
const WATCH_ORDERS_CREATED_WITHIN_SEC = 3600;
/** ...every WATCH_EVERY_MS, for at most WATCH_FOR_MS after the page opened. */
const WATCH_EVERY_MS = 3000;
const WATCH_FOR_MS = 180_000;

/**
 * Which of the orders `pending` held are now completed; updates `pending` with the orders still
 * awaiting payment.
 */
export function newlyCompleted(pending: Set<string>, items: readonly Pick<TopupOrder, 'trade_no' | 'status'>[]): string[] {
  const done: string[] = [];
  for (const o of items) {
    if (o.status === 'pending') pending.add(o.trade_no);
    else if (pending.delete(o.trade_no) && o.status === 'success') done.push(o.trade_no);
  }
  return done;
}

/** `payAttempts`: how many pay attempts this page sent; the list is read again after each. */
function Orders({ onCompleted, afterReturn, payAttempts }: { onCompleted: () => void; afterReturn: boolean; payAttempts: number }) {
  const [page, setPage] = useState(1);
  const [keyword, setKeyword] = useState('');
  const [search, setSearch] = useState('');
  const orders = useLoad(() => call(api.GET('/api/user/topup/self', { params: { query: { page, page_size: ORDER_PAGE_SIZE, ...(search ? { keyword: search } : {}) } } })), [page, search]);
  // A failed load keeps the previous answer (useLoad): its rows are not this search's, so none are shown.
  const shown = orders.error ? undefined : orders.data;
  // Back from the provider, its confirmation may come a moment later: a recent order awaiting payment
  // is read again until it completes, and the balance with it.
  // Read in place (no "Loading"): the list stays on screen while the new order is fetched.
  // The new order is the newest: shown on the first page of every order, where a later page or a
  // search would leave it out (those change the query, which reads the list again by itself).
  useEffect(() => {
    if (payAttempts === 0) return;
    if (page === 1 && search === '') orders.refresh();
    else { setPage(1); setSearch(''); setKeyword(''); }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [payAttempts]);
  const pending = useRef(new Set<string>());
  const opened = useRef(Date.now());
  const firstRead = useRef(true);
  useEffect(() => {
    if (!orders.data) return;
    const items = orders.data.items;
    // Back from a provider, an order completed between the page's balance read and this list's was
    // never seen pending: the balance is read again once the list is, which shows it either way.
    const returnedNow = afterReturn && firstRead.current;
    firstRead.current = false;
    if (newlyCompleted(pending.current, items).length > 0 || returnedNow) onCompleted();
    const nowSec = Date.now() / 1000;
    const watch = items.some((o) => o.status === 'pending' && nowSec - o.create_time < WATCH_ORDERS_CREATED_WITHIN_SEC);
    if (!watch || Date.now() - opened.current > WATCH_FOR_MS) return;
    const timer = setTimeout(orders.refresh, WATCH_EVERY_MS);
    return () => clearTimeout(timer);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [orders.data]);
  return (
    <Card title="Your orders">
      <form class="filters" aria-label="Search orders" onSubmit={(e) => { e.preventDefault(); setPage(1); setSearch(keyword.trim()); }}>
        <Field label="Order number contains" value={keyword} onValue={setKeyword} />
        <button type="submit">Search</button>
      </form>
      {orders.loading && <Loading what="Loading orders" />}
      <ErrorText error={orders.error} />
      {shown && (shown.items.length === 0 ? page === 1 && <p>No orders.</p> : <OrderTable items={shown.items} />)}
      {shown && <Pager page={page} pageSize={ORDER_PAGE_SIZE} total={shown.total} onPage={setPage} label="Order pages" />}
    </Card>
  );
}
