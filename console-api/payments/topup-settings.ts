// The payment side of the options table, read once per request: what GET /api/user/topup/info shows
// and what the payment endpoints check.
import type { Db } from '../db.js';
import { loadOptionView, type Options, type PayMethod } from '../options/option-catalogue.js';

export interface TopupSettings {
  serverAddress: string;
  topUpLink: string;
  redemptionEnabled: boolean;
  complianceConfirmed: boolean;
  complianceTermsVersion: number;
  payMethods: PayMethod[];
  minTopUp: number;
  cardpayMinTopUp: number;
  globalpayMinTopUp: number;
  globalpayPancakeMinTopUp: number;
  amountOptions: number[];
  discount: Record<string, number>;
  price: number;
  cardpayUnitPrice: number;
  epay: { address: string; pid: string; key: string };
  cardpay: { apiAddress: string; apiSecret: string; webhookSecret: string; currency: string };
  /** QR-code (epay) payments: credentials set and the compliance terms confirmed. */
  epayEnabled: boolean;
  cardpayEnabled: boolean;
}

/** `options`: the options already read (one read for a route that needs others too). */
export async function loadTopupSettings(db: Db, options?: Options): Promise<TopupSettings> {
  const o = options ?? await loadOptionView(db);
  // The secrets are opened when read, not here: one that cannot be opened (sealed under another
  // KEY_SECRET, after a restore) fails the payment call that needs it, not /api/status, the top-up
  // page or redemption, which read these settings too.
  const epay = {
    address: o.get<string>('PayAddress'), pid: o.get<string>('EpayId'),
    get key() { return o.get<string>('EpayKey'); },
  };
  const cardpay = {
    apiAddress: o.get<string>('CardpayApiAddress'),
    get apiSecret() { return o.get<string>('CardpayApiSecret'); },
    get webhookSecret() { return o.get<string>('CardpayWebhookSecret'); },
    currency: o.get<string>('CardpayCurrency'),
  };
  const complianceConfirmed = o.get<boolean>('PaymentComplianceConfirmed');
  return {
    serverAddress: o.get<string>('ServerAddress'),
    topUpLink: o.get<string>('TopUpLink'),
    redemptionEnabled: o.get<boolean>('RedemptionEnabled'),
    complianceConfirmed,
    complianceTermsVersion: o.get<number>('PaymentComplianceTermsVersion'),
    payMethods: o.get<PayMethod[]>('PayMethods'),
    minTopUp: o.get<number>('MinTopUp'),
    cardpayMinTopUp: o.get<number>('CardpayMinTopUp'),
    globalpayMinTopUp: o.get<number>('GlobalpayMinTopUp'),
    globalpayPancakeMinTopUp: o.get<number>('GlobalpayPancakeMinTopUp'),
    amountOptions: o.get<number[]>('AmountOptions'),
    discount: o.get<Record<string, number>>('AmountDiscount'),
    price: o.get<number>('Price'),
    cardpayUnitPrice: o.get<number>('CardpayUnitPrice'),
    epay,
    cardpay,
    epayEnabled: complianceConfirmed && epay.address !== '' && epay.pid !== '' && o.configured('EpayKey'),
    cardpayEnabled: complianceConfirmed && cardpay.apiAddress !== '' && o.configured('CardpayApiSecret') && o.configured('CardpayWebhookSecret'),
  };
}

/**
 * Minimum of one QR-code method: the larger of MinTopUp and its own min_topup (when set). A method's
 * minimum may raise MinTopUp, never lower it: MinTopUp is the contract's top-level min_topup, the least
 * that POST /api/user/amount prices, and the web console's methodMinimum (console-web/src/pages/topup.tsx)
 * reads the two the same way. Taking the method's own alone let POST /api/user/pay open an order below
 * MinTopUp.
 */
export function methodMinimum(s: TopupSettings, m: PayMethod): number {
  const own = m.min_topup === undefined || m.min_topup === '' ? NaN : Number(m.min_topup);
  return Math.max(s.minTopUp, Number.isFinite(own) && own > 0 ? Math.ceil(own) : 0);
}

/** The contract's Top-up configuration. */
export function topupInfo(s: TopupSettings) {
  return {
    enable_online_topup: s.epayEnabled,
    enable_cardpay_topup: s.cardpayEnabled,
    // Not integrated: the product-based and global providers are never enabled here.
    enable_productpay_topup: false,
    enable_globalpay_topup: false,
    enable_globalpay_pancake_topup: false,
    enable_redemption: s.redemptionEnabled,
    payment_compliance_confirmed: s.complianceConfirmed,
    payment_compliance_terms_version: s.complianceTermsVersion,
    pay_methods: s.complianceConfirmed
      ? s.payMethods.map((m) => ({ name: m.name, type: m.type, color: m.color ?? '', min_topup: String(methodMinimum(s, m)) }))
      : [],
    globalpay_pay_methods: null,
    productpay_products: null,
    min_topup: s.minTopUp,
    cardpay_min_topup: s.cardpayMinTopUp,
    globalpay_min_topup: s.globalpayMinTopUp,
    globalpay_pancake_min_topup: s.globalpayPancakeMinTopUp,
    amount_options: s.amountOptions,
    discount: s.discount,
    topup_link: s.topUpLink,
  };
}
