// Browser-facing files served by the app itself: the embeddable widget, the hosted chat page, the small account
// pages behind mail links (when APP_URL is this server) and the API reference.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Router } from '@koa/router';
import type { Context } from 'koa';
import type { Config } from '../config.js';
import { NotFound } from '../errors.js';

const require = createRequire(import.meta.url);

/** The browser sources are plain files beside this module's source (also when running the build in dist/). */
function webDir(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5 && !existsSync(path.join(dir, 'package.json')); i++) dir = path.dirname(dir);
  return path.join(dir, 'server', 'web');
}

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

const assetCache = new Map<string, Asset>();
function asset(file: string, type: string): Asset {
  let a = assetCache.get(file);
  if (!a) {
    const body = readFileSync(file);
    a = { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` };
    assetCache.set(file, a);
  }
  return a;
}

/** A static file with an ETag, so a revalidation costs a 304; `crossOrigin` lets other sites load it by <script>. */
function sendAsset(ctx: Context, a: Asset, maxAge: number, crossOrigin = false): void {
  ctx.set('Cache-Control', `public, max-age=${maxAge}`);
  ctx.set('ETag', a.etag);
  if (crossOrigin) ctx.set('Cross-Origin-Resource-Policy', 'cross-origin');
  ctx.type = a.type;
  if (ctx.get('if-none-match') === a.etag) {
    ctx.status = 304;
    return;
  }
  ctx.status = 200;
  ctx.body = a.body;
}

const PAGE_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
// Redoc renders with styled-components (inline <style>) and parses the document in a blob: worker.
const DOCS_CSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; font-src 'self' data:; worker-src blob:; base-uri 'none'; frame-ancestors 'none'";

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function sendPage(ctx: Context, title: string, body: string, opts: { csp?: string; head?: string } = {}): void {
  ctx.set('Content-Security-Policy', opts.csp ?? PAGE_CSP);
  ctx.set('Cache-Control', 'no-cache');
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.type = 'text/html; charset=utf-8';
  ctx.status = 200;
  ctx.body = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
${opts.head ?? '<link rel="stylesheet" href="/assets/pages.css">'}
</head>
${body}
</html>
`;
}

const PUBLIC_KEY = /^[A-Za-z0-9_-]{3,64}$/;

export function createWebRouter(config: Pick<Config, 'publicUrl' | 'appUrl'>): Router {
  const dir = webDir();
  const socketIoClient = path.join(path.dirname(require.resolve('socket.io')), '..', 'client-dist', 'socket.io.min.js');
  const redoc = require.resolve('redoc/bundles/redoc.standalone.js');
  const router = new Router();
  const js = 'application/javascript; charset=utf-8';

  // Embedded on customers' sites at a fixed URL: a short max-age lets updates spread, the ETag keeps checks cheap.
  router.get('/widget.js', (ctx) => sendAsset(ctx, asset(path.join(dir, 'widget.js'), js), 300, true));
  router.get('/assets/socket.io.min.js', (ctx) => sendAsset(ctx, asset(socketIoClient, js), 86_400, true));
  router.get('/assets/pages.js', (ctx) => sendAsset(ctx, asset(path.join(dir, 'pages.js'), js), 300));
  router.get('/assets/pages.css', (ctx) => sendAsset(ctx, asset(path.join(dir, 'pages.css'), 'text/css; charset=utf-8'), 300));
  router.get('/api/v1/docs/redoc.standalone.js', (ctx) => sendAsset(ctx, asset(redoc, js), 86_400));

  // The hosted chat (the QR code's target): the same widget, full page.
  router.get('/chat/:publicKey', (ctx) => {
    const key = ctx.params.publicKey ?? '';
    if (!PUBLIC_KEY.test(key)) throw new NotFound('Widget');
    const source = ctx.query.source === 'qr' ? 'qr' : 'link';
    sendPage(ctx, 'Chat', `<body class="chat">\n<script src="/widget.js" data-key="${escapeHtml(key)}" data-mode="page" data-source="${source}"></script>\n</body>`);
  });

  router.get('/api/v1/docs', (ctx) => {
    sendPage(ctx, 'Support Platform API reference', '<body>\n<redoc spec-url="/api/v1/openapi.json"></redoc>\n<script src="/api/v1/docs/redoc.standalone.js"></script>\n</body>', { csp: DOCS_CSP, head: '' });
  });

  // Mail links point at APP_URL. When that is this server, small pages complete each flow; otherwise a link that
  // reached this server anyway is sent on to the dashboard, query and all.
  const hosted = config.appUrl === config.publicUrl;
  const accountPage = (route: string, title: string) =>
    router.get(route, (ctx) => {
      if (!hosted) return ctx.redirect(`${config.appUrl}${route}${ctx.querystring ? `?${ctx.querystring}` : ''}`);
      sendPage(ctx, title, `<body data-page="${route.slice(1)}">\n<main id="app"><h1>${escapeHtml(title)}</h1><p class="note">Loading…</p></main>\n<script src="/assets/pages.js"></script>\n</body>`);
    });
  accountPage('/accept-invite', 'Join your team');
  accountPage('/reset-password', 'Choose a new password');
  accountPage('/login', 'Sign in');
  return router;
}
