// Named shapes the pages pass around, read off the generated paths (never written by hand).
import type { paths } from './schema.gen';

type Data<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends { responses: { 200: { content: { 'application/json': { data?: infer D } } } } } ? NonNullable<D> : never;
export type Body<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends { requestBody: { content: { 'application/json': infer B } } } ? B : never;
export type Query<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

export type Account = Data<'/api/user/self', 'get'>;
export type ApiKey = Data<'/api/token/', 'get'>['items'][number];
export type ApiKeyInput = Body<'/api/token/', 'post'>;
export type LogEntry = Data<'/api/log/self', 'get'>['items'][number];
export type LogQuery = Query<'/api/log/self', 'get'>;
export type DailyUsage = Data<'/api/log/self/daily', 'get'>[number];
export type TopupInfo = Data<'/api/user/topup/info', 'get'>;
export type TopupOrder = Data<'/api/user/topup/self', 'get'>['items'][number];
export type Groups = Data<'/api/user/self/groups', 'get'>;
export type Channel = Data<'/api/channel/{id}', 'get'>;
export type ChannelInput = Body<'/api/channel/', 'post'>;
export type Redemption = Data<'/api/redemption/', 'get'>['items'][number];
export type OptionItem = Data<'/api/option/', 'get'>[number];
