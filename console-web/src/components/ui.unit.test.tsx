// @vitest-environment happy-dom
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/preact';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { dollars, maskKey } from '../format';
import { logQuery, EMPTY_LOG_FILTERS } from '../pages/logs';
import { summarise } from '../pages/dashboard';
import { amountLabel, discountFor, epayRedirectUrl, priceText, topUpHref } from '../pages/topup';
import { optionSection } from '../pages/admin/options';
import { accountChanges, accountGroups } from '../pages/admin/users';
import { readCookie } from '../api/client';
import { ConfirmButton, Pager, pageCount, splitFieldError, Table, typedPage } from './ui';

afterEach(cleanup);

describe('splitFieldError', () => {
  it('a "field: reason" message goes to its field, anything else to the form', () => {
    expect(splitFieldError('username: must be at least 3 characters', ['username'])).toEqual([{ username: 'must be at least 3 characters' }, null]);
    expect(splitFieldError('username or password is incorrect', ['username'])).toEqual([{}, 'username or password is incorrect']);
    expect(splitFieldError('quota: too big', ['username'])).toEqual([{}, 'quota: too big']);
    expect(splitFieldError(null, ['username'])).toEqual([{}, null]);
  });

  it('a message naming several fields puts each reason next to its own field', () => {
    expect(splitFieldError('name: must be at most 100 characters; model_mapping: must be a JSON object of model name to model name', ['name', 'model_mapping']))
      .toEqual([{ name: 'must be at most 100 characters', model_mapping: 'must be a JSON object of model name to model name' }, null]);
    expect(splitFieldError('priority: must be an integer; priority: is too large', ['priority'])).toEqual([{ priority: 'must be an integer; is too large' }, null]);
    expect(splitFieldError('name: too long; body.x: unknown', ['name'])).toEqual([{ name: 'too long' }, 'body.x: unknown']);
    expect(splitFieldError('name: a; b is fine', ['name'])).toEqual([{ name: 'a; b is fine' }, null]);
  });
});

describe('ConfirmButton', () => {
  it('moves the focus to Confirm; Escape or Keep go back to the button pressed, with the focus', async () => {
    const onConfirm = vi.fn(async () => {});
    render(<ConfirmButton label="Delete" name="Delete laptop" confirm="Confirm delete" confirmName="Confirm deleting laptop" onConfirm={onConfirm} />);
    expect(document.activeElement).toBe(document.body);
    fireEvent.click(screen.getByRole('button', { name: 'Delete laptop' }));
    await waitFor(() => expect(document.activeElement).toBe(screen.getByRole('button', { name: 'Confirm deleting laptop' })));
    fireEvent.keyDown(screen.getByRole('button', { name: 'Confirm deleting laptop' }), { key: 'Escape' });
    await waitFor(() => expect(document.activeElement).toBe(screen.getByRole('button', { name: 'Delete laptop' })));
    fireEvent.click(screen.getByRole('button', { name: 'Delete laptop' }));
    fireEvent.keyDown(await screen.findByRole('button', { name: 'Keep' }), { key: 'Escape' });
    await waitFor(() => expect(document.activeElement).toBe(screen.getByRole('button', { name: 'Delete laptop' })));
    fireEvent.click(screen.getByRole('button', { name: 'Delete laptop' }));
    fireEvent.click(await screen.findByRole('button', { name: 'Keep' }));
    await waitFor(() => expect(document.activeElement).toBe(screen.getByRole('button', { name: 'Delete laptop' })));
    expect(onConfirm).not.toHaveBeenCalled();
    fireEvent.click(screen.getByRole('button', { name: 'Delete laptop' }));
    fireEvent.click(await screen.findByRole('button', { name: 'Confirm deleting laptop' }));
    expect(onConfirm).toHaveBeenCalledOnce();
  });
});

describe('Table', () => {
  it('names each cell by its column, for the stacked rows of a narrow screen, rows drawn later too', () => {
    const Row = ({ name }: { name: string }) => <tr><td>{name}</td><td><button type="button">Delete</button></td></tr>;
    const { container, rerender } = render(<Table><thead><tr><th>Name</th><th>Actions</th></tr></thead><tbody><Row name="a" /></tbody></Table>);
    const labels = () => [...container.querySelectorAll('td')].map((td) => td.getAttribute('data-label'));
    expect(container.querySelector('table')!.className).toBe('stack');
    expect(labels()).toEqual(['Name', 'Actions']);
    rerender(<Table><thead><tr><th>Name</th><th>Actions</th></tr></thead><tbody><Row name="a" /><Row name="b" /></tbody></Table>);
    expect(labels()).toEqual(['Name', 'Actions', 'Name', 'Actions']);
  });
});

describe('Pager', () => {
  it('pages within bounds', () => {
    expect(pageCount(0, 10)).toBe(1);
    expect(pageCount(21, 10)).toBe(3);
    const onPage = vi.fn();
    render(<Pager page={1} pageSize={10} total={21} onPage={onPage} />);
    expect((screen.getByRole('button', { name: 'Previous' }) as HTMLButtonElement).disabled).toBe(true);
    fireEvent.click(screen.getByRole('button', { name: 'Next' }));
    expect(onPage).toHaveBeenCalledWith(2);
    expect(screen.getByText('Page 1 of 3 (21 in all)')).toBeTruthy();
  });

  it('moves a list read past its last page to the page that is now the last', () => {
    const onPage = vi.fn();
    render(<Pager page={2} pageSize={10} total={10} onPage={onPage} />);
    expect(onPage).toHaveBeenCalledWith(1);
    expect(screen.getByText('Page 1 of 1 (10 in all)')).toBeTruthy();
    cleanup();
    const onEmpty = vi.fn();
    render(<Pager page={3} pageSize={10} total={0} onPage={onEmpty} />);
    expect(onEmpty).toHaveBeenCalledWith(1);
    cleanup();
    const stays = vi.fn();
    render(<Pager page={2} pageSize={10} total={11} onPage={stays} />);
    expect(stays).not.toHaveBeenCalled();
  });

  it('a list whose page is in the address corrects it through onPageCorrected', () => {
    const onPage = vi.fn();
    const onPageCorrected = vi.fn();
    render(<Pager page={9} pageSize={10} total={25} onPage={onPage} onPageCorrected={onPageCorrected} />);
    expect(onPageCorrected).toHaveBeenCalledWith(3);
    expect(onPage).not.toHaveBeenCalled();
  });

  it('goes to a page by its number: Go, or Enter in the field', () => {
    const onPage = vi.fn();
    render(<Pager page={1} pageSize={10} total={10_000} onPage={onPage} label="Log pages" />);
    const input = screen.getByLabelText('Go to page') as HTMLInputElement;
    expect(input.type).toBe('number');
    expect([input.min, input.max, input.step]).toEqual(['1', '1000', '1']);
    // Inside the pager's navigation landmark.
    expect(screen.getByRole('navigation', { name: 'Log pages' }).contains(input)).toBe(true);
    fireEvent.input(input, { target: { value: '500' } });
    fireEvent.click(screen.getByRole('button', { name: 'Go' }));
    expect(onPage).toHaveBeenCalledWith(500);
    expect(input.value).toBe('');
    // Enter submits the field's form.
    fireEvent.input(input, { target: { value: ' 1000 ' } });
    fireEvent.submit(input.form!);
    expect(onPage).toHaveBeenLastCalledWith(1000);
    expect(onPage).toHaveBeenCalledTimes(2);
  });

  it('refuses a page out of 1..pages, or no page number, next to the field', () => {
    const onPage = vi.fn();
    render(<Pager page={2} pageSize={10} total={25} onPage={onPage} />);
    const input = screen.getByLabelText('Go to page') as HTMLInputElement;
    for (const typed of ['0', '4', '-1', '2.5', '1e1', 'abc', '']) {
      fireEvent.input(input, { target: { value: typed } });
      fireEvent.click(screen.getByRole('button', { name: 'Go' }));
      expect(screen.getByRole('alert').textContent).toBe('a page from 1 to 3');
      expect(input.getAttribute('aria-invalid')).toBe('true');
      expect(input.getAttribute('aria-describedby')).toBe(screen.getByRole('alert').id);
    }
    expect(onPage).not.toHaveBeenCalled();
    // Typing again takes the error away; the page already shown is not asked for again.
    fireEvent.input(input, { target: { value: '2' } });
    expect(screen.queryByRole('alert')).toBeNull();
    fireEvent.click(screen.getByRole('button', { name: 'Go' }));
    expect(onPage).not.toHaveBeenCalled();
    fireEvent.input(input, { target: { value: '3' } });
    fireEvent.click(screen.getByRole('button', { name: 'Go' }));
    expect(onPage).toHaveBeenCalledWith(3);
  });

  it('a refused page\'s message follows the page count, as a new page size changes it', () => {
    const onPage = vi.fn();
    const { rerender } = render(<Pager page={1} pageSize={20} total={25} onPage={onPage} />);
    const input = screen.getByLabelText('Go to page') as HTMLInputElement;
    fireEvent.input(input, { target: { value: '9' } });
    fireEvent.click(screen.getByRole('button', { name: 'Go' }));
    expect(screen.getByRole('alert').textContent).toBe('a page from 1 to 2');
    // 9 is still past the end of 3 pages: said with the new count.
    rerender(<Pager page={1} pageSize={10} total={25} onPage={onPage} />);
    expect(screen.getByText('Page 1 of 3 (25 in all)')).toBeTruthy();
    expect(screen.getByRole('alert').textContent).toBe('a page from 1 to 3');
    expect(input.getAttribute('aria-invalid')).toBe('true');
    // With 13 pages it is one of them: no longer refused.
    rerender(<Pager page={1} pageSize={2} total={25} onPage={onPage} />);
    expect(screen.queryByRole('alert')).toBeNull();
    expect(input.getAttribute('aria-invalid')).toBeNull();
    expect(input.getAttribute('aria-describedby')).toBeNull();
    fireEvent.click(screen.getByRole('button', { name: 'Go' }));
    expect(onPage).toHaveBeenCalledWith(9);
  });

  it('goes no further than maxPage, the last page the API reads', () => {
    const onPage = vi.fn();
    render(<Pager page={1_000_000} pageSize={10} total={20_000_000} maxPage={1_000_000} onPage={onPage} />);
    expect(screen.getByText('Page 1,000,000 of 2,000,000 (20,000,000 in all)')).toBeTruthy();
    expect((screen.getByRole('button', { name: 'Next' }) as HTMLButtonElement).disabled).toBe(true);
    fireEvent.input(screen.getByLabelText('Go to page'), { target: { value: '1000001' } });
    fireEvent.click(screen.getByRole('button', { name: 'Go' }));
    expect(screen.getByRole('alert').textContent).toBe('a page from 1 to 1,000,000');
    expect(onPage).not.toHaveBeenCalled();
  });

  it('has no page field for a single page, and keeps its text', () => {
    render(<Pager page={1} pageSize={10} total={1} onPage={() => {}} />);
    expect(screen.getByText('Page 1 of 1 (1 in all)')).toBeTruthy();
    expect(screen.queryByLabelText('Go to page')).toBeNull();
  });

  it('typedPage reads digits, with the grouping the pager shows', () => {
    expect(typedPage('12')).toBe(12);
    expect(typedPage(' 1,234 ')).toBe(1234);
    for (const text of ['', '-1', '1.5', '1e3', '0x10', 'abc', '+2']) expect(typedPage(text)).toBeUndefined();
  });
});

describe('logQuery', () => {
  it('sends only the filters given, times as Unix seconds', () => {
    expect(logQuery(EMPTY_LOG_FILTERS, 1, 20)).toEqual({ p: 1, page_size: 20 });
    const q = logQuery({ ...EMPTY_LOG_FILTERS, type: '2', tokenName: ' ci ', modelName: 'm', group: 'g', from: '2026-01-02T03:04', requestId: 'r', upstreamRequestId: 'u' }, 3, 50);
    expect(q).toEqual({
      p: 3, page_size: 50, type: 2, token_name: 'ci', model_name: 'm', group: 'g',
      start_timestamp: Math.floor(new Date('2026-01-02T03:04').getTime() / 1000), request_id: 'r', upstream_request_id: 'u',
    });
  });
});

describe('display rules', () => {
  it('quota in dollars, keys masked', () => {
    expect(dollars(500_000)).toBe('$1.00');
    expect(dollars(1_250)).toBe('$0.0025');
    expect(maskKey('sk-abcdefghijklmnopqrstuvwxyz')).toBe('sk-abcd…wxyz');
    expect(maskKey('short')).toBe('•••••');
  });

  it('summarises the days; today is the last', () => {
    const day = (d: number, requests: number, quota: number) => ({ day: d, requests, quota, prompt_tokens: requests * 10, completion_tokens: requests });
    expect(summarise([day(1, 2, 100), day(2, 3, 50)])).toEqual({ requests: 5, quota: 150, promptTokens: 50, completionTokens: 5, todayRequests: 3, todayQuota: 50 });
    expect(summarise([])).toMatchObject({ requests: 0, todayRequests: 0 });
  });

  it('builds the epay redirect, reads cookies, sorts options', () => {
    expect(epayRedirectUrl('https://pay.example/submit.php', { pid: '1', sign: 'a b' })).toBe('https://pay.example/submit.php?pid=1&sign=a+b');
    expect(readCookie('a=1; console_csrf=x%3Dy; b=2', 'console_csrf')).toBe('x=y');
    expect(readCookie('a=1', 'console_csrf')).toBeUndefined();
    expect(optionSection('ModelRatio')).toBe('Ratios and prices');
    expect(optionSection('GroupRatio')).toBe('Ratios and prices');
    expect(optionSection('EpayKey')).toBe('Payments and top-up');
    expect(accountGroups([{ key: 'GroupRatio', value: '{"default":1,"vip":2}' }])).toEqual(['default', 'vip']);
    expect(accountGroups([{ key: 'GroupRatio', value: 'not json' }])).toEqual([]);
    expect(accountGroups(undefined)).toEqual([]);
  });

  it('an account edit sends only the fields changed from what the form showed', () => {
    const shown = { username: 'ann', group: 'vip', display_name: 'x', status: 2 };
    const form = { username: 'ann', group: 'vip', displayName: 'x', status: '2', password: '' };
    expect(accountChanges(shown, form)).toEqual({});
    expect(accountChanges(shown, { ...form, displayName: 'y' })).toEqual({ display_name: 'y' });
    expect(accountChanges(shown, { ...form, group: 'default', status: '1' })).toEqual({ group: 'default', status: 1 });
    expect(accountChanges(shown, { ...form, username: 'anna' })).toEqual({ username: 'anna' });
    // A password only when one was typed: the empty field is no reset.
    expect(accountChanges(shown, { ...form, password: 'new-pass-1' })).toEqual({ password: 'new-pass-1' });
  });

  it('labels top-up amounts as credit, with the discount the API applies', () => {
    const tiers = { 20: 0.95, 100: 0.9 };
    expect(discountFor(10, tiers)).toBe(1);
    expect(discountFor(50, tiers)).toBe(0.95);
    expect(discountFor(100, tiers)).toBe(0.9);
    expect(amountLabel(10, tiers)).toBe('$10');
    expect(amountLabel(50, tiers)).toBe('$50 (5% off)');
    expect(priceText('1234.50', 200, tiers)).toBe("To pay: 1,234.50 in the payment provider's currency, for $200.00 of credit (10% off).");
    expect(priceText('73.00', 10, tiers)).toBe("To pay: 73.00 in the payment provider's currency, for $10.00 of credit.");
    expect(priceText('80.00', 10, tiers, 'card')).toBe("To pay by card: 80.00 in the card provider's currency, for $10.00 of credit.");
  });

  it('makes a link of an http(s) top-up link only', () => {
    expect(topUpHref('https://shop.example/topup')).toBe('https://shop.example/topup');
    expect(topUpHref('HTTP://shop.example')).toBe('HTTP://shop.example');
    for (const s of ['javascript:alert(document.domain)', ' javascript:alert(1)', 'JaVaScRiPt:alert(1)', 'data:text/html,x', '//evil.example', '', undefined]) {
      expect(topUpHref(s), String(s)).toBeUndefined();
    }
  });
});
