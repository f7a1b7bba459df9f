// @vitest-environment happy-dom
// The channel form sends only what the administrator changed: a channel the relays disabled (status 3)
// stays disabled when its weight is saved. Its errors go once their field is edited; it takes the
// focus when it opens, and Escape closes it.
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Channel } from '../../api/types';

// The API client takes fetch when it is created, on import: the stub has to be in place before.
const server = vi.hoisted(() => {
  const s: { handle?: (r: Request) => Promise<Response> } = {};
  vi.stubGlobal('fetch', (r: Request) => (s.handle ? s.handle(r) : Promise.reject(new Error('no fetch here'))));
  return s;
});

import { ChannelForm, channelChanges, channelInput, formFromChannel, statusOptions } from './channels';

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
    });
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

  it('takes the focus when it opens, and Escape closes it', () => {
    const onDone = vi.fn();
    render(<ChannelForm channel={null} onDone={onDone} />);
    expect(document.activeElement).toBe(screen.getByLabelText('Name'));
    fireEvent.keyDown(screen.getByLabelText('Name'), { key: 'Escape' });
    expect(onDone).toHaveBeenCalledOnce();
  });
});
