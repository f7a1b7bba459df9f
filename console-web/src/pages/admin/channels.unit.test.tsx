// @vitest-environment happy-dom
// The channel form sends only what the administrator changed: a channel the relays disabled (status 3)
// stays disabled when its weight is saved. Its errors go once their field is edited; it takes the
// focus when it opens, and Escape closes it. Its fault thresholds show null (the fleet's setting) as an
// empty field and send an emptied one as null, which the API reads as that setting (left out, an edit
// would keep the channel's own). Only the two types the API takes are offered.
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Channel } from '../../api/types';

// The API client takes fetch when it is created, on import: the stub has to be in place before.
const server = vi.hoisted(() => {
  const s: { handle?: (r: Request) => Promise<Response> } = {};
  vi.stubGlobal('fetch', (r: Request) => (s.handle ? s.handle(r) : Promise.reject(new Error('no fetch here'))));
  return s;
});

import { AdminChannelsPage, ChannelForm, channelChanges, channelInput, formFromChannel, lastTestText, statusOptions, typeOptions } from './channels';

afterEach(cleanup);

const AUTO_DISABLED: Channel = {
  id: 9, type: 14, name: 'flaky', base_url: 'https://api.example.com', status: 3, models: 'claude-a', group: 'default', priority: 0, weight: 1,
  model_mapping: '', created_time: 1, used_quota: 0, response_time: 0, test_time: 0, status_reason: '3 consecutive channel faults; last: provider answered HTTP 401',
  status_time: 2, probe_time: 0, probe_result: '', probe_failures: 0, next_probe_time: 0, auto_ban: true, fault_threshold: null, fault_rate_threshold: null, flex_ratio: 1,
};

function reply(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
}

describe('channelChanges', () => {
  it('sends nothing for an untouched form, and only the edited fields otherwise', () => {
    const f = formFromChannel(AUTO_DISABLED);
    expect(channelChanges(AUTO_DISABLED, f)).toEqual({});
    expect(channelChanges(AUTO_DISABLED, { ...f, weight: '5' })).toEqual({ weight: 5 });
    expect(channelChanges(AUTO_DISABLED, { ...f, status: '1', key: 'sk-new' })).toEqual({ status: 1, key: 'sk-new' });
    expect(channelChanges(AUTO_DISABLED, { ...f, model_mapping: '{"a":"b"}', flex_ratio: '0.5' })).toEqual({ model_mapping: '{"a":"b"}', flex_ratio: 0.5 });
  });

  it('a new channel sends every field', () => {
    expect(channelInput({ ...formFromChannel(null), name: 'n', base_url: 'https://x.example', key: 'k', models: 'm' })).toEqual({
      name: 'n', type: 14, base_url: 'https://x.example', key: 'k', models: 'm', group: 'default', priority: 0, weight: 1, model_mapping: null, flex_ratio: 1, status: 1,
      auto_ban: true, fault_threshold: null, fault_rate_threshold: null,
    });
  });

  it('prefills the fault settings, null as an empty field', () => {
    expect(formFromChannel(null)).toMatchObject({ auto_ban: true, fault_threshold: '', fault_rate_threshold: '' });
    expect(formFromChannel(AUTO_DISABLED)).toMatchObject({ auto_ban: true, fault_threshold: '', fault_rate_threshold: '' });
    expect(formFromChannel({ ...AUTO_DISABLED, auto_ban: false, fault_threshold: 0, fault_rate_threshold: 0.25 }))
      .toMatchObject({ auto_ban: false, fault_threshold: '0', fault_rate_threshold: '0.25' });
  });

  it('a new channel sends the fault settings typed, and empty ones as null', () => {
    const f = { ...formFromChannel(null), name: 'n', base_url: 'https://x.example', key: 'k', models: 'm' };
    expect(channelInput({ ...f, auto_ban: false, fault_threshold: '3', fault_rate_threshold: '0.2' }))
      .toMatchObject({ auto_ban: false, fault_threshold: 3, fault_rate_threshold: 0.2 });
    expect(channelInput({ ...f, fault_threshold: ' ', fault_rate_threshold: '0' }))
      .toMatchObject({ auto_ban: true, fault_threshold: null, fault_rate_threshold: 0 });
  });

  it('an edit sends only the fault settings changed, an emptied one as null', () => {
    const own = { ...AUTO_DISABLED, fault_threshold: 3, fault_rate_threshold: 0.2 };
    const f = formFromChannel(own);
    expect(channelChanges(own, f)).toEqual({});
    expect(channelChanges(own, { ...f, auto_ban: false })).toEqual({ auto_ban: false });
    expect(channelChanges(own, { ...f, fault_threshold: '0' })).toEqual({ fault_threshold: 0 });
    expect(channelChanges(own, { ...f, fault_threshold: '', fault_rate_threshold: '' })).toEqual({ fault_threshold: null, fault_rate_threshold: null });
    // A channel on the fleet's settings: left empty, nothing is sent; typed, its own value.
    const fleet = formFromChannel(AUTO_DISABLED);
    expect(channelChanges(AUTO_DISABLED, { ...fleet, weight: '2' })).toEqual({ weight: 2 });
    expect(channelChanges(AUTO_DISABLED, { ...fleet, fault_rate_threshold: '0.5' })).toEqual({ fault_rate_threshold: 0.5 });
  });

  it('offers only types 1 and 14; a legacy type is shown but cannot be chosen', () => {
    expect(typeOptions('14').map((o) => [o.value, o.label, !!o.disabled])).toEqual([['14', 'Anthropic Messages', false], ['1', 'OpenAI Chat Completions', false]]);
    expect(typeOptions('1').map((o) => o.value)).toEqual(['14', '1']);
    expect(typeOptions('3')).toContainEqual({ value: '3', label: 'Type 3 (no longer accepted)', disabled: true });
  });

  it('offers the automatic state only to a channel in it', () => {
    expect(statusOptions(AUTO_DISABLED).map((o) => o.value)).toEqual(['1', '2', '3']);
    expect(statusOptions({ ...AUTO_DISABLED, status: 1 }).map((o) => o.value)).toEqual(['1', '2']);
    expect(statusOptions(null).map((o) => o.value)).toEqual(['1', '2']);
  });
});

describe('ChannelForm', () => {
  it('shows status 3 and saving the weight leaves it alone', async () => {
    const bodies: unknown[] = [];
    server.handle = async (r) => { bodies.push(await r.json()); return reply(200, { success: true, message: '', data: AUTO_DISABLED }); };
    const onDone = vi.fn();
    render(<ChannelForm channel={AUTO_DISABLED} onDone={onDone} />);
    expect((screen.getByLabelText('Status') as HTMLSelectElement).value).toBe('3');
    expect(screen.getByText(/disabled by the relays' health checks/)).toBeTruthy();
    fireEvent.input(screen.getByLabelText('Weight'), { target: { value: '5' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save channel' }));
    await waitFor(() => expect(onDone).toHaveBeenCalledOnce());
    expect(bodies).toEqual([{ id: 9, weight: 5 }]);
  });

  it('shows the fault settings and sends only those edited', async () => {
    const bodies: unknown[] = [];
    server.handle = async (r) => { bodies.push(await r.json()); return reply(200, { success: true, message: '', data: AUTO_DISABLED }); };
    const onDone = vi.fn();
    const own = { ...AUTO_DISABLED, fault_threshold: 7, fault_rate_threshold: null };
    render(<ChannelForm channel={own} onDone={onDone} />);
    const autoBan = screen.getByLabelText('Auto-disable on faults') as HTMLInputElement;
    const inRow = screen.getByLabelText('Faults in a row before disabling') as HTMLInputElement;
    const rate = screen.getByLabelText('Fault rate that disables') as HTMLInputElement;
    expect([autoBan.checked, inRow.value, rate.value]).toEqual([true, '7', '']);
    expect(screen.getByText(/CHANNEL_FAULTS_TO_DISABLE \(5 by default\)/)).toBeTruthy();
    fireEvent.input(inRow, { target: { value: '' } });
    fireEvent.click(autoBan);
    fireEvent.click(screen.getByRole('button', { name: 'Save channel' }));
    await waitFor(() => expect(onDone).toHaveBeenCalledOnce());
    expect(bodies).toEqual([{ id: 9, auto_ban: false, fault_threshold: null }]);
  });

  it('a new channel is auto-disabled on faults unless unticked', async () => {
    const bodies: Record<string, unknown>[] = [];
    server.handle = async (r) => { bodies.push(await r.json() as Record<string, unknown>); return reply(200, { success: true, message: '', data: AUTO_DISABLED }); };
    const onDone = vi.fn();
    render(<ChannelForm channel={null} onDone={onDone} />);
    expect((screen.getByLabelText('Auto-disable on faults') as HTMLInputElement).checked).toBe(true);
    fireEvent.input(screen.getByLabelText('Name'), { target: { value: 'n' } });
    fireEvent.input(screen.getByLabelText('Base URL'), { target: { value: 'https://x.example' } });
    fireEvent.input(screen.getByLabelText('Channel key'), { target: { value: 'k' } });
    fireEvent.input(screen.getByLabelText('Models'), { target: { value: 'm' } });
    fireEvent.input(screen.getByLabelText('Fault rate that disables'), { target: { value: '0.3' } });
    fireEvent.click(screen.getByRole('button', { name: 'Create channel' }));
    await waitFor(() => expect(onDone).toHaveBeenCalledOnce());
    expect(bodies[0]).toMatchObject({ auto_ban: true, fault_threshold: null, fault_rate_threshold: 0.3 });
  });

  it('shows the API\'s error on a fault setting next to it', async () => {
    server.handle = async () => reply(400, { success: false, message: 'fault_rate_threshold: must be a number from 0 to 1, or null' });
    render(<ChannelForm channel={AUTO_DISABLED} onDone={() => {}} />);
    const rate = screen.getByLabelText('Fault rate that disables');
    fireEvent.input(rate, { target: { value: '0.9' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save channel' }));
    await waitFor(() => expect(rate.getAttribute('aria-invalid')).toBe('true'));
    expect(screen.getByText('must be a number from 0 to 1, or null')).toBeTruthy();
  });

  it('puts each field of an error naming several next to that field, and editing one leaves the others', async () => {
    server.handle = async () => reply(400, { success: false, message: 'name: must be at most 100 characters; model_mapping: must be a JSON object of model name to model name' });
    render(<ChannelForm channel={AUTO_DISABLED} onDone={() => {}} />);
    const name = screen.getByLabelText('Name');
    const mapping = screen.getByLabelText('Model mapping (JSON)');
    expect(name.getAttribute('maxlength')).toBe('100');
    fireEvent.input(mapping, { target: { value: '{bad' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save channel' }));
    await waitFor(() => expect(mapping.getAttribute('aria-invalid')).toBe('true'));
    expect(name.getAttribute('aria-invalid')).toBe('true');
    expect(screen.getByText('must be at most 100 characters')).toBeTruthy();
    expect(screen.getByText('must be a JSON object of model name to model name')).toBeTruthy();
    fireEvent.input(name, { target: { value: 'short' } });
    await waitFor(() => expect(name.getAttribute('aria-invalid')).toBeNull());
    expect(mapping.getAttribute('aria-invalid')).toBe('true');
  });

  it('shows a legacy type without offering it', () => {
    render(<ChannelForm channel={{ ...AUTO_DISABLED, type: 3 }} onDone={() => {}} />);
    const type = screen.getByLabelText('Provider format') as HTMLSelectElement;
    expect(type.value).toBe('3');
    expect([...type.options].filter((o) => !o.disabled).map((o) => o.value)).toEqual(['14', '1']);
    expect(screen.getByText(/stored as type 3/)).toBeTruthy();
  });

  it('drops a field\'s error once the field is edited, without another submit', async () => {
    server.handle = async () => reply(400, { success: false, message: 'group: unknown group "nope"' });
    render(<ChannelForm channel={AUTO_DISABLED} onDone={() => {}} />);
    const groups = screen.getByLabelText('Groups');
    fireEvent.input(groups, { target: { value: 'nope' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save channel' }));
    await waitFor(() => expect(groups.getAttribute('aria-invalid')).toBe('true'));
    fireEvent.input(groups, { target: { value: 'default' } });
    await waitFor(() => expect(groups.getAttribute('aria-invalid')).toBeNull());
    expect(screen.queryByText('unknown group "nope"')).toBeNull();
  });

  it('the thresholds are disabled while auto-disabling is off (they do nothing then)', () => {
    render(<ChannelForm channel={{ ...AUTO_DISABLED, auto_ban: false, fault_threshold: 3 }} onDone={() => {}} />);
    const autoBan = screen.getByLabelText('Auto-disable on faults') as HTMLInputElement;
    const inRow = screen.getByLabelText('Faults in a row before disabling') as HTMLInputElement;
    const rate = screen.getByLabelText('Fault rate that disables') as HTMLInputElement;
    expect([inRow.disabled, rate.disabled]).toEqual([true, true]);
    expect(inRow.value).toBe('3');
    expect(screen.getAllByText('no effect while auto-disabling is off')).toHaveLength(2);
    fireEvent.click(autoBan);
    expect([inRow.disabled, rate.disabled]).toEqual([false, false]);
  });

  it('shows a small rate as a decimal, not in exponent notation, and sends nothing for it untouched', async () => {
    const bodies: unknown[] = [];
    server.handle = async (r) => { bodies.push(await r.json()); return reply(200, { success: true, message: '', data: AUTO_DISABLED }); };
    const onDone = vi.fn();
    const tiny = { ...AUTO_DISABLED, fault_rate_threshold: 0.0000001, flex_ratio: 0.00000025 };
    expect(formFromChannel(tiny)).toMatchObject({ fault_rate_threshold: '0.0000001', flex_ratio: '0.00000025' });
    render(<ChannelForm channel={tiny} onDone={onDone} />);
    expect((screen.getByLabelText('Fault rate that disables') as HTMLInputElement).value).toBe('0.0000001');
    fireEvent.input(screen.getByLabelText('Weight'), { target: { value: '2' } });
    fireEvent.click(screen.getByRole('button', { name: 'Save channel' }));
    await waitFor(() => expect(onDone).toHaveBeenCalledOnce());
    expect(bodies).toEqual([{ id: 9, weight: 2 }]);
  });

  it('takes the focus when it opens, and Escape closes it', () => {
    const onDone = vi.fn();
    render(<ChannelForm channel={null} onDone={onDone} />);
    expect(document.activeElement).toBe(screen.getByLabelText('Name'));
    fireEvent.keyDown(screen.getByLabelText('Name'), { key: 'Escape' });
    expect(onDone).toHaveBeenCalledOnce();
  });
});

describe('the channel list', () => {
  it('says why a disabled channel is disabled', async () => {
    const manual = { ...AUTO_DISABLED, id: 10, name: 'off', status: 2, status_reason: 'set by an administrator' };
    const on = { ...AUTO_DISABLED, id: 11, name: 'on', status: 1, status_reason: 'set by an administrator' };
    server.handle = async () => reply(200, { success: true, message: '', data: { items: [AUTO_DISABLED, manual, on], total: 3 } });
    render(<AdminChannelsPage />);
    const flaky = (await screen.findByText('flaky')).closest('tr')!;
    expect(flaky.textContent).toContain('Disabled (automatic)3 consecutive channel faults; last: provider answered HTTP 401');
    expect(screen.getByText('off').closest('tr')!.textContent).toContain('Disabledset by an administrator');
    expect(screen.getByText('on').closest('tr')!.textContent).not.toContain('set by an administrator');
  });

  it('a failed test shows in the Last test column (the API records only successful tests)', async () => {
    const tested = { ...AUTO_DISABLED, status: 1, test_time: 1_700_000_000, response_time: 120 };
    const lists: number[] = [];
    server.handle = async (r) => {
      if (new URL(r.url).pathname.startsWith('/api/channel/test/')) {
        return reply(200, { success: false, message: 'channel test failed: HTTP 401 authentication_error', data: { time: 0.1, response_time: 100, model: 'claude-a', status_code: 401 } });
      }
      lists.push(1);
      return reply(200, { success: true, message: '', data: { items: [tested], total: 1 } });
    };
    render(<AdminChannelsPage />);
    const row = (await screen.findByText('flaky')).closest('tr')!;
    expect(row.textContent).toContain('(120 ms)');
    fireEvent.click(screen.getByRole('button', { name: 'Test channel flaky' }));
    await waitFor(() => expect(row.textContent).toContain(': channel test failed: HTTP 401 authentication_error'));
    expect(row.textContent).not.toContain('(120 ms)');
    expect(row.querySelector('td.test.failed')).toBeTruthy();
  });

  it('lastTestText: a failure seen here until a later test succeeds', () => {
    const failed = { at: 200, message: 'channel test failed: HTTP 500' };
    expect(lastTestText({ test_time: 100, response_time: 5 }, failed)).toMatch(/: channel test failed: HTTP 500$/);
    expect(lastTestText({ test_time: 300, response_time: 5 }, failed)).toMatch(/\(5 ms\)$/);
    expect(lastTestText({ test_time: 0, response_time: 0 }, null)).toBe('—');
  });
});
