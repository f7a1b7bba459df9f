// The epay ("易支付") merchant protocol, as new-api speaks it (github.com/Calcium-Ion/go-epay):
//   sign = md5( k1=v1&k2=v2&...  +  merchant key )   lower-case hex
// over every parameter except `sign`, `sign_type` and empty values, sorted by name (byte order),
// values not URL-encoded. A purchase is a form of {pid, type, out_trade_no, notify_url, return_url,
// name, money, sign, sign_type: 'MD5'} submitted to <PayAddress>/submit.php; after payment the
// provider calls notify_url (GET query or POST form) with {pid, trade_no, out_trade_no, type, name,
// money, trade_status, sign, sign_type} and expects the text `success`.
import { createHash, timingSafeEqual } from 'node:crypto';

export type EpayParams = Record<string, string>;

export function epaySigningString(params: EpayParams): string {
  return Object.keys(params)
    .filter((k) => k !== 'sign' && k !== 'sign_type' && params[k] !== undefined && params[k] !== '')
    .sort()
    .map((k) => `${k}=${params[k]}`)
    .join('&');
}

export function epaySign(params: EpayParams, key: string): string {
  return createHash('md5').update(epaySigningString(params) + key, 'utf8').digest('hex');
}

/** Constant-time check of `params.sign`. */
export function epayVerify(params: EpayParams, key: string): boolean {
  const given = params.sign;
  if (typeof given !== 'string' || !/^[0-9a-fA-F]{32}$/.test(given) || key === '') return false;
  const expected = Buffer.from(epaySign(params, key), 'hex');
  return timingSafeEqual(expected, Buffer.from(given.toLowerCase(), 'hex'));
}

export interface EpayPurchase {
  pid: string;
  type: string;
  out_trade_no: string;
  notify_url: string;
  return_url: string;
  name: string;
  money: string;
  sign: string;
  sign_type: 'MD5';
}

export function epayPurchase(input: Omit<EpayPurchase, 'sign' | 'sign_type'>, key: string): EpayPurchase {
  const params: EpayParams = { ...input };
  return { ...input, sign: epaySign(params, key), sign_type: 'MD5' };
}

export const EPAY_TRADE_SUCCESS = 'TRADE_SUCCESS';
