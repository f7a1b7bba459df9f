// @vitest-environment happy-dom
// The log pages' addresses: the view (filters, page, page size) read from a query string and written
// back, only what differs from the defaults; a hostile or stale value reads as its default, never as
// a query the API would refuse; the time filters are Unix seconds, the same instant in every time zone.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { toLocalInput } from '../format';
import { adminLogViewQuery, adminLogViewSearch, EMPTY_ADMIN_LOG_FILTERS, readAdminLogView } from './admin/logs';
import {
  appliedView, DEFAULT_LOG_VIEW, EMPTY_LOG_FILTERS, LOG_TIME_MAX, logFormError, logViewQuery, logViewSearch, readLogView, withPageSize,
} from './logs';

const JAN_2 = 1_767_322_800; // 2026-01-02 03:00:00 UTC

// The browser's time zone, as Node reads it from TZ each time it is set.
afterEach(() => {
  vi.unstubAllEnvs();
});

describe('readLogView and logViewSearch', () => {
  it('an empty query string is the default view, written back as nothing', () => {
    expect(readLogView('')).toEqual(DEFAULT_LOG_VIEW);
    expect(logViewSearch(DEFAULT_LOG_VIEW)).toBe('');
  });

  it('reads every filter, the page and the page size, and writes them back the same', () => {
    const search = `?type=2&token_name=ci+key&model_name=m1&group=vip&start_timestamp=${JAN_2}&end_timestamp=${JAN_2 + 3599}`
      + '&request_id=req-1&upstream_request_id=up-1&p=3&page_size=50';
    const view = readLogView(search);
    expect(view).toEqual({
      filters: {
        type: '2', tokenName: 'ci key', modelName: 'm1', group: 'vip', from: toLocalInput(JAN_2), to: toLocalInput(JAN_2 + 3599),
        requestId: 'req-1', upstreamRequestId: 'up-1',
      },
      start: JAN_2, end: JAN_2 + 3599, page: 3, pageSize: 50,
    });
    expect(logViewSearch(view)).toBe(search);
    // The query is the address's, to the second.
    expect(logViewQuery(view)).toEqual({
      p: 3, page_size: 50, type: 2, token_name: 'ci key', model_name: 'm1', group: 'vip', start_timestamp: JAN_2, end_timestamp: JAN_2 + 3599,
      request_id: 'req-1', upstream_request_id: 'up-1',
    });
  });

  it('leaves out what is the default', () => {
    expect(logViewSearch({ ...DEFAULT_LOG_VIEW, page: 2 })).toBe('?p=2');
    expect(logViewSearch({ ...DEFAULT_LOG_VIEW, pageSize: 100 })).toBe('?page_size=100');
    expect(logViewSearch({ ...DEFAULT_LOG_VIEW, filters: { ...EMPTY_LOG_FILTERS, modelName: '  ', type: '0' } })).toBe('');
  });

  it.each([
    ['p=-1'], ['p=0'], ['p=abc'], ['p=2.5'], ['p=1e3'], ['p=+2'], ['p=0x10'], ['p= 2'], ['p='], ['p=1000001'],
    ['p=99999999999999999999999999'],
  ])('a page that is not one the API serves (%s) is page 1', (search) => {
    expect(readLogView(`?${search}`).page).toBe(1);
  });

  it('keeps the largest page the API serves, and reads leading zeros', () => {
    expect(readLogView('?p=1000000').page).toBe(1_000_000);
    expect(readLogView('?p=007').page).toBe(7);
    // Digits beyond what a number holds (Infinity).
    expect(readLogView(`?p=${'9'.repeat(400)}`).page).toBe(1);
  });

  it.each([['page_size=7'], ['page_size=0'], ['page_size=1000'], ['page_size=abc'], ['page_size=-20'], ['page_size=50.0']])(
    'a page size the page does not offer (%s) is 20', (search) => {
      expect(readLogView(`?${search}`).pageSize).toBe(20);
    },
  );

  it.each([['type=99'], ['type=0'], ['type=-2'], ['type=abc'], ['type=2.0'], ['type=']])('an unknown type (%s) is All', (search) => {
    expect(readLogView(`?${search}`).filters.type).toBe('0');
  });

  it.each([
    ['notanumber'], ['-5'], ['0'], ['1e9'], ['1767322800.5'], [String(LOG_TIME_MAX + 1)], ['99999999999999999999'], [''],
  ])('a time that is no Unix time of the log (%s) is no bound', (value) => {
    for (const name of ['start_timestamp', 'end_timestamp']) {
      const view = readLogView(`?${name}=${value}`);
      expect(view).toEqual(DEFAULT_LOG_VIEW);
      expect(logViewQuery(view)).toEqual({ p: 1, page_size: 20 });
    }
  });

  it('keeps the last time the log holds', () => {
    const view = readLogView(`?end_timestamp=${LOG_TIME_MAX}`);
    expect(view.end).toBe(LOG_TIME_MAX);
    expect(logViewQuery(view).end_timestamp).toBe(LOG_TIME_MAX);
  });

  it('drops an end before the start, as the form would refuse it', () => {
    const view = readLogView(`?start_timestamp=${JAN_2}&end_timestamp=${JAN_2 - 1}`);
    expect(view.start).toBe(JAN_2);
    expect(view.end).toBeUndefined();
    expect(view.filters.to).toBe('');
  });

  it('drops a text the API would refuse: too long, or with a control character; trims the rest', () => {
    expect(readLogView(`?model_name=${'m'.repeat(201)}`).filters.modelName).toBe('');
    expect(readLogView(`?model_name=${'m'.repeat(200)}`).filters.modelName).toBe('m'.repeat(200));
    expect(readLogView('?request_id=a%00b').filters.requestId).toBe('');
    expect(readLogView('?token_name=a%0Ab').filters.tokenName).toBe('');
    expect(readLogView('?group=%20vip%20').filters.group).toBe('vip');
    expect(readLogView('?group=%20%20').filters.group).toBe('');
  });

  it('reads the first of a repeated parameter, and ignores parameters it does not know', () => {
    expect(readLogView('?p=2&p=3&utm_source=mail&__proto__=x').page).toBe(2);
    expect(logViewSearch(readLogView('?utm_source=mail&p=2'))).toBe('?p=2');
  });

  it('a link means the same instant in every time zone; the fields show it in the local one', () => {
    vi.stubEnv('TZ', 'Asia/Kolkata');
    const inKolkata = readLogView(`?start_timestamp=${JAN_2}`);
    expect(inKolkata.filters.from).toBe('2026-01-02T08:30');
    expect(logViewQuery(inKolkata).start_timestamp).toBe(JAN_2);
    vi.stubEnv('TZ', 'America/New_York');
    const inNewYork = readLogView(`?start_timestamp=${JAN_2}`);
    expect(inNewYork.filters.from).toBe('2026-01-01T22:00');
    expect(logViewQuery(inNewYork).start_timestamp).toBe(JAN_2);
  });
});

describe('appliedView', () => {
  it('reads edited time fields in the local time zone, "To" to the end of its minute, from page 1', () => {
    vi.stubEnv('TZ', 'Asia/Kolkata');
    const current = { ...DEFAULT_LOG_VIEW, page: 4, pageSize: 50 };
    const form = { ...EMPTY_LOG_FILTERS, modelName: ' m1 ', from: '2026-01-02T08:30', to: '2026-01-02T09:30' };
    expect(logFormError(form)).toBeNull();
    const view = appliedView(form, current);
    expect(view).toMatchObject({ start: JAN_2, end: JAN_2 + 3600 + 59, page: 1, pageSize: 50 });
    expect(logViewSearch(view)).toBe(`?model_name=m1&start_timestamp=${JAN_2}&end_timestamp=${JAN_2 + 3659}&page_size=50`);
  });

  it('keeps the address\'s instant, to the second, for a time field left as it was shown', () => {
    const current = readLogView(`?start_timestamp=${JAN_2 + 30}&end_timestamp=${JAN_2 + 90}`);
    const view = appliedView({ ...current.filters, modelName: 'm2' }, current);
    expect(view).toMatchObject({ start: JAN_2 + 30, end: JAN_2 + 90 });
    // An edited one is read from the field.
    const edited = appliedView({ ...current.filters, to: toLocalInput(JAN_2 + 120) }, current);
    expect(edited).toMatchObject({ start: JAN_2 + 30, end: JAN_2 + 120 + 59 });
    // A "To" past the last time the log holds reads as that time.
    expect(appliedView({ ...current.filters, to: '9999-12-31T23:59' }, current).end).toBe(LOG_TIME_MAX);
  });

  it('clears the times when the fields are emptied', () => {
    const current = readLogView(`?start_timestamp=${JAN_2}&end_timestamp=${JAN_2 + 60}&p=2`);
    expect(logViewSearch(appliedView(EMPTY_LOG_FILTERS, current))).toBe('');
  });

  it('the form refuses a text the address could not carry', () => {
    expect(logFormError({ ...EMPTY_LOG_FILTERS, modelName: 'm'.repeat(201) })).toEqual({ field: 'modelName', error: 'must be at most 200 characters' });
    expect(logFormError({ ...EMPTY_LOG_FILTERS, requestId: 'a\u0000b' })).toEqual({ field: 'requestId', error: 'must not contain control characters' });
  });
});

describe('withPageSize', () => {
  it('shows the page holding the first row shown so far', () => {
    expect(withPageSize({ ...DEFAULT_LOG_VIEW, page: 3, pageSize: 20 }, 50).page).toBe(1); // row 41
    expect(withPageSize({ ...DEFAULT_LOG_VIEW, page: 6, pageSize: 20 }, 50).page).toBe(3); // row 101
    expect(withPageSize({ ...DEFAULT_LOG_VIEW, page: 2, pageSize: 100 }, 10)).toMatchObject({ page: 11, pageSize: 10 }); // row 101
  });
});

describe('the administrators\' log address', () => {
  it('adds the account and the channel, first', () => {
    const search = '?username=bob&channel=4&type=2&p=2';
    const view = readAdminLogView(search);
    expect(view.filters).toEqual({ ...EMPTY_ADMIN_LOG_FILTERS, username: 'bob', channel: '4', type: '2' });
    expect(adminLogViewSearch(view)).toBe(search);
    expect(adminLogViewQuery(view)).toEqual({ p: 2, page_size: 20, type: 2, username: 'bob', channel: 4 });
  });

  it('drops a channel that is no id and a username the API would refuse', () => {
    for (const channel of ['abc', '-1', '4294967296', '1e3', '']) {
      expect(readAdminLogView(`?channel=${channel}`).filters.channel).toBe('');
    }
    // Ids start at 1; the API reads 0 as every channel, so it is no filter to show.
    expect(readAdminLogView('?channel=0').filters.channel).toBe('');
    expect(readAdminLogView('?channel=004').filters.channel).toBe('4');
    expect(readAdminLogView(`?username=${'u'.repeat(65)}`).filters.username).toBe('');
    expect(adminLogViewQuery(readAdminLogView(`?username=${'u'.repeat(65)}&channel=x&p=-4`))).toEqual({ p: 1, page_size: 20 });
  });

  it('sends the address\'s instants as they are', () => {
    const view = readAdminLogView(`?start_timestamp=1&end_timestamp=${JAN_2 + 30}`);
    expect(adminLogViewQuery(view)).toEqual({ p: 1, page_size: 20, start_timestamp: 1, end_timestamp: JAN_2 + 30 });
  });
});
