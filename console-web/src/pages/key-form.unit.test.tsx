// @vitest-environment happy-dom
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { toLocalInput } from '../format';
import { EMPTY_KEY_FORM, formFromKey, KeyForm, keyChanges, keyInput } from './key-form';
import { KeysPage } from './keys';

// The API client takes fetch when it is created, on import: the stub has to be in place before.
const server = vi.hoisted(() => {
  const s: { handle?: (r: Request) => Promise<Response> } = {};
  vi.stubGlobal('fetch', (r: Request) => (s.handle ? s.handle(r) : Promise.reject(new Error('no fetch here'))));
  return s;
});

afterEach(cleanup);

const NOW = 1_800_000_000;

describe('keyInput', () => {
  it('a key that never expires with unlimited quota', () => {
    expect(keyInput({ ...EMPTY_KEY_FORM, name: '  ci  ' }, NOW)).toEqual({
      body: {
        name: 'ci', expired_time: -1, remain_quota: 0, unlimited_quota: true, model_limits_enabled: false,
        model_limits: '', allow_ips: '', group: '', cross_group_retry: false,
      },
    });
  });

  it('dollars become quota, the whitelist is normalised, cross-group retry only for auto', () => {
    const r = keyInput({
      ...EMPTY_KEY_FORM, name: 'k', unlimited: false, quotaDollars: '2.5', modelLimitsEnabled: true,
      modelLimits: ' claude-a, ,claude-b ', allowIps: ' 10.0.0.0/8 ', group: 'vip', crossGroupRetry: true,
    }, NOW);
    expect(r).toMatchObject({ body: { remain_quota: 1_250_000, unlimited_quota: false, model_limits: 'claude-a,claude-b', allow_ips: '10.0.0.0/8', group: 'vip', cross_group_retry: false } });
    expect(keyInput({ ...EMPTY_KEY_FORM, name: 'k', group: 'auto', crossGroupRetry: true }, NOW)).toMatchObject({ body: { cross_group_retry: true } });
  });

  it('names the field at fault', () => {
    expect(keyInput({ ...EMPTY_KEY_FORM, name: ' ' }, NOW)).toMatchObject({ field: 'name' });
    expect(keyInput({ ...EMPTY_KEY_FORM, name: 'x'.repeat(51) }, NOW)).toMatchObject({ field: 'name' });
    expect(keyInput({ ...EMPTY_KEY_FORM, name: 'k', neverExpires: false, expiresAt: '' }, NOW)).toMatchObject({ field: 'expiresAt' });
    expect(keyInput({ ...EMPTY_KEY_FORM, name: 'k', neverExpires: false, expiresAt: '2020-01-01T00:00' }, NOW)).toMatchObject({ field: 'expiresAt', error: 'must be in the future' });
    expect(keyInput({ ...EMPTY_KEY_FORM, name: 'k', unlimited: false, quotaDollars: '-1' }, NOW)).toMatchObject({ field: 'quotaDollars' });
    // $0 would make a key exhausted from the start; less than 1 quota ($0.000002) would be saved as $0.
    for (const zero of ['0', '0.00', '$0']) {
      expect(keyInput({ ...EMPTY_KEY_FORM, name: 'k', unlimited: false, quotaDollars: zero }, NOW), zero).toMatchObject({ field: 'quotaDollars', error: expect.stringMatching(/at least \$0\.000002/) });
    }
    expect(keyInput({ ...EMPTY_KEY_FORM, name: 'k', unlimited: false, quotaDollars: '0.0000001' }, NOW)).toMatchObject({ field: 'quotaDollars', error: expect.stringMatching(/^below \$0\.000002 \(1 quota\)/) });
    expect(keyInput({ ...EMPTY_KEY_FORM, name: 'k', unlimited: false, quotaDollars: '0.000002' }, NOW)).toMatchObject({ body: { remain_quota: 1 } });
    expect(keyInput({ ...EMPTY_KEY_FORM, name: 'k', modelLimitsEnabled: true, modelLimits: ' , ' }, NOW)).toMatchObject({ field: 'modelLimits' });
  });
});

describe('keyChanges', () => {
  const shown = {
    id: 5, user_id: 7, name: 'ci', key: 'sk-abcd********wxyz', status: 1, created_time: 1, accessed_time: 0, expired_time: -1,
    remain_quota: 1_000_000, unlimited_quota: false, used_quota: 0, model_limits_enabled: false, model_limits: '', allow_ips: null,
    group: '', cross_group_retry: false, rate_limit_rpm: 0, rate_limit_tpm: 0,
  };

  it('sends the quota only when its fields were edited, with the value shown', () => {
    const f = formFromKey(shown);
    expect(keyChanges(shown, { ...f, name: 'renamed' }, NOW)).toEqual({
      body: { name: 'renamed', model_limits_enabled: false, model_limits: '', allow_ips: '', group: '', cross_group_retry: false },
    });
    expect(keyChanges(shown, { ...f, quotaDollars: '1' }, NOW)).toMatchObject({ body: { remain_quota: 500_000, unlimited_quota: false, expected_remain_quota: 1_000_000 } });
    const unlimited = keyChanges(shown, { ...f, unlimited: true }, NOW);
    expect(unlimited).toMatchObject({ body: { unlimited_quota: true } });
    expect(unlimited).not.toHaveProperty('body.remain_quota');
    const limited = { ...shown, unlimited_quota: true };
    expect(keyChanges(limited, { ...formFromKey(limited), unlimited: false }, NOW))
      .toMatchObject({ body: { remain_quota: 1_000_000, unlimited_quota: false, expected_remain_quota: 1_000_000 } });
  });
});

describe('keyChanges: the expiry', () => {
  const key = (expired_time: number) => ({
    id: 5, user_id: 7, name: 'ci', key: 'sk-abcd********wxyz', status: 1, created_time: 1, accessed_time: 0, expired_time,
    remain_quota: 0, unlimited_quota: true, used_quota: 0, model_limits_enabled: false, model_limits: '', allow_ips: null,
    group: '', cross_group_retry: false, rate_limit_rpm: 0, rate_limit_tpm: 0,
  });

  it('an expired key can be renamed: its expiry is neither checked nor sent', () => {
    const expired = key(NOW - 3600);
    const r = keyChanges(expired, { ...formFromKey(expired), name: 'renamed' }, NOW);
    expect(r).toMatchObject({ body: { name: 'renamed' } });
    expect(r).not.toHaveProperty('body.expired_time');
  });

  it('a rename keeps an expiry that has seconds (the field shows minutes)', () => {
    const k = key(NOW + 86_400 + 37);
    const r = keyChanges(k, { ...formFromKey(k), name: 'renamed' }, NOW);
    expect(r).not.toHaveProperty('body.expired_time');
  });

  it('an edited expiry is checked and sent', () => {
    const k = key(NOW + 86_400 + 37);
    const f = formFromKey(k);
    expect(keyChanges(k, { ...f, expiresAt: '2020-01-01T00:00' }, NOW)).toMatchObject({ field: 'expiresAt', error: 'must be in the future' });
    const later = keyChanges(k, { ...f, expiresAt: toLocalInput(NOW + 7 * 86_400) }, NOW);
    expect(later).toMatchObject({ body: { expired_time: Math.floor((NOW + 7 * 86_400) / 60) * 60 } });
    expect(keyChanges(k, { ...f, neverExpires: true }, NOW)).toMatchObject({ body: { expired_time: -1 } });
    const never = key(-1);
    expect(keyChanges(never, { ...formFromKey(never), neverExpires: false, expiresAt: '' }, NOW)).toMatchObject({ field: 'expiresAt' });
  });
});

describe('KeyForm', () => {
  const groups = { default: { ratio: 1, desc: 'everyone' }, auto: { ratio: 'auto', desc: 'automatic' } };

  /** A limited key named k with `quota` typed, submitted; returns the submit handler. */
  function submitQuota(quota: string) {
    const onSubmit = vi.fn(async () => {});
    render(<KeyForm initial={EMPTY_KEY_FORM} groups={groups} submitLabel="Create key" onSubmit={onSubmit} onCancel={() => {}} />);
    fireEvent.click(screen.getByLabelText('Unlimited quota'));
    fireEvent.input(screen.getByLabelText('Name'), { target: { value: 'k' } });
    fireEvent.input(screen.getByLabelText('Quota (US dollars)'), { target: { value: quota } });
    fireEvent.click(screen.getByRole('button', { name: 'Create key' }));
    return onSubmit;
  }

  it('shows a local error next to the field and does not submit', async () => {
    const onSubmit = submitQuota('lots');
    expect(await screen.findByText('a dollar amount above $0, such as 10 or 2.50')).toBeTruthy();
    expect(screen.getByLabelText('Quota (US dollars)').getAttribute('aria-invalid')).toBe('true');
    expect(onSubmit).not.toHaveBeenCalled();
  });

  it('names the largest quota a key can have when more is typed', async () => {
    const onSubmit = submitQuota('1000000000000');
    expect(await screen.findByText('must be at most $18,014,398,509.481982')).toBeTruthy();
    expect(onSubmit).not.toHaveBeenCalled();
  });

  it('puts an API error naming a field next to that field', async () => {
    const onSubmit = vi.fn(async () => { throw new Error('allow_ips: "nope" is not an IP address or CIDR block'); });
    render(<KeyForm initial={EMPTY_KEY_FORM} groups={groups} submitLabel="Create key" onSubmit={onSubmit} onCancel={() => {}} />);
    fireEvent.input(screen.getByLabelText('Name'), { target: { value: 'k' } });
    fireEvent.input(screen.getByLabelText('Allowed IP addresses'), { target: { value: 'nope' } });
    fireEvent.click(screen.getByRole('button', { name: 'Create key' }));
    await waitFor(() => expect(onSubmit).toHaveBeenCalledOnce());
    const ips = screen.getByLabelText('Allowed IP addresses');
    await waitFor(() => expect(ips.getAttribute('aria-invalid')).toBe('true'));
    expect(document.getElementById(ips.getAttribute('aria-describedby')!)!.textContent).toBe('"nope" is not an IP address or CIDR block');
  });

  it('drops the API error of the last submit when the next stops at the form\'s own check', async () => {
    const onSubmit = vi.fn(async () => { throw new Error('allow_ips: "999.1.1.1" is not an IP address or CIDR block'); });
    render(<KeyForm initial={EMPTY_KEY_FORM} groups={groups} submitLabel="Create key" onSubmit={onSubmit} onCancel={() => {}} />);
    fireEvent.input(screen.getByLabelText('Name'), { target: { value: 'k' } });
    fireEvent.input(screen.getByLabelText('Allowed IP addresses'), { target: { value: '999.1.1.1' } });
    fireEvent.click(screen.getByRole('button', { name: 'Create key' }));
    const ips = screen.getByLabelText('Allowed IP addresses');
    await waitFor(() => expect(ips.getAttribute('aria-invalid')).toBe('true'));
    // Corrected, and another field now wrong: only that field's error shows.
    fireEvent.input(ips, { target: { value: '10.0.0.1' } });
    fireEvent.click(screen.getByLabelText('Unlimited quota'));
    fireEvent.input(screen.getByLabelText('Quota (US dollars)'), { target: { value: 'lots' } });
    fireEvent.click(screen.getByRole('button', { name: 'Create key' }));
    expect(await screen.findByText('a dollar amount above $0, such as 10 or 2.50')).toBeTruthy();
    await waitFor(() => expect(ips.getAttribute('aria-invalid')).toBeNull());
    expect(screen.queryByText('"999.1.1.1" is not an IP address or CIDR block')).toBeNull();
    expect(onSubmit).toHaveBeenCalledOnce();
  });

  it('offers the groups and enables cross-group retry only for auto', () => {
    render(<KeyForm initial={EMPTY_KEY_FORM} groups={groups} submitLabel="Create key" onSubmit={async () => {}} onCancel={() => {}} />);
    const retry = screen.getByLabelText('Retry in other groups (auto group only)') as HTMLInputElement;
    expect(retry.disabled).toBe(true);
    fireEvent.change(screen.getByLabelText('Group'), { target: { value: 'auto' } });
    expect(retry.disabled).toBe(false);
    expect(screen.getAllByRole('option').map((o) => o.getAttribute('value'))).toEqual(['', 'default', 'auto']);
  });
});

// The keys page against a stubbed fetch: what the edit form sends back.
describe('KeysPage: editing a key', () => {
  const shown = {
    id: 5, user_id: 7, name: 'ci', key: 'sk-abcd********wxyz', status: 1, created_time: 1, accessed_time: 0, expired_time: -1,
    remain_quota: 1_000_000, unlimited_quota: false, used_quota: 0, model_limits_enabled: false, model_limits: '', allow_ips: null,
    group: '', cross_group_retry: false, rate_limit_rpm: 0, rate_limit_tpm: 0,
  };
  const puts: Record<string, unknown>[] = [];
  let putAnswer: { status: number; body: unknown } = { status: 200, body: { success: true, message: '', data: shown } };
  const answer = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

  beforeAll(() => {
    server.handle = async (input: Request) => {
      const path = new URL(input.url).pathname;
      if (input.method === 'PUT' && path === '/api/token/') {
        puts.push(JSON.parse(await input.text()) as Record<string, unknown>);
        return answer(putAnswer.status, putAnswer.body);
      }
      if (path === '/api/token/') return answer(200, { success: true, message: '', data: { items: [shown], total: 1, page: 1, page_size: 10 } });
      if (path === '/api/user/self/groups') return answer(200, { success: true, message: '', data: {} });
      return answer(404, { success: false, message: 'no such endpoint' });
    };
  });
  afterAll(() => { server.handle = undefined; });
  afterEach(() => { puts.length = 0; });

  const openEdit = async () => {
    render(<KeysPage />);
    fireEvent.click(await screen.findByRole('button', { name: 'Edit ci' }));
  };

  it('sends no remain_quota when only the name was edited, so spending since the page loaded is not handed back', async () => {
    await openEdit();
    fireEvent.input(screen.getByLabelText('Name'), { target: { value: 'renamed' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save key' }));
    await waitFor(() => expect(puts).toHaveLength(1));
    expect(puts[0]).toMatchObject({ id: 5, name: 'renamed' });
    expect(puts[0]).not.toHaveProperty('remain_quota');
    expect(puts[0]).not.toHaveProperty('unlimited_quota');
    expect(puts[0]).not.toHaveProperty('expected_remain_quota');
  });

  it('sends an edited quota with the value it showed, and shows the 409 when that is stale', async () => {
    putAnswer = { status: 409, body: { success: false, message: "remain_quota: the key's quota changed since it was read (now 400 quota); read it again" } };
    await openEdit();
    fireEvent.input(screen.getByLabelText('Quota (US dollars)'), { target: { value: '3' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save key' }));
    await waitFor(() => expect(puts).toHaveLength(1));
    expect(puts[0]).toMatchObject({ id: 5, remain_quota: 1_500_000, unlimited_quota: false, expected_remain_quota: 1_000_000 });
    expect(await screen.findByText("the key's quota changed since it was read (now $0.0008); read it again")).toBeTruthy();
    expect(screen.getByRole('button', { name: 'Save key' })).toBeTruthy();
  });

  it('takes the focus when it opens; Escape cancels; a field\'s error goes once the field is edited', async () => {
    const onCancel = vi.fn();
    const onSubmit = vi.fn(async () => {});
    render(<KeyForm initial={EMPTY_KEY_FORM} groups={{ default: { ratio: 1, desc: 'everyone' } }} submitLabel="Create key" onSubmit={onSubmit} onCancel={onCancel} />);
    const name = screen.getByLabelText('Name');
    expect(document.activeElement).toBe(name);
    fireEvent.input(name, { target: { value: 'k' } });
    fireEvent.click(screen.getByLabelText('Unlimited quota'));
    const quota = screen.getByLabelText('Quota (US dollars)');
    fireEvent.input(quota, { target: { value: '0' } });
    fireEvent.click(screen.getByRole('button', { name: 'Create key' }));
    await waitFor(() => expect(quota.getAttribute('aria-invalid')).toBe('true'));
    expect(onSubmit).not.toHaveBeenCalled();
    fireEvent.input(quota, { target: { value: '1' } });
    await waitFor(() => expect(quota.getAttribute('aria-invalid')).toBeNull());
    fireEvent.keyDown(quota, { key: 'Escape' });
    expect(onCancel).toHaveBeenCalledOnce();
  });
});
