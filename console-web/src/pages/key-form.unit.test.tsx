// @vitest-environment happy-dom
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EMPTY_KEY_FORM, KeyForm, keyInput } from './key-form';

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
    expect(keyInput({ ...EMPTY_KEY_FORM, name: 'k', modelLimitsEnabled: true, modelLimits: ' , ' }, NOW)).toMatchObject({ field: 'modelLimits' });
  });
});

describe('KeyForm', () => {
  const groups = { default: { ratio: 1, desc: 'everyone' }, auto: { ratio: 'auto', desc: 'automatic' } };

  it('shows a local error next to the field and does not submit', async () => {
    const onSubmit = vi.fn(async () => {});
    render(<KeyForm initial={EMPTY_KEY_FORM} groups={groups} submitLabel="Create key" onSubmit={onSubmit} onCancel={() => {}} />);
    fireEvent.click(screen.getByLabelText('Unlimited quota'));
    fireEvent.input(screen.getByLabelText('Name'), { target: { value: 'k' } });
    fireEvent.input(screen.getByLabelText('Quota (US dollars)'), { target: { value: 'lots' } });
    fireEvent.click(screen.getByRole('button', { name: 'Create key' }));
    expect(await screen.findByText('a dollar amount of 0 or more')).toBeTruthy();
    expect(screen.getByLabelText('Quota (US dollars)').getAttribute('aria-invalid')).toBe('true');
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

  it('offers the groups and enables cross-group retry only for auto', () => {
    render(<KeyForm initial={EMPTY_KEY_FORM} groups={groups} submitLabel="Create key" onSubmit={async () => {}} onCancel={() => {}} />);
    const retry = screen.getByLabelText('Retry in other groups (auto group only)') as HTMLInputElement;
    expect(retry.disabled).toBe(true);
    fireEvent.change(screen.getByLabelText('Group'), { target: { value: 'auto' } });
    expect(retry.disabled).toBe(false);
    expect(screen.getAllByRole('option').map((o) => o.getAttribute('value'))).toEqual(['', 'default', 'auto']);
  });
});
