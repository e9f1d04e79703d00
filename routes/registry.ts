// Route definitions: each route declares its schemas once; they validate requests (ajv) and describe the API (OpenAPI).
import type { Router, RouterMiddleware } from '@koa/router';
import type { ValidateFunction } from 'ajv';
import type { FromSchema, JSONSchema } from 'json-schema-to-ts';
import type { Context, Middleware } from 'koa';
import { HttpMethodEnum, koaBody } from 'koa-body';
import type { OperatorActor, VisitorActor } from '../server/auth/actor.js';
import type { Membership, Role } from '../db/models/Membership.js';
import { authorize } from '../server/policies/index.js';
import { Forbidden, MethodNotAllowed, NotFound, toAppError, Unauthorized, UnsupportedMediaType, ValidationFailed, type AppError } from '../server/errors.js';
import { createAjv, errorDetails } from '../server/validation.js';
import type { RateLimitName } from '../server/ratelimit.js';
import type { RouteServices } from './services.js';
import type { RequestState } from './middleware/state.js';
import { originOf } from './middleware/visitorCors.js';
import { describeScope, requiredScope, type Scope } from '../server/services/apiKeys/index.js';


import type { Method } from './method.js';

export type { Method };
export type JsonSchema = Record<string, unknown>;

/** Who may call a route. `org` routes check the role of the accepted membership, reloaded on every request. */
export type RouteAuth =
  | { kind: 'public'; optionalBearer?: boolean }
  | { kind: 'bearer' }
  | { kind: 'org'; role: Role; orgFrom: 'token' | 'path' }
  | { kind: 'widget' }
  | { kind: 'ai' };

export interface Pagination {
  limit: number;
  offset: number;
  total: number;
}

export interface RouteResult {
  status?: number;
  /** Sent as is instead of the success envelope (documents, images). */
  raw?: { contentType: string; body: unknown };
  message: string;
  data?: unknown;
  pagination?: Pagination;
}

/**
 * Who is calling, as the route's auth kind guarantees it once the registry let the request through: an `org` route
 * always has its operator, membership and organization; a `widget` route its visitor and organization; a `bearer`
 * route its operator; a public route with `optionalBearer` maybe an operator; `ai` and other public routes nobody.
 */
export type CallerOf<A extends RouteAuth> = A extends { kind: 'org' }
  ? { actor: OperatorActor; membership: Membership; orgId: string; visitor: null }
  : A extends { kind: 'widget' }
    ? { actor: null; membership: null; orgId: string; visitor: VisitorActor }
    : A extends { kind: 'bearer' }
      ? { actor: OperatorActor; membership: null; orgId: null; visitor: null }
      : A extends { kind: 'public'; optionalBearer: true }
        ? { actor: OperatorActor | null; membership: null; orgId: null; visitor: null }
        : { actor: null; membership: null; orgId: null; visitor: null };

export type HandlerArgs<B, Q, P, A extends RouteAuth = RouteAuth> = CallerOf<A> & {
  body: B;
  query: Q;
  params: P;
  ctx: Context;
  meta: { ip: string; userAgent: string | null };
  /** What the route's `load` returned. */
  loaded: unknown;
};

export interface RouteDef<B = unknown, Q = unknown, P = unknown, A extends RouteAuth = RouteAuth> {
  method: Method;
  /** Koa path under /api/v1, `:name` for parameters. */
  path: string;
  operationId: string;
  tag: string;
  summary: string;
  description?: string;
  auth: A;
  rateLimit?: RateLimitName;
  body?: JsonSchema;
  /** The body as the OpenAPI document shows it, when validation is deliberately looser (per-item reports). */
  documentedBody?: JsonSchema;
  query?: JsonSchema;
  params?: JsonSchema;
  /** `also`: a second success status the handler answers with the same body (a replay's 200, an upsert's update). */
  response: { status: number; description: string; data?: JsonSchema; paginated?: boolean; also?: { status: number; description: string } };
  /** Error statuses beyond those implied by auth, schemas and rate limit. */
  errors?: number[];
  /** The API key scope this route needs; default from its path and method (services/apiKeys/scopes.ts), null: no key. */
  scope?: Scope | null;
  /** The handler reads the request's bytes itself (signed uploads): no JSON parsing, no body schema. */
  rawBody?: boolean;
  /** Loads the route's resource before the input is validated, so a missing one is 404 whatever the body. */
  load?: (args: { params: P; orgId: CallerOf<A>['orgId']; actor: CallerOf<A>['actor'] }) => Promise<unknown>;
  handler: (args: HandlerArgs<B, Q, P, A>) => Promise<RouteResult>;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyRoute = RouteDef<any, any, any, any>;

/**
 * What a request part holds once its schema accepted it (ajv's defaults applied, so a defaulted property is
 * present); nothing when the route declares no schema for it.
 */
export type Input<S> = [S] extends [undefined] ? Record<string, never> : S extends JSONSchema ? FromSchema<S> : never;

type SchemaParts = 'body' | 'query' | 'params';

/** A route whose handler receives its body, query and params typed by the route's own schemas. */
export type TypedRouteDef<BS, QS, PS, A extends RouteAuth> = Omit<RouteDef<Input<BS>, Input<QS>, Input<PS>, A>, SchemaParts> & { body?: BS; query?: QS; params?: PS };

export function defineRoute<
  const BS extends JSONSchema | undefined = undefined,
  const QS extends JSONSchema | undefined = undefined,
  const PS extends JSONSchema | undefined = undefined,
  const A extends RouteAuth = RouteAuth,
>(def: TypedRouteDef<BS, QS, PS, A>): AnyRoute {
  return def as AnyRoute;
}

/** A body route without a declared body accepts nothing but an empty object. */
const EMPTY_BODY: JsonSchema = { type: 'object', additionalProperties: false, properties: {} };
const BODY_METHODS: Method[] = ['post', 'put', 'patch', 'delete'];

/** The values of a route's `:name` segments in a request path (routes here have plain segments, no patterns). */
function paramsIn(routePath: string, requestPath: string): Record<string, string> {
  const names = routePath.split('/');
  const values = requestPath.split('/');
  const out: Record<string, string> = {};
  names.forEach((name, i) => {
    if (!name.startsWith(':') || values[i] === undefined) return;
    try {
      out[name.slice(1)] = decodeURIComponent(values[i]);
    } catch {
      out[name.slice(1)] = values[i];
    }
  });
  return out;
}

interface MountedRoute {
  path: string;
  validateParams: ValidateFunction | null;
}

export class RouteRegistry {
  readonly routes: AnyRoute[] = [];
  /** By operationId (the router's layer name): the mounted path and its parameter check. */
  private readonly mounted = new Map<string, MountedRoute>();

  add(...defs: AnyRoute[]): this {
    this.routes.push(...defs);
    return this;
  }

  /** Compiles every schema once and registers each route's middleware chain on the router `routerFor` gives it. */
  mount(routerFor: (path: string) => Router, services: RouteServices): void {
    const bodyAjv = createAjv({ useDefaults: true, coerceTypes: false });
    const queryAjv = createAjv({ useDefaults: true, coerceTypes: 'array' });
    // DELETE bodies are parsed too: bulk deletes carry their ids in one (koa-body skips DELETE by default).
    const parsedMethods = [HttpMethodEnum.POST, HttpMethodEnum.PUT, HttpMethodEnum.PATCH, HttpMethodEnum.DELETE];
    const parseJson = koaBody({ json: true, jsonStrict: true, jsonLimit: '1mb', text: false, urlencoded: false, multipart: false, patchKoa: true, parsedMethods, onError: (err) => { throw err; } });

    for (const def of this.routes) {
      const hasBody = BODY_METHODS.includes(def.method) && !def.rawBody;
      const validateBody: ValidateFunction | null = hasBody ? bodyAjv.compile(def.body ?? EMPTY_BODY) : null;
      const validateQuery = queryAjv.compile(def.query ?? { type: 'object', properties: {} });
      const validateParams = def.params ? queryAjv.compile(def.params) : null;
      const rule = def.auth.kind === 'org' ? { role: def.auth.role, scope: requiredScope(def) } : null;
      const router = routerFor(def.path);
      this.mounted.set(def.operationId, { path: `${router.opts.prefix ?? ''}${def.path}`, validateParams });

      // The body is read up front (413 at once: nobody streams megabytes at us), but a wrong Content-Type or
      // malformed JSON is reported only after authentication, so an anonymous caller always learns 401 first.
      const readBody = async (ctx: Context): Promise<AppError | undefined> => {
        // ctx.is() is null without a body; any body must be JSON. An empty body (Content-Length: 0, as fetch
        // sends on a body-less POST such as switch) is no body either.
        if (ctx.request.length !== 0 && ctx.is() !== null && ctx.is('application/json') === false) return new UnsupportedMediaType();
        try {
          await parseJson(ctx as never, async () => undefined);
        } catch (err) {
          const mapped = toAppError(err);
          if (mapped.status === 413) throw mapped;
          return mapped;
        }
        return undefined;
      };

      // One middleware per route (body, caller, input, handler, answer): the router runs it as the route's only layer.
      const handle: Middleware<RequestState> = async (ctx) => {
        const bodyError = hasBody ? await readBody(ctx) : undefined;
        const meta = { ip: ctx.ip, userAgent: ctx.get('user-agent') || null };
        const rawBody = hasBody && !bodyError ? (ctx.request as unknown as { body?: unknown }).body : undefined;

        if (def.rateLimit) {
          const email = rawBody && typeof rawBody === 'object' && typeof (rawBody as { email?: unknown }).email === 'string' ? (rawBody as { email: string }).email : null;
          await services.rateLimits.consume(def.rateLimit, { ip: meta.ip, email });
        }

        let actor: OperatorActor | null = null;
        let membership: Membership | null = null;
        let orgId: string | null = null;
        const auth = def.auth;
        let visitor: VisitorActor | null = null;
        // Who is calling, resolved once into an actor; then the route's rule, the same check sockets make.
        if (auth.kind === 'ai') {
          services.actors.aiService(ctx.get('x-ai-tool-secret'));
        } else if (auth.kind === 'widget') {
          const token = services.bearerToken(ctx);
          if (!token) throw new Unauthorized();
          visitor = await services.actors.visitor(token);
          services.widget.assertOrigin(visitor, originOf(ctx));
        } else if (auth.kind !== 'public' || auth.optionalBearer) {
          const token = services.bearerToken(ctx);
          if (token) actor = await services.callers.operator(token);
          else if (auth.kind !== 'public') throw new Unauthorized();
        }
        const params: Record<string, unknown> = { ...ctx.params };
        if (validateParams && !validateParams(params)) {
          // A malformed id names nothing that exists; a malformed organization id is not one the caller belongs to.
          if (validateParams.errors?.some((e) => e.instancePath === '/orgId')) throw new Forbidden('You are not a member of this organization');
          throw new NotFound();
        }
        // Keys act only on organization routes, only inside their organization and only as far as the route's scope lets them.
        if (actor?.apiKey && auth.kind !== 'org') throw new Forbidden(`This API key may not call this route (${describeScope(null, 'owner')})`);
        if (auth.kind === 'org' && actor && rule) {
          if (actor.apiKey) {
            authorize(actor, rule, null);
            orgId = auth.orgFrom === 'path' ? String(params.orgId) : actor.orgId;
            if (orgId !== actor.orgId) throw new Forbidden('You are not a member of this organization');
            membership = { id: actor.apiKey.id, role: 'agent', status: 'accepted', organizationId: orgId, userId: actor.userId } as Membership;
          } else if (auth.orgFrom === 'path') {
            orgId = String(params.orgId);
            membership = await services.memberships.requireRole(actor.userId, orgId, auth.role);
          } else {
            orgId = actor.orgId;
            const m = actor.membership;
            authorize(actor, rule, orgId ? m : null);
            membership = { id: m!.id, role: m!.role, status: m!.status, organizationId: orgId, userId: actor.userId } as Membership;
          }
        }

        if (bodyError) throw bodyError;
        // A route that loads its resource first answers 404 for a missing one before judging the input (400).
        const loaded = def.load ? await def.load({ params, orgId: (orgId ?? visitor?.orgId ?? null) as string, actor }) : undefined;

        const query: Record<string, unknown> = { ...ctx.query };
        if (services.config.allowQueryToken) delete query.token;
        if (!validateQuery(query)) throw new ValidationFailed('The query is not valid', errorDetails(validateQuery.errors, 'query'));
        const body = hasBody ? (rawBody ?? {}) : undefined;
        if (validateBody && !validateBody(body)) throw new ValidationFailed('The request body is not valid', errorDetails(validateBody.errors, 'body'));

        // The checks above are what CallerOf<auth> promises each kind of route; the compiler cannot follow them here.
        const caller = { actor, visitor, membership, orgId: orgId ?? visitor?.orgId ?? null } as CallerOf<RouteAuth>;
        const result = await def.handler({ body, query, params, ...caller, ctx, meta, loaded });
        ctx.status = result.status ?? def.response.status;
        if (result.raw) {
          ctx.type = result.raw.contentType;
          ctx.body = result.raw.body;
          return;
        }
        // `data` is always there, so clients never test for it: an answer that carries nothing carries `{}`.
        ctx.body = { success: true, message: result.message, data: result.data === undefined ? {} : result.data, ...(result.pagination ? { pagination: result.pagination } : {}) };
      };

      router.register(def.path, [def.method.toUpperCase()], [handle] as unknown as RouterMiddleware[], { name: def.operationId });
    }
  }

  /**
   * After the router, for requests no route took: a path the API has (its parameters well-formed) asked with another
   * method answers 405 with `Allow`; a plain OPTIONS answers 204 with it. Anything else goes on (to the 404).
   */
  methodNotAllowed(): Middleware {
    return async (ctx, next) => {
      const allowed = new Set<string>();
      for (const layer of (ctx as { matched?: { name?: string; methods: string[] }[] }).matched ?? []) {
        const route = layer.name ? this.mounted.get(layer.name) : undefined;
        if (!route || (route.validateParams && !route.validateParams(paramsIn(route.path, ctx.path)))) continue;
        for (const method of layer.methods) allowed.add(method);
      }
      // A CORS preflight that reaches here was declined by the CORS layer: it stays unanswered (404), as before.
      const preflight = ctx.method === 'OPTIONS' && !!ctx.get('access-control-request-method');
      if (allowed.size === 0 || preflight) return next();
      const methods = [...allowed];
      if (ctx.method === 'OPTIONS') {
        ctx.status = 204;
        ctx.set('Allow', methods.join(', '));
        return;
      }
      throw new MethodNotAllowed(methods);
    };
  }
}
