import { useState } from 'preact/hooks';
import { api, call } from '../../api/client';
import type { PageProps } from '../../app';
import { Card, ConfirmButton, ErrorText, Field, Loading, Pager, Select, splitFieldError, Table, useAction, useLoad } from '../../components/ui';
import type { TopupOrder } from '../../api/types';
import { creditDollars, dateTime, money, ROLE } from '../../format';
import { orderStatusText } from '../topup';

const PAGE_SIZE = 20;

/**
 * What is wrong with the Account id filter, before it is sent (the API takes decimal digits, an id of
 * at least 1; `Number("12a")` would have sent user_id=NaN); null when it is empty or an id.
 */
export function accountIdError(text: string): string | null {
  const t = text.trim();
  if (t === '') return null;
  if (!/^[0-9]+$/.test(t)) return 'must be a whole number';
  const n = Number(t);
  if (n < 1) return 'must be at least 1';
  if (!Number.isSafeInteger(n)) return `must be at most ${Number.MAX_SAFE_INTEGER}`;
  return null;
}

export function AdminTopupsPage({ account }: PageProps) {
  const [page, setPage] = useState(1);
  const [form, setForm] = useState({ keyword: '', userId: '', status: '' });
  const [applied, setApplied] = useState(form);
  const [userIdError, setUserIdError] = useState<string | null>(null);
  const orders = useLoad(() => call(api.GET('/api/user/topup', { params: { query: {
    p: page, page_size: PAGE_SIZE,
    ...(applied.keyword ? { keyword: applied.keyword } : {}),
    ...(applied.userId.trim() ? { user_id: Number(applied.userId.trim()) } : {}),
    ...(applied.status === 'pending' || applied.status === 'success' ? { status: applied.status } : {}),
  } } })), [page, applied]);
  const isRoot = account.role >= ROLE.root;
  // Orders carry no currency: the options say which one each provider's money is in (now).
  const options = useLoad(() => call(api.GET('/api/option/')), []);
  const option = (key: string) => options.data?.find((o) => o.key === key)?.value;
  const cardCurrency = option('CardpayCurrency')?.toUpperCase();
  const epayPrice = option('Price');
  const [apiErrors, listError] = splitFieldError(orders.error, ['keyword', 'user_id']);
  // Rows are shown only for the query that succeeded: after a failure, the previous rows would read
  // as the answer to the filters now shown.
  const shown = orders.error ? undefined : orders.data;
  return (
    <Card title="All top-up orders">
      <form class="filters" aria-label="Order filters" onSubmit={(e) => {
        e.preventDefault();
        const wrong = accountIdError(form.userId);
        setUserIdError(wrong);
        if (wrong) return;
        setPage(1); setApplied(form); orders.reload();
      }}>
        <Field label="Order number contains" value={form.keyword} onValue={(v) => setForm((s) => ({ ...s, keyword: v }))} error={apiErrors.keyword} />
        <Field label="Account id" inputMode="numeric" value={form.userId} onValue={(v) => { setForm((s) => ({ ...s, userId: v })); setUserIdError(null); }}
          error={userIdError ?? apiErrors.user_id} />
        <Select label="Status" value={form.status} onValue={(v) => setForm((s) => ({ ...s, status: v }))} options={[{ value: '', label: 'Any' }, { value: 'pending', label: 'Awaiting payment' }, { value: 'success', label: 'Completed' }]} />
        <button type="submit">Search</button>
      </form>
      {orders.loading && <Loading what="Loading orders" />}
      <ErrorText error={listError} />
      {shown && (shown.items.length === 0 ? page === 1 && <p>No orders.</p> : (
        <Table>
          <thead><tr><th>Order number</th><th>Account</th><th>Credit (US dollars)</th><th>Paid</th><th>Method</th><th>Provider</th><th>Status</th><th>Created</th><th>Completed</th>{isRoot && <th class="actions">Actions</th>}</tr></thead>
          <tbody>{shown.items.map((o) => (
            <tr key={o.id}>
              <td><code>{o.trade_no}</code></td><td>#{o.user_id}</td><td class="amount">{creditDollars(o.amount)}</td><td class="amount">{paidText(o, cardCurrency)}</td><td>{o.payment_method}</td><td>{o.payment_provider}</td>
              <td>{orderStatusText(o.status)}</td>
              <td>{dateTime(o.create_time)}</td><td>{dateTime(o.complete_time)}</td>
              {isRoot && <td class="actions">{o.status === 'pending' && <CompleteButton tradeNo={o.trade_no} onDone={orders.reload} />}</td>}
            </tr>
          ))}</tbody>
        </Table>
      ))}
      {shown && shown.items.length > 0 && (
        <p class="hint">
          Credit is in US dollars (500,000 quota = $1). Paid: card orders are in the card currency ({cardCurrency ?? 'the CardpayCurrency option'}, as set now);
          {' '}QR-code orders are in the currency of the Price option ({epayPrice ? `${epayPrice} per $1 of credit` : 'money per $1 of credit'}).
        </p>
      )}
      {shown && <Pager page={page} pageSize={PAGE_SIZE} total={shown.total} onPage={setPage} label="Order pages" />}
    </Card>
  );
}

/** An order's money, two decimals, with the card currency when the order is a card payment and it is known. */
export function paidText(o: Pick<TopupOrder, 'money' | 'payment_provider'>, cardCurrency: string | undefined): string {
  return o.payment_provider === 'cardpay' && cardCurrency ? `${money(o.money)} ${cardCurrency}` : money(o.money);
}

/** Root only: credit an order whose payment arrived outside the provider's callback. */
function CompleteButton({ tradeNo, onDone }: { tradeNo: string; onDone: () => void }) {
  const action = useAction();
  return (
    <>
      <ConfirmButton label="Mark paid" name={`Mark order ${tradeNo} paid`} confirm="Confirm: mark paid" keep="Cancel" busy={action.busy} danger={false}
        onConfirm={() => action.run(async () => { await call(api.POST('/api/user/topup/complete', { body: { trade_no: tradeNo } })); onDone(); })} />
      <ErrorText error={action.error} />
    </>
  );
}
