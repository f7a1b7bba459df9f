// Small building blocks every page uses: labelled fields, errors next to their cause, loading states,
// paging. Every control has a visible label; every button has text.
import type { ComponentChildren, JSX } from 'preact';
import { useCallback, useEffect, useId, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from '../api/client';
import { count } from '../format';

type InputProps = Omit<JSX.InputHTMLAttributes<HTMLInputElement>, 'label' | 'onInput' | 'value'> & {
  label: string;
  value: string;
  onValue: (v: string) => void;
  error?: string | undefined;
  hint?: string;
};

export function Field({ label, value, onValue, error, hint, ...rest }: InputProps) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <input id={id} value={value} onInput={(e) => onValue((e.currentTarget as HTMLInputElement).value)}
        aria-invalid={error ? true : undefined} aria-describedby={error ? `${id}-err` : hint ? `${id}-hint` : undefined} {...rest} />
      {hint && !error && <small id={`${id}-hint`} class="hint">{hint}</small>}
      {error && <small id={`${id}-err`} class="error" role="alert">{error}</small>}
    </div>
  );
}

export function Checkbox({ label, checked, onChecked, disabled }: { label: string; checked: boolean; onChecked: (v: boolean) => void; disabled?: boolean }) {
  const id = useId();
  return (
    <div class="field checkbox">
      <input id={id} type="checkbox" checked={checked} disabled={disabled} onChange={(e) => onChecked((e.currentTarget as HTMLInputElement).checked)} />
      <label for={id}>{label}</label>
    </div>
  );
}

export function Select({ label, value, onValue, options, hint }: { label: string; value: string; onValue: (v: string) => void; options: { value: string; label: string; disabled?: boolean }[]; hint?: string | undefined }) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <select id={id} value={value} onChange={(e) => onValue((e.currentTarget as HTMLSelectElement).value)} aria-describedby={hint ? `${id}-hint` : undefined}>
        {options.map((o) => <option key={o.value} value={o.value} disabled={o.disabled}>{o.label}</option>)}
      </select>
      {hint && <small id={`${id}-hint`} class="hint">{hint}</small>}
    </div>
  );
}

/**
 * A form that opens in place of the button that opened it (Create…, Edit): once shown, its card is
 * scrolled into view and its first field takes the focus, which would otherwise fall to the page's
 * body with the button gone. When it closes, the focus goes back to the button that opened it (or,
 * that button having been drawn again, to the button of the same text). Returns the form's ref.
 */
export function useFocusOnOpen<T extends HTMLElement>() {
  const ref = useRef<T>(null);
  // Read while the form is first drawn: by the time effects run, the button that opened it may be gone.
  const [opener] = useState(() => (document.activeElement instanceof HTMLElement && document.activeElement !== document.body ? document.activeElement : null));
  useEffect(() => {
    const box = ref.current;
    if (!box) return;
    const openerText = opener?.tagName === 'BUTTON' ? opener.textContent : null;
    const first = box.querySelector<HTMLElement>('input:not([type=hidden]):not([disabled]), select:not([disabled]), textarea:not([disabled])');
    const shown = box.closest<HTMLElement>('section.card') ?? box;
    if (typeof shown.scrollIntoView === 'function') shown.scrollIntoView({ block: 'start' });
    first?.focus({ preventScroll: true });
    return () => {
      // After the page has drawn what replaces the form (the Create button comes back).
      setTimeout(() => {
        const now = document.activeElement;
        if (now && now !== document.body) return;
        const back = opener?.isConnected ? opener
          : openerText ? [...document.querySelectorAll<HTMLButtonElement>('button')].find((b) => b.textContent === openerText && !b.disabled) : undefined;
        back?.focus();
      }, 0);
    };
  }, []);
  return ref;
}

/**
 * A list's table. On a wide screen it scrolls sideways inside its card; on a narrow one (styles.css)
 * each row is a stack of "column value" lines, as scrolled sideways a phone showed only the first
 * column, with a key's actions off-screen and no sign there was more. Each cell gets its column's name
 * (data-label) for that, after every render, rows being drawn by components of their own.
 */
export function Table({ class: className, children }: { class?: string; children: ComponentChildren }) {
  const ref = useRef<HTMLTableElement>(null);
  useLayoutEffect(() => {
    const table = ref.current;
    if (!table) return;
    const names = [...table.querySelectorAll('thead th')].map((th) => th.textContent ?? '');
    // A log entry's details row spans the table and names itself (data-label in logs.tsx).
    for (const row of table.querySelectorAll('tbody tr:not(.entry-details)')) {
      [...row.children].forEach((cell, i) => cell.setAttribute('data-label', names[i] ?? ''));
    }
  });
  return <div class="scroll"><table ref={ref} class={className ? `stack ${className}` : 'stack'}>{children}</table></div>;
}

/** The page's body, or nothing, has the focus: it was lost (its element removed or disabled). */
function focusLost(): boolean {
  const now = document.activeElement;
  return !now || now === document.body;
}

/**
 * Keeps the focus near a button that its action is about to remove (its row deleted, a ban drawing
 * Unban in its place): when it, or the page's body, holds the focus now, once the page has drawn what
 * replaces it the focus goes to the button in its place in its row, else to the button of the same
 * text in the next row (or the previous one), else to the heading of its card (the list's), instead
 * of falling to the page's body.
 */
export function keepFocusNear(gone: HTMLElement): void {
  const row = gone.closest('tr') ?? gone.parentElement;
  if (!row || !(focusLost() || row.contains(document.activeElement))) return;
  const text = gone.textContent;
  const index = [...row.querySelectorAll('button')].indexOf(gone as HTMLButtonElement);
  const next = row.nextElementSibling;
  const previous = row.previousElementSibling;
  const card = gone.closest<HTMLElement>('section.card');
  setTimeout(() => {
    if (!focusLost()) return;
    const usable = (b: HTMLButtonElement | undefined) => (b && b.isConnected && !b.disabled ? b : undefined);
    const sameText = (r: Element | null) => (r?.isConnected ? [...r.querySelectorAll('button')].find((b) => b.textContent === text && !b.disabled) : undefined);
    const heading = card?.isConnected ? card.querySelector<HTMLElement>('h2') : document.querySelector<HTMLElement>('main h1');
    const target: HTMLElement | null | undefined = (row.isConnected && index >= 0 ? usable(row.querySelectorAll('button')[index]) : undefined)
      ?? sameText(next) ?? sameText(previous) ?? heading;
    if (!target) return;
    if (target.tagName.startsWith('H') && !target.hasAttribute('tabindex')) target.tabIndex = -1;
    target.focus();
  }, 0);
}

/**
 * A button whose action waits for a second press: pressed, it gives way to `confirm` and `keep`. The
 * confirming button takes the focus (the one pressed is gone, and the focus would fall to the page's
 * body); Keep or Escape go back, the focus on the first button again, as does the end of the action
 * (when the row is still there: a failure, or a change that keeps the button). An action that removes
 * the button (a deleted row) leaves the focus near it (keepFocusNear).
 */
export function ConfirmButton({ label, name, confirm, confirmName, keep = 'Keep', keepName, onConfirm, busy = false, danger = true, children }: {
  label: string;
  name?: string | undefined;
  confirm: string;
  confirmName?: string | undefined;
  keep?: string;
  keepName?: string | undefined;
  onConfirm: () => Promise<void> | void;
  busy?: boolean;
  danger?: boolean;
  children?: ComponentChildren;
}) {
  const [asking, setAsking] = useState(false);
  const first = useRef<HTMLButtonElement>(null);
  const second = useRef<HTMLButtonElement>(null);
  // Moved by this button, not when first drawn: a list's buttons must not take the focus on load.
  const moved = useRef(false);
  useEffect(() => {
    if (moved.current) (asking ? second : first).current?.focus();
  }, [asking]);
  const ask = (on: boolean) => { moved.current = true; setAsking(on); };
  // Confirmed once: the action's end may remove this button (see keepFocusNear).
  const acted = useRef(false);
  useEffect(() => () => {
    const own = first.current ?? second.current;
    if (acted.current && own) keepFocusNear(own);
  }, []);
  const escape = (e: KeyboardEvent) => { if (e.key === 'Escape') { e.preventDefault(); ask(false); } };
  if (!asking) return <button ref={first} type="button" class={danger ? 'danger' : undefined} disabled={busy} onClick={() => ask(true)} aria-label={name}>{label}</button>;
  return (
    <>
      <button ref={second} type="button" class="danger" disabled={busy} onKeyDown={escape} aria-label={confirmName}
        onClick={() => { acted.current = true; void Promise.resolve(onConfirm()).finally(() => ask(false)); }}>{confirm}</button>
      <button type="button" onClick={() => ask(false)} onKeyDown={escape} aria-label={keepName}>{keep}</button>
      {children}
    </>
  );
}

export function ErrorText({ error }: { error: string | null | undefined }) {
  if (!error) return null;
  return <p class="error" role="alert">{error}</p>;
}

export function Loading({ what = 'Loading' }: { what?: string }) {
  return <p class="loading" role="status" aria-live="polite">{what}…</p>;
}

export function Card({ title, children, actions }: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section class="card" aria-label={title}>
      <header class="card-head"><h2>{title}</h2>{actions}</header>
      {children}
    </section>
  );
}

export function errorText(err: unknown): string {
  if (err instanceof ApiError) return err.message;
  return err instanceof Error ? err.message : String(err);
}

/**
 * A load that shows its state: data, error, loading; reload() repeats it (e.g. after a change), and
 * refresh() too but without showing it as loading (a page that polls keeps its table still).
 */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): { data: T | undefined; error: string | null; loading: boolean; reload: () => void; refresh: () => void } {
  const [state, setState] = useState<{ data: T | undefined; error: string | null; loading: boolean }>({ data: undefined, error: null, loading: true });
  const [tick, setTick] = useState(0);
  const seq = useRef(0);
  const quiet = useRef(false);
  useEffect(() => {
    const mine = ++seq.current;
    if (!quiet.current) setState((s) => ({ ...s, loading: true, error: null }));
    quiet.current = false;
    load().then(
      (data) => mine === seq.current && setState({ data, error: null, loading: false }),
      (err: unknown) => mine === seq.current && setState((s) => ({ data: s.data, error: errorText(err), loading: false })),
    );
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  const refresh = useCallback(() => { quiet.current = true; setTick((t) => t + 1); }, []);
  return { ...state, reload, refresh };
}

/**
 * An action button's state: busy while it runs, its error next to it. A button disabled while busy
 * loses the focus (the browser moves it to the page's body): when the action ends, the element that
 * had it when the action started (the button pressed) gets it back, if it is still there and nothing
 * else has taken it.
 */
export function useAction(): { busy: boolean; error: string | null; run: (fn: () => Promise<void>) => Promise<void>; setError: (e: string | null) => void } {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = useCallback(async (fn: () => Promise<void>) => {
    const pressed = document.activeElement instanceof HTMLElement && document.activeElement !== document.body ? document.activeElement : null;
    setBusy(true);
    setError(null);
    try {
      await fn();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
      // Once the page has drawn the button enabled again.
      if (pressed) {
        setTimeout(() => {
          if (focusLost() && pressed.isConnected && !(pressed as HTMLButtonElement).disabled) pressed.focus();
        }, 0);
      }
    }
  }, []);
  return { busy, error, run, setError };
}

export function pageCount(total: number, pageSize: number): number {
  return Math.max(1, Math.ceil(total / pageSize));
}

/**
 * A page number typed by a person, or undefined: digits, with the grouping the pager shows ("1,234")
 * and surrounding spaces allowed; no sign, decimal point or exponent.
 */
export function typedPage(text: string): number | undefined {
  const digits = text.trim().replace(/[,\s]/g, '');
  if (!/^\d{1,15}$/.test(digits)) return undefined;
  return Number(digits);
}

/**
 * Previous / Next, where the list is, and a page to go to by its number (with hundreds of pages,
 * Next alone cannot reach the middle). A list read past its last page (its last page emptied, e.g.
 * by a deletion, and the list was read again) moves to the page that is now the last: every paged
 * list gets that here. `onPageCorrected` takes that move instead of `onPage` where the page is kept
 * in the address: the corrected address should replace the one past the end, which Back would
 * otherwise return to, only to be moved again. `maxPage` is the last page the API reads (the log's
 * `p` stops at 1,000,000): Next and the page field go no further, however many pages there are.
 */
export function Pager({ page, pageSize, total, onPage, onPageCorrected, maxPage = Infinity, label = 'Pages' }: {
  page: number;
  pageSize: number;
  total: number;
  onPage: (p: number) => void;
  onPageCorrected?: (p: number) => void;
  maxPage?: number;
  label?: string;
}) {
  const pages = pageCount(total, pageSize);
  useEffect(() => {
    if (page > pages) (onPageCorrected ?? onPage)(pages);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [page, pages]);
  const shown = Math.min(page, pages);
  const reachable = Math.min(pages, maxPage);
  const id = useId();
  const [typed, setTyped] = useState('');
  // Whether Go was pressed for what the field holds. The refusal is worked out from the page count of
  // now, not kept as text: a new page size changes the count, and with it the range or the verdict.
  const [checked, setChecked] = useState(false);
  const n = typedPage(typed);
  const refused = n === undefined || n < 1 || n > reachable;
  const error = checked && refused ? `a page from 1 to ${count(reachable)}` : null;
  const go = () => {
    if (refused) {
      setChecked(true);
      return;
    }
    setChecked(false);
    setTyped('');
    if (n !== shown) onPage(n);
  };
  return (
    <nav class="pager" aria-label={label}>
      <button type="button" disabled={shown <= 1} onClick={() => onPage(shown - 1)}>Previous</button>
      <span>Page {count(shown)} of {count(pages)} ({count(total)} in all)</span>
      <button type="button" disabled={shown >= reachable} onClick={() => onPage(shown + 1)}>Next</button>
      {reachable > 1 && (
        // Checked here rather than by the browser: its bubble is gone once dismissed; this stays by the field.
        <form class="pager-jump" noValidate onSubmit={(e) => { e.preventDefault(); go(); }}>
          <label for={id}>Go to page</label>
          <input id={id} type="number" inputMode="numeric" min={1} max={reachable} step={1} value={typed}
            onInput={(e) => { setTyped((e.currentTarget as HTMLInputElement).value); setChecked(false); }}
            aria-invalid={error ? true : undefined} aria-describedby={error ? `${id}-err` : undefined} />
          <button type="submit">Go</button>
          {error && <small id={`${id}-err`} class="error" role="alert">{error}</small>}
        </form>
      )}
    </nav>
  );
}

/**
 * Copies by selection: a hidden field holding the text is selected and document.execCommand('copy')
 * run. What a browser without the Clipboard API (a plain-HTTP address other than localhost) still does.
 */
function copyBySelection(text: string): boolean {
  const buffer = document.createElement('textarea');
  buffer.value = text;
  buffer.readOnly = true;
  buffer.className = 'copy-buffer';
  buffer.setAttribute('aria-hidden', 'true');
  const focused = document.activeElement instanceof HTMLElement ? document.activeElement : null;
  document.body.appendChild(buffer);
  buffer.select();
  let copied = false;
  try {
    copied = document.execCommand('copy');
  } catch {
    copied = false;
  }
  buffer.remove();
  focused?.focus();
  return copied;
}

/** Copies text to the clipboard: the Clipboard API where there is one and it agrees, else by selection. */
export async function copyText(text: string): Promise<boolean> {
  if (typeof navigator.clipboard?.writeText === 'function') {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // Refused (no permission, the page not focused): try the older way.
    }
  }
  return copyBySelection(text);
}

/**
 * A button that copies `text`. Where copying fails, it says so and shows the text selected in a field,
 * for the keyboard's copy. `text` may be a function fetching it (a key read from the API only when
 * asked for): the button is busy meanwhile, and a failed fetch shows its error (`describeError` may word
 * it) next to the button. `of` names what is copied in the button's accessible name (`Copy key laptop`,
 * then `Copied laptop`), for a list of such buttons.
 */
export function CopyButton({ text, label = 'Copy', of, describeError = errorText }: {
  text: string | (() => Promise<string>);
  label?: string;
  of?: string;
  describeError?: (err: unknown) => string;
}) {
  const [state, setState] = useState<'idle' | 'busy' | 'copied' | 'failed'>('idle');
  const [error, setError] = useState<string | null>(null);
  // A fetched text is held only when copying it failed (the field below shows it).
  const [fetched, setFetched] = useState<string | null>(null);
  const shown = typeof text === 'string' ? text : fetched;
  const fallback = useRef<HTMLInputElement & HTMLTextAreaElement>(null);
  useEffect(() => {
    if (state !== 'failed' || !fallback.current) return;
    fallback.current.focus();
    fallback.current.select();
  }, [state]);
  const copy = async () => {
    setError(null);
    let value: string;
    if (typeof text === 'string') {
      value = text;
    } else {
      setState('busy');
      try {
        value = await text();
      } catch (err) {
        setError(describeError(err));
        setState('idle');
        return;
      }
    }
    const ok = await copyText(value);
    if (typeof text !== 'string') setFetched(ok ? null : value);
    setState(ok ? 'copied' : 'failed');
  };
  const visible = state === 'copied' ? 'Copied' : label;
  const multiline = shown?.includes('\n') ?? false;
  return (
    <>
      <button type="button" disabled={state === 'busy'} aria-label={of ? `${visible} ${of}` : undefined} onClick={() => { void copy(); }}>{visible}</button>
      {state === 'failed' && shown !== null && (
        <span class="copy-failed">
          <span role="alert">Copying failed: the text is selected below; press Ctrl+C (⌘C on a Mac) to copy it.</span>
          {multiline
            ? <textarea ref={fallback} readOnly aria-label="Text to copy" rows={Math.min(8, shown.split('\n').length)} value={shown} />
            : <input ref={fallback} readOnly aria-label="Text to copy" value={shown} />}
        </span>
      )}
      <ErrorText error={error} />
    </>
  );
}

/**
 * Messages of the API that name their field in words rather than as "field: reason": each is about
 * that field (USERNAME_TAKEN, 409, of registration and of an administrator's rename).
 */
const FIELD_MESSAGES: Record<string, [string, string]> = {
  'username is already taken': ['username', 'is already taken'],
};

/**
 * The API names the field at fault as "field: reason", and joins several with "; " ("name: too long;
 * model_mapping: not JSON"): each reason goes next to its field, any other part next to the form's
 * button. A "; " inside a reason stays, as the split is only before a next "field: ". Returns [errors
 * by field, the rest].
 */
export function splitFieldError(message: string | null, fields: readonly string[]): [Record<string, string>, string | null] {
  if (!message) return [{}, null];
  const whole = FIELD_MESSAGES[message];
  if (whole && fields.includes(whole[0])) return [{ [whole[0]]: whole[1] }, null];
  const byField: Record<string, string> = {};
  const rest: string[] = [];
  for (const part of message.split(/; (?=[a-z_]+(?:\.[a-z_0-9]+)*: )/)) {
    const m = /^([a-z_]+(?:\.[a-z_0-9]+)*): (.+)$/s.exec(part);
    const field = m?.[1]?.split('.')[0];
    if (m && field && fields.includes(field)) byField[field] = byField[field] ? `${byField[field]}; ${m[2]!}` : m[2]!;
    else rest.push(part);
  }
  return [byField, rest.length > 0 ? rest.join('; ') : null];
}
