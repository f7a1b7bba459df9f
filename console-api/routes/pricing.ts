// GET /api/pricing: new-api's pricing page, for the signed-in account. new-api can serve it publicly
// (its setting), but here the list is the account's own (the groups it may use, their ratios) and the
// contract puts every console endpoint behind Authorization; an anonymous list would also tell anyone
// which models the operator's channels carry. See README.md for the answer's fields.
import { z } from 'zod';
import { ROLE } from '../accounts/roles.js';
import type { ConsoleContext } from '../context.js';
import type { Api } from '../http/api.js';
import { ok } from '../http/envelope.js';
import { loadAccountPricing } from '../options/model-pricing.js';

const dollarsPerMillion = (what: string) =>
  z.number().nullable().describe(`${what} in US dollars per million tokens at group ratio 1 (times group_ratio[group] for a group); null when not priced`);

export const modelPricingSchema = z.object({
  model_name: z.string(),
  priced: z.boolean().describe('false: a channel serves it but no ratio prices it, so the relay refuses it (404 model_not_priced) until an administrator sets its ModelRatio'),
  model_ratio: z.number().nullable(),
  completion_ratio: z.number().nullable().describe('output relative to input'),
  cache_ratio: z.number().nullable().describe('a cached input read relative to input'),
  input_price: dollarsPerMillion('input'),
  output_price: dollarsPerMillion('output'),
  cache_read_price: dollarsPerMillion('cached input read'),
  enable_groups: z.array(z.string()).describe('the groups serving it that the account may use'),
});

export const pricingSchema = z.object({
  group: z.string().describe("the account's own group"),
  group_ratio: z.record(z.string(), z.number()).describe('the groups the account may use → price ratio'),
  models: z.array(modelPricingSchema),
});

export function registerPricingRoutes(api: Api, ctx: ConsoleContext): void {
  api.route({
    method: 'GET', path: '/api/pricing', tag: 'account', access: ROLE.user, data: pricingSchema,
    summary: 'The models the account can use (served by an enabled channel in a group it may use), their ratios and prices per million tokens',
  }, async ({ user }) => {
    // Typed by the documented schema, so the document and the answer cannot drift apart.
    const data: z.output<typeof pricingSchema> = await loadAccountPricing(ctx.sql, user.group);
    return ok(data);
  });
}
