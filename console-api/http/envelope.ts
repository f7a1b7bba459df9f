// The console envelope: `{success, message, data?}`; message is '' on success.
export interface Envelope<T> {
  success: boolean;
  message: string;
  data?: T;
}

export function ok(): Envelope<never>;
export function ok<T>(data: T): Envelope<T>;
export function ok<T>(...args: [T?]): Envelope<T> {
  return args.length === 0 ? { success: true, message: '' } : { success: true, message: '', data: args[0] as T };
}

export function fail(message: string): Envelope<never> {
  return { success: false, message };
}

export interface Page<T> {
  items: T[];
  total: number;
  page: number;
  page_size: number;
}
