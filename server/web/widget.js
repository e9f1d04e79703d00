// The embeddable chat widget: <script src="https://host/widget.js" data-key="PUBLIC_KEY"></script>.
// Plain browser JavaScript, no build step. It renders into a shadow root (the host page's CSS cannot reach it), uses
// no inline script, eval or style attributes in markup (a host's Content-Security-Policy only needs script-src and
// connect-src for this server), keeps the visitor's session in localStorage and talks to the visitor API and socket.
(function () {
  'use strict';
  var script = document.currentScript;
  var publicKey = script && script.getAttribute('data-key');
  if (!publicKey) return;
  var base = new URL(script.src, location.href).origin;
  var api = base + '/api/v1/widget';
  var pageMode = script.getAttribute('data-mode') === 'page';
  var source = script.getAttribute('data-source') || (pageMode ? 'link' : 'widget');
  var storeKey = 'support-widget:' + publicKey;

  // What survives a page load: the visitor session, its token, the conversation and unacknowledged sends.
  var saved = load();
  var state = {
    sessionId: saved.sessionId || null,
    token: saved.token || null,
    expiresAt: saved.expiresAt || 0,
    organizationId: saved.organizationId || null,
    conversationId: saved.conversationId || null,
    lastSeq: 0,
    pending: Array.isArray(saved.pending) ? saved.pending : [],
  };
  var messages = {}; // by id or clientMessageId
  var socket = null;
  var config = null;
  var ui = null;
  var flushing = false;
  var retryTimer = null;
  var reconnectTimer = null;

  function load() {
    try { return JSON.parse(localStorage.getItem(storeKey) || '{}') || {}; } catch (e) { return {}; }
  }
  function save() {
    try {
      localStorage.setItem(storeKey, JSON.stringify({
        sessionId: state.sessionId, token: state.token, expiresAt: state.expiresAt, organizationId: state.organizationId,
        conversationId: state.conversationId, pending: state.pending,
      }));
    } catch (e) { /* storage off (private mode): the session lasts this page only */ }
  }
  function uuid() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    return 'xxxxxxxx-xxxx-4xxx-8xxx-xxxxxxxxxxxx'.replace(/x/g, function () { return ((Math.random() * 16) | 0).toString(16); });
  }

  function request(method, path, body) {
    var headers = { accept: 'application/json' };
    if (body) headers['content-type'] = 'application/json';
    if (state.token) headers.authorization = 'Bearer ' + state.token;
    return fetch(api + path, { method: method, headers: headers, body: body ? JSON.stringify(body) : undefined, credentials: 'omit' })
      .then(function (res) {
        return res.json().catch(function () { return {}; }).then(function (json) {
          if (!res.ok) { var err = new Error(json.message || 'HTTP ' + res.status); err.status = res.status; throw err; }
          return json.data;
        });
      });
  }

  // A token (new or resumed with the stored sessionId) valid for at least another minute.
  function ensureToken(force) {
    if (!force && state.token && state.expiresAt - Date.now() > 60000) return Promise.resolve(state.token);
    state.token = null;
    var body = { publicKey: publicKey };
    if (state.sessionId) body.sessionId = state.sessionId;
    return request('POST', '/auth/token', body).then(function (t) {
      state.token = t.token;
      state.sessionId = t.sessionId;
      state.organizationId = t.organizationId;
      state.expiresAt = Date.parse(t.expiresAt);
      save();
      if (socket) { socket.auth.token = t.token; }
      return t.token;
    });
  }

  // ---- rendering ----
  var CSS = [
    ':host{all:initial !important;display:block !important}',
    '*{box-sizing:border-box;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}',
    '.launcher{position:fixed;right:20px;bottom:20px;width:56px;height:56px;border-radius:50%;border:0;cursor:pointer;',
    'background:var(--primary);color:var(--on-primary);box-shadow:0 4px 14px rgba(0,0,0,.25);z-index:2147483000;display:flex;align-items:center;justify-content:center}',
    '.panel{position:fixed;right:20px;bottom:88px;width:360px;max-width:calc(100vw - 40px);height:520px;max-height:calc(100vh - 120px);',
    'display:flex;flex-direction:column;background:#fff;color:#1f2328;border-radius:12px;overflow:hidden;',
    'box-shadow:0 8px 30px rgba(0,0,0,.25);z-index:2147483000;font-size:14px}',
    '.panel[hidden]{display:none}',
    '.page .panel{position:static;width:100%;max-width:none;height:100%;max-height:none;border-radius:0;box-shadow:none}',
    '.page{position:fixed;inset:0}',
    'header{background:var(--primary);color:var(--on-primary);padding:14px 16px;font-weight:600;font-size:16px}',
    '.log{flex:1;overflow-y:auto;padding:12px;display:flex;flex-direction:column;gap:6px;background:#f6f8fa}',
    '.msg{max-width:80%;padding:8px 12px;border-radius:14px;white-space:pre-wrap;word-wrap:break-word;line-height:1.35}',
    '.msg.visitor{align-self:flex-end;background:var(--primary);color:var(--on-primary)}',
    '.msg.agent,.msg.ai,.msg.system,.msg.greeting{align-self:flex-start;background:#fff;border:1px solid #d0d7de}',
    '.msg.sending{opacity:.6}',
    '.typing{padding:4px 14px;font-size:12px;color:#57606a;min-height:20px;background:#f6f8fa}',
    'form{display:flex;gap:8px;padding:10px;border-top:1px solid #d0d7de;background:#fff}',
    'textarea{flex:1;resize:none;border:1px solid #d0d7de;border-radius:8px;padding:8px;font-size:16px;height:42px}',
    'button.send{border:0;border-radius:8px;padding:0 16px;background:var(--primary);color:var(--on-primary);font-size:15px;cursor:pointer}',
  ].join('');

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text != null) node.textContent = text;
    return node;
  }
  // A speech bubble drawn with SVG (emoji glyphs depend on the visitor's fonts).
  function chatIcon() {
    var ns = 'http://www.w3.org/2000/svg';
    var svg = document.createElementNS(ns, 'svg');
    svg.setAttribute('viewBox', '0 0 24 24');
    svg.setAttribute('width', '26');
    svg.setAttribute('height', '26');
    svg.setAttribute('aria-hidden', 'true');
    var p = document.createElementNS(ns, 'path');
    p.setAttribute('fill', 'currentColor');
    p.setAttribute('d', 'M4 3h16a2 2 0 0 1 2 2v11a2 2 0 0 1-2 2H9l-5 4v-4a2 2 0 0 1-2-2V5a2 2 0 0 1 2-2z');
    svg.appendChild(p);
    return svg;
  }
  // Only plain color values reach the stylesheet (a configured value never becomes arbitrary CSS).
  function color(value, fallback) {
    return typeof value === 'string' && /^(#[0-9a-f]{3,8}|[a-z]{3,20}|rgba?\([\d\s.,%]+\))$/i.test(value.trim()) ? value.trim() : fallback;
  }

  function render() {
    var host = el('div');
    host.setAttribute('data-support-widget', '');
    var root = host.attachShadow({ mode: 'open' });
    if ('adoptedStyleSheets' in root && window.CSSStyleSheet && CSSStyleSheet.prototype.replaceSync) {
      var sheet = new CSSStyleSheet();
      sheet.replaceSync(CSS);
      root.adoptedStyleSheets = [sheet];
    } else {
      root.appendChild(el('style', null, CSS));
    }
    var appearance = config.appearance || {};
    var frame = el('div', pageMode ? 'page' : 'float');
    frame.style.setProperty('--primary', color(appearance.primaryColor || appearance.color, '#2563eb'));
    frame.style.setProperty('--on-primary', color(appearance.textColor, '#ffffff'));
    var panel = el('section', 'panel');
    panel.setAttribute('role', 'dialog');
    panel.setAttribute('aria-label', config.displayName || 'Chat');
    var header = el('header', null, config.displayName || 'Chat');
    var log = el('div', 'log');
    log.setAttribute('aria-live', 'polite');
    var typing = el('div', 'typing');
    var form = el('form');
    var input = el('textarea');
    input.placeholder = 'Write a message…';
    input.setAttribute('aria-label', 'Message');
    var send = el('button', 'send', 'Send');
    send.type = 'submit';
    form.appendChild(input);
    form.appendChild(send);
    panel.appendChild(header);
    panel.appendChild(log);
    panel.appendChild(typing);
    panel.appendChild(form);
    frame.appendChild(panel);
    var launcher = null;
    if (!pageMode) {
      panel.hidden = true;
      launcher = el('button', 'launcher');
      launcher.appendChild(chatIcon());
      launcher.type = 'button';
      launcher.setAttribute('aria-label', 'Open chat');
      launcher.addEventListener('click', function () {
        panel.hidden = !panel.hidden;
        if (!panel.hidden) { start(); input.focus(); }
      });
      frame.appendChild(launcher);
    }
    root.appendChild(frame);
    (document.body || document.documentElement).appendChild(host);

    var greeting = (config.behavior && config.behavior.greeting) || appearance.greeting || (config.ai && config.ai.greeting);
    if (typeof greeting === 'string' && greeting) log.appendChild(el('div', 'msg greeting', greeting));

    form.addEventListener('submit', function (e) {
      e.preventDefault();
      var text = input.value.trim();
      if (!text) return;
      input.value = '';
      stopTyping();
      queue(text);
    });
    input.addEventListener('keydown', function (e) {
      if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); form.requestSubmit ? form.requestSubmit() : send.click(); }
    });
    input.addEventListener('input', onTyping);
    return { log: log, typing: typing, panel: panel, launcher: launcher };
  }

  function show(m) {
    var key = m.id || m.clientMessageId;
    var node = (m.id && messages[m.id]) || (m.clientMessageId && messages['c:' + m.clientMessageId]);
    if (!node) {
      node = el('div');
      ui.log.appendChild(node);
    }
    node.className = 'msg ' + (m.senderType || 'visitor') + (m.id ? '' : ' sending');
    node.textContent = m.content;
    if (m.id) messages[m.id] = node;
    if (m.clientMessageId) messages['c:' + m.clientMessageId] = node;
    if (typeof m.seq === 'number' && m.conversationId === state.conversationId && m.seq > state.lastSeq) state.lastSeq = m.seq;
    if (key) ui.log.scrollTop = ui.log.scrollHeight;
  }

  // ---- conversation and socket ----
  var started = null;
  function start() {
    if (started) return started;
    started = ensureToken(false)
      .then(function () {
        if (state.conversationId) return;
        return request('GET', '/conversations').then(function (list) {
          var open = (list || []).filter(function (c) { return c.status !== 'closed'; })[0];
          if (open) { state.conversationId = open.id; save(); }
        });
      })
      .then(loadHistory)
      .then(function () {
        state.pending.forEach(function (p) { show({ clientMessageId: p.clientMessageId, content: p.content, senderType: 'visitor' }); });
        connect();
        flush();
      })
      .catch(function (err) {
        started = null;
        if (err && err.status === 401) { state.token = null; save(); }
        ui.typing.textContent = 'Chat is unavailable right now.';
      });
    return started;
  }

  function loadHistory() {
    if (!state.conversationId) return Promise.resolve();
    return request('GET', '/conversations/' + encodeURIComponent(state.conversationId) + '/messages?afterSeq=' + state.lastSeq + '&limit=200')
      .then(function (list) { (list || []).forEach(show); })
      .catch(function (err) {
        // The stored conversation is gone (another session, or deleted): start afresh.
        if (err.status === 404) { state.conversationId = null; state.lastSeq = 0; save(); return; }
        throw err;
      });
  }

  function withSocketIo(done) {
    if (window.__supportWidgetIo) return done(window.__supportWidgetIo);
    // Keep whatever `io` the host page has: the client bundle sets a global, taken and then restored.
    var previous = window.io;
    var tag = document.createElement('script');
    tag.src = base + '/assets/socket.io.min.js';
    tag.async = true;
    tag.onload = function () {
      window.__supportWidgetIo = window.io;
      if (previous === undefined) { try { delete window.io; } catch (e) { window.io = undefined; } } else window.io = previous;
      done(window.__supportWidgetIo);
    };
    (document.head || document.documentElement).appendChild(tag);
  }

  function connect() {
    if (socket) return;
    withSocketIo(function (io) {
      socket = io(base + '/orgs/' + state.organizationId, { path: '/socket.io', auth: { token: state.token } });
      socket.on('connect', function () {
        // After any (re)connect: what was missed, then whatever is still unacknowledged.
        if (!state.conversationId) return flush();
        socket.timeout(10000).emit('sync', { conversationId: state.conversationId, afterSeq: state.lastSeq }, function (err, ack) {
          if (!err && ack && ack.success) ack.data.messages.forEach(show);
          flush();
        });
      });
      socket.on('connect_error', function (err) {
        // An expired or unknown session: a fresh token (same sessionId), then Socket.IO's own retry.
        if (err && err.message === 'unauthorized') return ensureToken(true).then(function () { socket.connect(); }, function () {});
        // The server is busy (service_unavailable) or the caller over a limit (rate_limited): come back when it says,
        // plus up to half as long again at random, so the visitors refused together do not return together.
        // Socket.IO does not retry a refused handshake by itself; a lost network it retries with its own backoff.
        var retryAfter = err && err.data && err.data.retryAfter;
        if (typeof retryAfter === 'number' && retryAfter >= 0) {
          clearTimeout(reconnectTimer);
          reconnectTimer = setTimeout(function () { if (!socket.connected) socket.connect(); }, retryAfter * 1000 * (1 + 0.5 * Math.random()));
        }
      });
      // Socket.IO reconnects by itself after a network loss, not when the server closed the socket (an instance
      // stopping, a token expiring): then connect again, with a fresh token when needed; `connect` syncs. The first
      // try waits 0.5-1.5 s at random (Socket.IO's own backoff and jitter take over if it fails), so the visitors of a
      // restarting instance do not all come back in the same instant.
      socket.on('disconnect', function (reason) {
        if (reason === 'io server disconnect') setTimeout(function () { ensureToken(false).then(function () { socket.connect(); }, function () {}); }, 500 + Math.random() * 1000);
      });
      socket.on('session_expired', function () { ensureToken(true).then(function () { socket.connect(); }, function () {}); });
      socket.on('new_message', function (p) {
        if (!state.conversationId) { state.conversationId = p.conversationId; save(); }
        if (p.conversationId !== state.conversationId) return;
        show(p.message);
        if (p.message.senderType !== 'visitor') ui.typing.textContent = '';
      });
      socket.on('agent_typing', function (p) {
        if (p.conversationId === state.conversationId) ui.typing.textContent = ((p.agent && p.agent.name) || 'Agent') + ' is typing…';
      });
      socket.on('agent_stopped_typing', function (p) {
        if (p.conversationId === state.conversationId) ui.typing.textContent = '';
      });
    });
  }

  // ---- sending: every message carries a clientMessageId, so a retry never stores it twice ----
  function queue(text) {
    var item = { clientMessageId: uuid(), content: text };
    state.pending.push(item);
    save();
    show({ clientMessageId: item.clientMessageId, content: text, senderType: 'visitor' });
    start().then(flush);
  }

  function sendOne(item) {
    if (!state.conversationId) {
      return request('POST', '/conversations', { message: item.content, clientMessageId: item.clientMessageId, source: source })
        .then(function (r) { state.conversationId = r.conversation.id; save(); return r.message; });
    }
    if (socket && socket.connected) {
      return new Promise(function (resolve, reject) {
        socket.timeout(10000).emit('send_message', { conversationId: state.conversationId, content: item.content, clientMessageId: item.clientMessageId }, function (err, ack) {
          if (err) return reject(err);
          if (!ack || !ack.success) { var e = new Error((ack && ack.error && ack.error.message) || 'not sent'); e.status = ack && ack.error && ack.error.code === 'unauthorized' ? 401 : 400; return reject(e); }
          resolve(ack.data.message);
        });
      });
    }
    return request('POST', '/conversations/' + encodeURIComponent(state.conversationId) + '/messages', { content: item.content, clientMessageId: item.clientMessageId });
  }

  function flush() {
    if (flushing || state.pending.length === 0 || !state.token) return;
    flushing = true;
    var item = state.pending[0];
    sendOne(item).then(function (message) {
      flushing = false;
      state.pending.shift();
      // A closed conversation answers with a new one: follow it.
      if (message.conversationId !== state.conversationId) { state.conversationId = message.conversationId; state.lastSeq = 0; }
      save();
      show(message);
      flush();
    }, function (err) {
      flushing = false;
      if (err && err.status === 401) ensureToken(true).then(flush, retryLater);
      else if (err && err.status >= 400 && err.status < 500 && err.status !== 408 && err.status !== 429) { state.pending.shift(); save(); flush(); }
      else retryLater();
    });
  }
  function retryLater() {
    clearTimeout(retryTimer);
    retryTimer = setTimeout(flush, 3000);
  }

  var typingTimer = null;
  var typingSent = false;
  function onTyping() {
    if (!socket || !socket.connected || !state.conversationId) return;
    if (!typingSent) { typingSent = true; socket.emit('typing_start', { conversationId: state.conversationId }, function () {}); }
    clearTimeout(typingTimer);
    typingTimer = setTimeout(stopTyping, 2000);
  }
  function stopTyping() {
    clearTimeout(typingTimer);
    if (typingSent && socket && state.conversationId) socket.emit('typing_stop', { conversationId: state.conversationId }, function () {});
    typingSent = false;
  }

  // ---- boot: nothing is shown unless this website may use the widget ----
  request('GET', '/config?publicKey=' + encodeURIComponent(publicKey)).then(function (c) {
    config = c;
    var boot = function () {
      ui = render();
      if (pageMode && /[?&]source=qr(&|$)/.test(location.search)) request('POST', '/qr-scan', { publicKey: publicKey }).catch(function () {});
      // A returning visitor (or the full-page chat) reconnects at once; a new one when the panel first opens.
      if (pageMode || state.sessionId) start();
    };
    if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', boot);
    else boot();
  }, function () { /* unknown key or a website not allowed: show nothing */ });
})();
