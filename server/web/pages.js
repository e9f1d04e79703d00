// The hosted account pages behind mail links (accept an invitation, reset a password, sign in), on the public API.
(function () {
  'use strict';
  var page = document.body.getAttribute('data-page');
  var app = document.getElementById('app');
  var token = new URLSearchParams(location.search).get('token');

  function el(tag, props, children) {
    var node = document.createElement(tag);
    Object.keys(props || {}).forEach(function (k) { if (props[k] != null) node[k] = props[k]; });
    (children || []).forEach(function (c) { node.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); });
    return node;
  }
  function call(method, path, body) {
    return fetch('/api/v1' + path, { method: method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined })
      .then(function (res) {
        return res.json().catch(function () { return {}; }).then(function (json) { return { status: res.status, ok: res.ok, body: json }; });
      });
  }
  function screen(title, nodes) {
    app.textContent = '';
    app.appendChild(el('h1', { textContent: title }));
    nodes.forEach(function (n) { app.appendChild(n); });
  }
  function field(label, name, type, autocomplete) {
    var input = el('input', { name: name, id: name, type: type, required: true, autocomplete: autocomplete });
    if (type === 'password') input.minLength = 8;
    return [el('label', { htmlFor: name, textContent: label }), input];
  }
  // A form whose submit calls `send(values)`; the answer replaces the form, an error is shown under it.
  function form(fields, buttonText, send) {
    var status = el('p', { className: 'error', id: 'status' });
    var button = el('button', { type: 'submit', textContent: buttonText });
    var f = el('form', {}, [].concat.apply([], fields).concat([button, status]));
    f.addEventListener('submit', function (e) {
      e.preventDefault();
      var values = {};
      Array.prototype.forEach.call(f.elements, function (i) { if (i.name) values[i.name] = i.value; });
      button.disabled = true;
      status.textContent = '';
      send(values).then(function (message) {
        if (message) { button.disabled = false; status.textContent = message; }
      });
    });
    return f;
  }
  function done(text) {
    app.appendChild(el('p', { className: 'done', id: 'result', textContent: text }));
  }
  function failure(res) {
    return (res.body && res.body.message) || 'Something went wrong (' + res.status + ').';
  }

  if (page === 'accept-invite') {
    if (!token) return screen('Join your team', [el('p', { className: 'error', textContent: 'This link has no invitation token.' })]);
    call('GET', '/memberships/verify-invite/' + encodeURIComponent(token)).then(function (res) {
      if (res.status === 404) return screen('Join your team', [el('p', { className: 'error', textContent: 'This invitation does not exist.' })]);
      if (res.status === 410) return screen('Join your team', [el('p', { className: 'error', textContent: 'This invitation was already used or has expired. Ask for a new one.' })]);
      if (!res.ok) return screen('Join your team', [el('p', { className: 'error', textContent: failure(res) })]);
      var invite = res.body.data;
      var fields = invite.requiresPassword
        ? [field('Your name', 'name', 'text', 'name'), field('Choose a password (8 characters or more)', 'password', 'password', 'new-password')]
        : [field('Your password', 'password', 'password', 'current-password')];
      screen('Join ' + invite.organization.name, [
        el('p', { className: 'note', textContent: 'You were invited as ' + invite.role + ' with ' + invite.email + '.' }),
        form(fields, 'Accept invitation', function (v) {
          return call('POST', '/memberships/accept-invite', { token: token, name: v.name, password: v.password }).then(function (r) {
            if (!r.ok) return failure(r);
            screen('Welcome to ' + r.body.data.organization.name, []);
            done('You joined ' + r.body.data.organization.name + ' as ' + r.body.data.role + '. You can now sign in to the dashboard.');
          });
        }),
      ]);
    });
  } else if (page === 'reset-password') {
    if (!token) return screen('Choose a new password', [el('p', { className: 'error', textContent: 'This link has no reset token.' })]);
    screen('Choose a new password', [
      form([field('New password (8 characters or more)', 'newPassword', 'password', 'new-password')], 'Change password', function (v) {
        return call('POST', '/auth/reset-password', { token: token, newPassword: v.newPassword }).then(function (r) {
          if (!r.ok) return failure(r);
          screen('Password changed', []);
          done('Your password has been changed. Sign in with the new one.');
        });
      }),
    ]);
  } else if (page === 'login') {
    screen('Sign in', [
      el('p', { className: 'note', textContent: 'This server hosts the support API; agents work in the operators\u2019 dashboard. Check your account here, or read the API reference at /api/v1/docs.' }),
      form([field('Email', 'email', 'email', 'username'), field('Password', 'password', 'password', 'current-password')], 'Sign in', function (v) {
        return call('POST', '/auth/login', { email: v.email, password: v.password }).then(function (r) {
          if (!r.ok) return failure(r);
          var d = r.body.data;
          screen('Signed in', []);
          done('Signed in as ' + (d.user.name || d.user.email) + (d.organization ? ' (' + d.organization.name + ', ' + d.role + ')' : '') + '.');
        });
      }),
    ]);
  }
})();
