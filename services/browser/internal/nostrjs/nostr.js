// window.nostr (NIP-07) for the pages of a Sovereign browser session.
//
// The worker runs this script in every frame's main world before the
// page's own scripts (Page.addScriptToEvaluateOnNewDocument), and once in
// the documents already loaded when the session logs in. It talks to the
// worker through a CDP binding (Runtime.addBinding): the binding function
// is taken off the window here, and the worker learns the calling frame's
// origin from Chromium (the execution context), never from the page.
// Replies come back through a reply function that the page can neither
// replace nor delete; a reply counts only with this document's random
// token, which lives in this closure alone.
(() => {
  'use strict';
  const BINDING = __BINDING__, REPLY = __REPLY__, MAX = __MAX__, MAX_PENDING = __MAX_PENDING__;
  const g = globalThis;
  const send = g[BINDING];
  try { delete g[BINDING]; } catch { /* keep going */ }
  const installed = Object.getOwnPropertyDescriptor(g, REPLY);
  if (installed) {
    // The session logged in again: this document's window.nostr works
    // again (it kept the binding it took the first time).
    try { installed.value(null, 0, 'login'); } catch { /* its own loss */ }
    return;
  }
  if (typeof send !== 'function') return;

  const stringify = JSON.stringify, isInteger = Number.isInteger, isArray = Array.isArray;
  const Err = Error, TypeErr = TypeError, P = Promise;
  const freeze = Object.freeze, defineProperty = Object.defineProperty;
  const hexKey = /^[0-9a-fA-F]{64}$/;

  const words = new Uint32Array(4);
  if (g.crypto && g.crypto.getRandomValues) g.crypto.getRandomValues(words);
  else for (let i = 0; i < 4; i++) words[i] = Math.floor(Math.random() * 4294967296);
  const token = words[0] + '.' + words[1] + '.' + words[2] + '.' + words[3];

  let out = false, next = 0, count = 0;
  const pending = Object.create(null);

  const failure = (msg) => new Err('window.nostr: ' + msg);
  const show = (v) => {
    if (typeof v === 'string') return stringify(v.length > 40 ? v.slice(0, 40) + '…' : v);
    if (v === null || isArray(v)) return v === null ? 'null' : 'an array';
    return typeof v === 'object' ? 'an object' : String(v);
  };

  // call sends one request to the worker; the promise settles with its
  // reply.
  const call = (method, params) => new P((resolve, reject) => {
    if (out) { reject(failure('logged out')); return; }
    if (count >= MAX_PENDING) {
      reject(failure('too many pending window.nostr calls (at most ' + MAX_PENDING + '); wait for some to finish'));
      return;
    }
    const id = ++next;
    let msg;
    try {
      msg = stringify({ t: token, i: id, m: method, p: params });
    } catch (e) {
      reject(new TypeErr('window.nostr.' + method + ': the arguments cannot be sent: ' + e.message));
      return;
    }
    if (msg.length > MAX) {
      reject(failure(method + ' is too large: ' + msg.length + ' characters, the limit is ' + MAX));
      return;
    }
    pending[id] = { resolve, reject };
    count++;
    try {
      send(msg);
    } catch (e) {
      delete pending[id];
      count--;
      reject(failure(method + ': ' + e.message));
    }
  });

  // deliver settles a call (the worker calls it in this frame only).
  const deliver = function (t, id, kind, value) {
    if (kind === 'logout' || kind === 'login') {
      out = kind === 'logout';
      if (out) {
        for (const k in pending) {
          const p = pending[k];
          delete pending[k];
          count--;
          p.reject(failure('logged out'));
        }
      }
      return;
    }
    if (t !== token) return;
    const p = pending[id];
    if (!p) return;
    delete pending[id];
    count--;
    if (kind === 'ok') p.resolve(value);
    else p.reject(new Err(String(value)));
  };
  defineProperty(g, REPLY, { value: deliver }); // not writable, enumerable nor configurable

  const checkEvent = (ev) => {
    const where = 'window.nostr.signEvent: ';
    if (ev === null || typeof ev !== 'object' || isArray(ev)) {
      throw new TypeErr(where + 'the event must be an object like {kind, created_at, tags, content}, not ' + show(ev));
    }
    const kind = ev.kind;
    if (!isInteger(kind) || kind < 0 || kind > 65535) {
      throw new TypeErr(where + 'kind must be an integer from 0 to 65535, not ' + show(kind));
    }
    let createdAt = ev.created_at;
    if (createdAt === undefined || createdAt === null) createdAt = 0;
    else if (!isInteger(createdAt) || createdAt < 0) {
      throw new TypeErr(where + 'created_at must be a Unix time in seconds (a non-negative integer), not ' + show(createdAt));
    }
    const tags = ev.tags === undefined ? [] : ev.tags;
    if (!isArray(tags)) throw new TypeErr(where + 'tags must be an array of arrays of strings, not ' + show(tags));
    const outTags = [];
    for (let i = 0; i < tags.length; i++) {
      const tag = tags[i];
      if (!isArray(tag)) throw new TypeErr(where + 'tags[' + i + '] must be an array of strings, not ' + show(tag));
      const values = [];
      for (let j = 0; j < tag.length; j++) {
        if (typeof tag[j] !== 'string') {
          throw new TypeErr(where + 'tags[' + i + '][' + j + '] must be a string, not ' + show(tag[j]));
        }
        values.push(tag[j]);
      }
      outTags.push(values);
    }
    if (typeof ev.content !== 'string') throw new TypeErr(where + 'content must be a string, not ' + show(ev.content));
    return { kind: kind, created_at: createdAt, tags: outTags, content: ev.content };
  };

  const crypt = (method) => async function (pubkey, text) {
    if (typeof pubkey !== 'string' || !hexKey.test(pubkey)) {
      throw new TypeErr('window.nostr.' + method + ': pubkey must be a public key of 64 hex characters, not ' + show(pubkey));
    }
    if (typeof text !== 'string') throw new TypeErr('window.nostr.' + method + ': the text must be a string, not ' + show(text));
    return call(method, { pubkey: pubkey, text: text });
  };

  const nostr = freeze({
    async getPublicKey() { return call('getPublicKey', {}); },
    async signEvent(event) { return call('signEvent', checkEvent(event)); },
    async getRelays() {
      if (out) throw failure('logged out');
      return {};
    },
    nip04: freeze({ encrypt: crypt('nip04.encrypt'), decrypt: crypt('nip04.decrypt') }),
    nip44: freeze({ encrypt: crypt('nip44.encrypt'), decrypt: crypt('nip44.decrypt') }),
  });
  defineProperty(g, 'nostr', { value: nostr, writable: true, enumerable: true, configurable: true });
})();
