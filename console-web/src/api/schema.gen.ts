// Generated from the console API's OpenAPI document by console-api/http/openapi-typescript.ts
// (`make build`, or `node dist/console-api/http/write-web-api-types.js`). Do not edit.

export interface paths {
  "/api/cardpay/webhook": {
    /** Card provider webhook: signed event (Cardpay-Signature or Stripe-Signature: t=..,v1=HMAC-SHA256) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                received: boolean;
                credited: boolean;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/channel/": {
    /** List channels (paged, newest first); keyword matches the name in part, group one of its groups, status 1, 2, 3, enabled or disabled (role >= 10) */
    get: {
      parameters: {
        query?: {
          p?: number;
          page?: number;
          page_size?: number;
          keyword?: string;
          group?: string;
          status?: "1" | "2" | "3" | "enabled" | "disabled";
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                items: ({
                  id: number;
                  type: number;
                  name: string;
                  base_url: string;
                  status: number;
                  models: string;
                  group: string;
                  priority: number;
                  weight: number;
                  model_mapping: string;
                  created_time: number;
                  used_quota: number;
                  response_time: number;
                  test_time: number;
                  status_reason: string;
                  status_time: number;
                  probe_time: number;
                  probe_result: string;
                  probe_failures: number;
                  next_probe_time: number;
                  auto_ban: boolean;
                  fault_threshold: number | null;
                  fault_rate_threshold: number | null;
                  flex_ratio: number;
                })[];
                total: number;
                page: number;
                page_size: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
    /** Create a channel (its key is sealed and never returned) and its abilities (role >= 10) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            name: string;
            type?: 1 | 14;
            base_url: string;
            key: string;
            models: string | (string)[];
            group?: string | (string)[];
            priority?: number;
            weight?: number;
            model_mapping?: string | {
              [key: string]: string;
            } | null;
            status?: 1 | 2 | 3;
            auto_ban?: boolean | 0 | 1;
            fault_threshold?: number | null;
            fault_rate_threshold?: number | null;
            flex_ratio?: number;
            test_model?: string | null;
            tag?: string | null;
            other?: string | null;
            status_code_mapping?: string | null;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                id: number;
                type: number;
                name: string;
                base_url: string;
                status: number;
                models: string;
                group: string;
                priority: number;
                weight: number;
                model_mapping: string;
                created_time: number;
                used_quota: number;
                response_time: number;
                test_time: number;
                status_reason: string;
                status_time: number;
                probe_time: number;
                probe_result: string;
                probe_failures: number;
                next_probe_time: number;
                auto_ban: boolean;
                fault_threshold: number | null;
                fault_rate_threshold: number | null;
                flex_ratio: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
    /** Update a channel: any creation field (key only when given); abilities are rebuilt in the same transaction (role >= 10) */
    put: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            name?: string;
            type?: 1 | 14;
            base_url?: string;
            key?: string;
            models?: string | (string)[];
            group?: string | (string)[];
            priority?: number;
            weight?: number;
            model_mapping?: string | {
              [key: string]: string;
            } | null;
            status?: 1 | 2 | 3;
            auto_ban?: boolean | 0 | 1;
            fault_threshold?: number | null;
            fault_rate_threshold?: number | null;
            flex_ratio?: number;
            test_model?: string | null;
            tag?: string | null;
            other?: string | null;
            status_code_mapping?: string | null;
            id: number;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                id: number;
                type: number;
                name: string;
                base_url: string;
                status: number;
                models: string;
                group: string;
                priority: number;
                weight: number;
                model_mapping: string;
                created_time: number;
                used_quota: number;
                response_time: number;
                test_time: number;
                status_reason: string;
                status_time: number;
                probe_time: number;
                probe_result: string;
                probe_failures: number;
                next_probe_time: number;
                auto_ban: boolean;
                fault_threshold: number | null;
                fault_rate_threshold: number | null;
                flex_ratio: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/channel/test/{id}": {
    /** Send a one-token request to the channel with its key; report the response time (role >= 10) */
    get: {
      parameters: {
        query?: {
          model?: string;
        };
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                time: number;
                response_time: number;
                model: string;
                status_code: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/channel/{id}": {
    /** Delete a channel and its abilities (role >= 10) */
    delete: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
    /** One channel (without its key) (role >= 10) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                id: number;
                type: number;
                name: string;
                base_url: string;
                status: number;
                models: string;
                group: string;
                priority: number;
                weight: number;
                model_mapping: string;
                created_time: number;
                used_quota: number;
                response_time: number;
                test_time: number;
                status_reason: string;
                status_time: number;
                probe_time: number;
                probe_result: string;
                probe_failures: number;
                next_probe_time: number;
                auto_ban: boolean;
                fault_threshold: number | null;
                fault_rate_threshold: number | null;
                flex_ratio: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/log/": {
    /** Every account's request log, newest first, paged from 1: /api/log/self's filters plus `username` and `channel` (role >= 10) */
    get: {
      parameters: {
        query?: {
          p?: number;
          page?: number;
          page_size?: number;
          type?: number;
          token_name?: string;
          model_name?: string;
          group?: string;
          start_timestamp?: number;
          end_timestamp?: number;
          request_id?: string;
          upstream_request_id?: string;
          channel?: number;
          username?: string;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                items: ({
                  id: number;
                  user_id: number;
                  created_at: number;
                  type: number;
                  content: string;
                  username: string;
                  token_name: string;
                  model_name: string;
                  quota: number;
                  prompt_tokens: number;
                  completion_tokens: number;
                  use_time: number;
                  is_stream: boolean;
                  channel: number;
                  token_id: number;
                  group: string;
                  request_id: string;
                  upstream_request_id: string;
                  protocol: "anthropic" | "openai" | "";
                })[];
                total: number;
                page: number;
                page_size: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/log/self": {
    /** The caller's request log, newest first, paged from 1; every filter of the contract (role >= 1) */
    get: {
      parameters: {
        query?: {
          p?: number;
          page?: number;
          page_size?: number;
          type?: number;
          token_name?: string;
          model_name?: string;
          group?: string;
          start_timestamp?: number;
          end_timestamp?: number;
          request_id?: string;
          upstream_request_id?: string;
          channel?: number;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                items: ({
                  id: number;
                  user_id: number;
                  created_at: number;
                  type: number;
                  content: string;
                  username: string;
                  token_name: string;
                  model_name: string;
                  quota: number;
                  prompt_tokens: number;
                  completion_tokens: number;
                  use_time: number;
                  is_stream: boolean;
                  channel: number;
                  token_id: number;
                  group: string;
                  request_id: string;
                  upstream_request_id: string;
                  protocol: "anthropic" | "openai" | "";
                })[];
                total: number;
                page: number;
                page_size: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/log/self/daily": {
    /** The caller's consumption per day: requests, quota and tokens for each of the last `days` (default 30, at most 90) days, oldest first (role >= 1) */
    get: {
      parameters: {
        query?: {
          days?: number;
          utc_offset?: number;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: ({
                day: number;
                requests: number;
                quota: number;
                prompt_tokens: number;
                completion_tokens: number;
              })[];
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/log/self/stat": {
    /** Quota in the range and filters; rpm and tpm over the last 60 seconds (role >= 1) */
    get: {
      parameters: {
        query?: {
          start_timestamp?: number;
          end_timestamp?: number;
          type?: number;
          token_name?: string;
          model_name?: string;
          channel?: number;
          group?: string;
          request_id?: string;
          upstream_request_id?: string;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                quota: number;
                rpm: number;
                tpm: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/log/stat": {
    /** Quota in the window and filters, rpm and tpm over the last 60 seconds: every account, or `username`'s (role >= 10) */
    get: {
      parameters: {
        query?: {
          start_timestamp?: number;
          end_timestamp?: number;
          type?: number;
          token_name?: string;
          model_name?: string;
          channel?: number;
          group?: string;
          request_id?: string;
          upstream_request_id?: string;
          username?: string;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                quota: number;
                rpm: number;
                tpm: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/oauth/email/bind": {
    /** Bind an e-mail address to the account with the code GET /api/verification?purpose=bind mailed to it (role >= 1) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            email: string;
            code: string;
            original_password?: string;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        409: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        429: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/oauth/oidc": {
    /** The OpenID Connect redirect URI: signs in (a session token, as login), creates the account, or binds it (token empty); a browser navigation gets the web console's session cookies and a 303 to / */
    get: {
      parameters: {
        query: {
          code: string;
          state: string;
          iss?: string;
          session_state?: string;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                id: number;
                username: string;
                display_name: string;
                role: number;
                status: number;
                group: string;
                token: string;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        409: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        429: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        502: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/oauth/oidc/start": {
    /** Start OpenID Connect sign-on: the provider URL to send the browser to (PKCE, state, nonce); with a console credential, binds the caller's account */
    get: {
      parameters: {
        query?: {
          aff_code?: string;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                authorization_url: string;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        429: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        502: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/openapi.json": {
    /** This OpenAPI 3.1 document (not wrapped in the envelope) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              [key: string]: unknown;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/option/": {
    /** Every option with its value (secrets blank), who may change it and what it means (role >= 10) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: ({
                key: string;
                value: string;
                secret: boolean;
                configured: boolean;
                write_role: number;
                description: string;
              })[];
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
    /** Set one option {key, value}; every option needs role 100 (the super administrator), as in new-api (role >= 10) */
    put: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            key: string;
            value: string | number | boolean | (unknown)[] | {
              [key: string]: unknown;
            };
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/pricing": {
    /** The models the account can use (served by an enabled channel in a group it may use), their ratios and prices per million tokens (role >= 1) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                group: string;
                group_ratio: {
                  [key: string]: number;
                };
                models: ({
                  model_name: string;
                  priced: boolean;
                  model_ratio: number | null;
                  completion_ratio: number | null;
                  cache_ratio: number | null;
                  input_price: number | null;
                  output_price: number | null;
                  cache_read_price: number | null;
                  enable_groups: (string)[];
                })[];
              };
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/redemption/": {
    /** List codes, masked (paged, newest first); keyword matches the name in part or the code exactly (role >= 10) */
    get: {
      parameters: {
        query?: {
          p?: number;
          page?: number;
          page_size?: number;
          keyword?: string;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                items: ({
                  id: number;
                  user_id: number;
                  name: string;
                  key: string;
                  status: number;
                  quota: number;
                  created_time: number;
                  redeemed_time: number;
                  used_user_id: number;
                  expired_time: number;
                })[];
                total: number;
                page: number;
                page_size: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
    /** Create count (1–100, default 1) codes of quota each; data is the codes (listings mask them) (role >= 10) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            name: string;
            quota: number;
            count?: number;
            expired_time?: number;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: (string)[];
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
    /** Edit an unused code: status (1 enable, 2 disable), name, quota, expiry; ?status_only=true changes only the status (role >= 10) */
    put: {
      parameters: {
        query?: {
          status_only?: "true" | "false";
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            id: number;
            status?: 1 | 2;
            name?: string;
            quota?: number;
            expired_time?: number;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                id: number;
                user_id: number;
                name: string;
                key: string;
                status: number;
                quota: number;
                created_time: number;
                redeemed_time: number;
                used_user_id: number;
                expired_time: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        409: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/redemption/{id}": {
    /** Delete a code (a used one too: its credit stays in the ledger and the log) (role >= 10) */
    delete: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
    /** One code, masked (role >= 10) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                id: number;
                user_id: number;
                name: string;
                key: string;
                status: number;
                quota: number;
                created_time: number;
                redeemed_time: number;
                used_user_id: number;
                expired_time: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/redemption/{id}/key": {
    /** Reveal a code to an administrator who may change it (Cache-Control: no-store) (role >= 10) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                key: string;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/reset_password": {
    /** Mail a password reset code to the address, when an account has it */
    get: {
      parameters: {
        query: {
          email: string;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/status": {
    /** Service status and public settings */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                version: string;
                quota_per_unit: number;
                server_address: string;
                top_up_link: string;
                enable_online_topup: boolean;
                enable_cardpay_topup: boolean;
                enable_redemption: boolean;
                time: number;
                register_enabled: boolean;
                password_register_enabled: boolean;
                email_verification: boolean;
                email_enabled: boolean;
                oidc_enabled: boolean;
                aff_transfer_min_quota: number;
              };
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/token/": {
    /** The caller's keys, masked, newest first; keyword matches the name in part (role >= 1) */
    get: {
      parameters: {
        query?: {
          p?: number;
          page?: number;
          page_size?: number;
          keyword?: string;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                items: ({
                  id: number;
                  user_id: number;
                  name: string;
                  key: string;
                  status: number;
                  created_time: number;
                  accessed_time: number;
                  expired_time: number;
                  remain_quota: number;
                  unlimited_quota: boolean;
                  used_quota: number;
                  model_limits_enabled: boolean;
                  model_limits: string;
                  allow_ips: string | null;
                  group: string;
                  cross_group_retry: boolean;
                  rate_limit_rpm: number;
                  rate_limit_tpm: number;
                })[];
                total: number;
                page: number;
                page_size: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
    /** Create an API key (the key is not in the response) (role >= 1) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            name: string;
            expired_time: number;
            remain_quota: number;
            unlimited_quota: boolean;
            model_limits_enabled?: boolean;
            model_limits?: string;
            allow_ips?: string | null;
            group?: string;
            cross_group_retry?: boolean;
            rate_limit_rpm?: number;
            rate_limit_tpm?: number;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        429: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
    /** Update an own key (any creation field, status; with expected_remain_quota, remain_quota only if it is still that); with ?status_only=true only the status changes (role >= 1) */
    put: {
      parameters: {
        query?: {
          status_only?: "true" | "false";
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            id: number;
            status?: 1 | 2;
            name?: string;
            expired_time?: number;
            remain_quota?: number;
            unlimited_quota?: boolean;
            model_limits_enabled?: boolean;
            model_limits?: string;
            allow_ips?: string | null;
            group?: string;
            cross_group_retry?: boolean;
            rate_limit_rpm?: number;
            rate_limit_tpm?: number;
            expected_remain_quota?: number;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                id: number;
                user_id: number;
                name: string;
                key: string;
                status: number;
                created_time: number;
                accessed_time: number;
                expired_time: number;
                remain_quota: number;
                unlimited_quota: boolean;
                used_quota: number;
                model_limits_enabled: boolean;
                model_limits: string;
                allow_ips: string | null;
                group: string;
                cross_group_retry: boolean;
                rate_limit_rpm: number;
                rate_limit_tpm: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        409: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        429: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/token/search": {
    /** Same as GET /api/token/ (new-api path) (role >= 1) */
    get: {
      parameters: {
        query?: {
          p?: number;
          page?: number;
          page_size?: number;
          keyword?: string;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                items: ({
                  id: number;
                  user_id: number;
                  name: string;
                  key: string;
                  status: number;
                  created_time: number;
                  accessed_time: number;
                  expired_time: number;
                  remain_quota: number;
                  unlimited_quota: boolean;
                  used_quota: number;
                  model_limits_enabled: boolean;
                  model_limits: string;
                  allow_ips: string | null;
                  group: string;
                  cross_group_retry: boolean;
                  rate_limit_rpm: number;
                  rate_limit_tpm: number;
                })[];
                total: number;
                page: number;
                page_size: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/token/{id}": {
    /** Delete an own key (soft: deleted_at is set; the relay refuses it at once) (role >= 1) */
    delete: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        429: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
    /** One own key, masked (role >= 1) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                id: number;
                user_id: number;
                name: string;
                key: string;
                status: number;
                created_time: number;
                accessed_time: number;
                expired_time: number;
                remain_quota: number;
                unlimited_quota: boolean;
                used_quota: number;
                model_limits_enabled: boolean;
                model_limits: string;
                allow_ips: string | null;
                group: string;
                cross_group_retry: boolean;
                rate_limit_rpm: number;
                rate_limit_tpm: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/token/{id}/key": {
    /** Reveal the full key to its owner (Cache-Control: no-store) (role >= 1) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                key: string;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/": {
    /** List accounts (paged); optional keyword and group filters; an administrator sees only accounts of a lower role (role >= 10) */
    get: {
      parameters: {
        query?: {
          p?: number;
          page?: number;
          page_size?: number;
          keyword?: string;
          group?: string;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                items: ({
                  id: number;
                  username: string;
                  display_name: string;
                  role: number;
                  status: number;
                  email: string;
                  code_host_id: string;
                  chat_platform_id: string;
                  oidc_id: string;
                  social_app_id: string;
                  messenger_id: string;
                  forum_id: string;
                  group: string;
                  quota: number;
                  used_quota: number;
                  request_count: number;
                  aff_code: string;
                  aff_count: number;
                  aff_quota: number;
                  aff_history_quota: number;
                  inviter_id: number;
                  setting: string;
                  card_provider_customer: string;
                  sidebar_modules: string;
                  permissions: {
                    [key: string]: boolean;
                  };
                })[];
                total: number;
                page: number;
                page_size: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
    /** Create an account of a lower role than the caller's (role 1 by default; 10 by the super administrator), in group `default` unless one is given (role >= 10) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            username: string;
            password: string;
            display_name?: string;
            role?: 1 | 10;
            group?: string;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                id: number;
                username: string;
                display_name: string;
                role: number;
                status: number;
                email: string;
                code_host_id: string;
                chat_platform_id: string;
                oidc_id: string;
                social_app_id: string;
                messenger_id: string;
                forum_id: string;
                group: string;
                quota: number;
                used_quota: number;
                request_count: number;
                aff_code: string;
                aff_count: number;
                aff_quota: number;
                aff_history_quota: number;
                inviter_id: number;
                setting: string;
                card_provider_customer: string;
                sidebar_modules: string;
                permissions: {
                  [key: string]: boolean;
                };
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        409: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
    /** Edit an account of a lower role: quota (sets the balance; a management log row; with expected_quota, only if the balance is still that), group, status, display name, username, password (revokes its sessions and access tokens) (role >= 10) */
    put: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            id: number;
            quota?: number;
            expected_quota?: number;
            group?: string;
            status?: 1 | 2;
            display_name?: string;
            password?: "" | string;
            username?: string;
            email?: string;
            role?: number;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                id: number;
                username: string;
                display_name: string;
                role: number;
                status: number;
                email: string;
                code_host_id: string;
                chat_platform_id: string;
                oidc_id: string;
                social_app_id: string;
                messenger_id: string;
                forum_id: string;
                group: string;
                quota: number;
                used_quota: number;
                request_count: number;
                aff_code: string;
                aff_count: number;
                aff_quota: number;
                aff_history_quota: number;
                inviter_id: number;
                setting: string;
                card_provider_customer: string;
                sidebar_modules: string;
                permissions: {
                  [key: string]: boolean;
                };
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        409: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/aff": {
    /** The own invitation code (aff_code), to be passed as aff_code at registration (role >= 1) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/aff_transfer": {
    /** Move referral quota (aff_quota) to the balance: at least AffTransferMinQuota, at most aff_quota (role >= 1) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            quota: number;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/amount": {
    /** Price of a quantity for QR-code payment, discount applied: data is the money as a string with two decimals (role >= 1) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            amount: number;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: string;
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/cardpay/amount": {
    /** Price of a quantity for card payment (CardpayUnitPrice, discount applied), as a string with two decimals (role >= 1) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            amount: number;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: string;
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/cardpay/pay": {
    /** Start a card payment: a pending order and the provider's checkout link (role >= 1) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            amount: number;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                pay_link: string;
                trade_no: string;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        429: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        502: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/epay/notify": {
    /** epay notify: parameters in the query (GET) or a form body (POST); answers the text success or fail */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "text/plain": string;
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "text/plain": "fail";
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "text/plain": "fail";
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "text/plain": "fail";
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "text/plain": "fail";
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "text/plain": "fail";
          };
        };
      };
    };
    /** epay notify: parameters in the query (GET) or a form body (POST); answers the text success or fail */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "text/plain": string;
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "text/plain": "fail";
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "text/plain": "fail";
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "text/plain": "fail";
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "text/plain": "fail";
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "text/plain": "fail";
          };
        };
      };
    };
  };
  "/api/user/login": {
    /** Log in: a session token and the account summary */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            username: string;
            password: string;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                id: number;
                username: string;
                display_name: string;
                role: number;
                status: number;
                group: string;
                token: string;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        429: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/logout": {
    /** Revoke the token this request presents (log out) (role >= 1) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
    /** Revoke the token this request presents (log out) (role >= 1) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/manage": {
    /** Manage an account: disable, enable, delete, add_quota (signed; a management log row), set_group; promote and demote need role 100 (role >= 10) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            id: number;
            action: "disable" | "enable" | "promote" | "demote" | "delete";
          } | {
            id: number;
            action: "add_quota";
            value: number;
            reason?: string;
          } | {
            id: number;
            action: "set_group";
            group: string;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                id: number;
                username: string;
                display_name: string;
                role: number;
                status: number;
                email: string;
                code_host_id: string;
                chat_platform_id: string;
                oidc_id: string;
                social_app_id: string;
                messenger_id: string;
                forum_id: string;
                group: string;
                quota: number;
                used_quota: number;
                request_count: number;
                aff_code: string;
                aff_count: number;
                aff_quota: number;
                aff_history_quota: number;
                inviter_id: number;
                setting: string;
                card_provider_customer: string;
                sidebar_modules: string;
                permissions: {
                  [key: string]: boolean;
                };
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/pay": {
    /** Start a QR-code payment: a pending order and the signed epay request to submit to data.url (role >= 1) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            amount: number;
            payment_method: string;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                url: string;
                params: {
                  pid: string;
                  type: string;
                  out_trade_no: string;
                  notify_url: string;
                  return_url: string;
                  name: string;
                  money: string;
                  sign: string;
                  sign_type: "MD5";
                };
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        429: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/register": {
    /** Register an ordinary account (optionally with an inviter's aff_code) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            username: string;
            password: string;
            display_name?: string;
            email?: "" | string;
            aff_code?: string;
            verification_code?: string;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        409: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        429: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/reset": {
    /** Reset the password with the mailed code; data is the new password (generated when none is given) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            email: string;
            token: string;
            password?: string;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: string;
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/search": {
    /** Search accounts: keyword matches the id exactly, or username, display name or e-mail in part; an administrator sees only accounts of a lower role (role >= 10) */
    get: {
      parameters: {
        query?: {
          p?: number;
          page?: number;
          page_size?: number;
          keyword?: string;
          group?: string;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                items: ({
                  id: number;
                  username: string;
                  display_name: string;
                  role: number;
                  status: number;
                  email: string;
                  code_host_id: string;
                  chat_platform_id: string;
                  oidc_id: string;
                  social_app_id: string;
                  messenger_id: string;
                  forum_id: string;
                  group: string;
                  quota: number;
                  used_quota: number;
                  request_count: number;
                  aff_code: string;
                  aff_count: number;
                  aff_quota: number;
                  aff_history_quota: number;
                  inviter_id: number;
                  setting: string;
                  card_provider_customer: string;
                  sidebar_modules: string;
                  permissions: {
                    [key: string]: boolean;
                  };
                })[];
                total: number;
                page: number;
                page_size: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/self": {
    /** The own account (the contract's Account) (role >= 1) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                id: number;
                username: string;
                display_name: string;
                role: number;
                status: number;
                email: string;
                code_host_id: string;
                chat_platform_id: string;
                oidc_id: string;
                social_app_id: string;
                messenger_id: string;
                forum_id: string;
                group: string;
                quota: number;
                used_quota: number;
                request_count: number;
                aff_code: string;
                aff_count: number;
                aff_quota: number;
                aff_history_quota: number;
                inviter_id: number;
                setting: string;
                card_provider_customer: string;
                sidebar_modules: string;
                permissions: {
                  [key: string]: boolean;
                };
              };
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
    /** Edit the own account: display name; password (with original_password; revokes the other sessions) (role >= 1) */
    put: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            display_name?: string;
            password?: string;
            original_password?: string;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                id: number;
                username: string;
                display_name: string;
                role: number;
                status: number;
                email: string;
                code_host_id: string;
                chat_platform_id: string;
                oidc_id: string;
                social_app_id: string;
                messenger_id: string;
                forum_id: string;
                group: string;
                quota: number;
                used_quota: number;
                request_count: number;
                aff_code: string;
                aff_count: number;
                aff_quota: number;
                aff_history_quota: number;
                inviter_id: number;
                setting: string;
                card_provider_customer: string;
                sidebar_modules: string;
                permissions: {
                  [key: string]: boolean;
                };
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/self/groups": {
    /** The groups the account may use and their ratios; `auto` has a text ratio (role >= 1) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                [key: string]: {
                  ratio: number | string;
                  desc: string;
                };
              };
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/setting": {
    /** Set the notification preferences (low-balance notice: threshold and channel) (role >= 1) */
    put: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            notify_type: "email" | "webhook";
            quota_warning_threshold: number;
            webhook_url?: string;
            webhook_secret?: string;
            notification_email?: string;
            accept_unset_model_ratio_model?: boolean;
            record_ip_log?: boolean;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/token": {
    /** Revoke the caller's access token(s); sessions stay valid (role >= 1) */
    delete: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                revoked: number;
              };
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
    /** Issue a long-lived access token, replacing the previous one (role >= 1) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        429: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/topup": {
    /** Every account's top-up orders, newest first; keyword matches trade_no in part; filters user_id and status (role >= 10) */
    get: {
      parameters: {
        query?: {
          p?: number;
          page?: number;
          page_size?: number;
          keyword?: string;
          user_id?: number;
          status?: "pending" | "success" | "expired";
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                items: ({
                  id: number;
                  user_id: number;
                  amount: number;
                  money: number;
                  trade_no: string;
                  payment_method: string;
                  payment_provider: string;
                  status: string;
                  create_time: number;
                  complete_time: number;
                })[];
                total: number;
                page: number;
                page_size: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
    /** Redeem a code: data is the quota added; a code works once, even under concurrent attempts (role >= 1) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            key: string;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: number;
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        409: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/topup/complete": {
    /** Complete a pending or expired order by hand (the payment arrived but its notify did not): credits exactly once, like a notify (role >= 100) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            trade_no: string;
          };
        };
      };
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                id: number;
                user_id: number;
                amount: number;
                money: number;
                trade_no: string;
                payment_method: string;
                payment_provider: string;
                status: string;
                create_time: number;
                complete_time: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        409: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        413: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        415: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/topup/info": {
    /** The top-up configuration (the contract's Top-up configuration) (role >= 1) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                enable_online_topup: boolean;
                enable_cardpay_topup: boolean;
                enable_productpay_topup: boolean;
                enable_globalpay_topup: boolean;
                enable_globalpay_pancake_topup: boolean;
                enable_redemption: boolean;
                payment_compliance_confirmed: boolean;
                payment_compliance_terms_version: number;
                pay_methods: ({
                  name: string;
                  type: string;
                  color: string;
                  min_topup: string;
                })[];
                globalpay_pay_methods: (unknown)[] | null;
                productpay_products: (unknown)[] | null;
                min_topup: number;
                cardpay_min_topup: number;
                globalpay_min_topup: number;
                globalpay_pancake_min_topup: number;
                amount_options: (number)[];
                discount: {
                  [key: string]: number;
                };
                topup_link: string;
              };
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/topup/self": {
    /** The caller's top-up orders, newest first; keyword matches trade_no in part (role >= 1) */
    get: {
      parameters: {
        query?: {
          p?: number;
          page?: number;
          page_size?: number;
          keyword?: string;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                items: ({
                  id: number;
                  user_id: number;
                  amount: number;
                  money: number;
                  trade_no: string;
                  payment_method: string;
                  payment_provider: string;
                  status: string;
                  create_time: number;
                  complete_time: number;
                })[];
                total: number;
                page: number;
                page_size: number;
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/user/{id}": {
    /** One account (an administrator sees only accounts of a lower role) (role >= 10) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          id: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
              data?: {
                id: number;
                username: string;
                display_name: string;
                role: number;
                status: number;
                email: string;
                code_host_id: string;
                chat_platform_id: string;
                oidc_id: string;
                social_app_id: string;
                messenger_id: string;
                forum_id: string;
                group: string;
                quota: number;
                used_quota: number;
                request_count: number;
                aff_code: string;
                aff_count: number;
                aff_quota: number;
                aff_history_quota: number;
                inviter_id: number;
                setting: string;
                card_provider_customer: string;
                sidebar_modules: string;
                permissions: {
                  [key: string]: boolean;
                };
              };
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        404: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
  "/api/verification": {
    /** Mail a 6-digit verification code: for registration (purpose=register) or to bind the address to the logged-in account (purpose=bind) */
    get: {
      parameters: {
        query: {
          email: string;
          purpose?: "register" | "bind";
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        200: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        400: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        401: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        403: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        409: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        429: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        500: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        502: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
        503: {
          headers: { [name: string]: unknown };
          content: {
            "application/json": {
              success: boolean;
              message: string;
            };
          };
        };
      };
    };
  };
}
