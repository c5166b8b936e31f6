// Demo UI: live status pushed by the device backend (Server-Sent Events on /api/status/stream),
// or polled from /cgi-bin/status when there is no backend; the settings and firmware pages talk to
// the backend only. Plain ES5 + fetch + XMLHttpRequest, no dependencies.
(function () {
  'use strict';

  var STATUS_URL = '/cgi-bin/status';
  var STREAM_URL = '/api/status/stream';
  var POLL_MS = 5000;    // how often the page polls the CGI status
  var TIMEOUT_MS = 4000; // a request slower than this counts as failed (less than POLL_MS, so polls never overlap)
  var RETRY_MS = 30000;  // how often a page without its backend tries the stream again
  var STALL_MS = 10000;  // a stream silent this long (it sends every second) counts as gone
  var NO_BACKEND = 'Device backend not running';
  var timer = 0;
  var hasData = false;
  var inflight = false;
  var lastOk = '';

  function $(id) { return document.getElementById(id); }
  function set(id, text) { $(id).textContent = text; }
  function num(x) { return typeof x === 'number' && isFinite(x) ? x : NaN; }

  // 93784.2 -> "1 day, 2 h 3 min"; under a minute -> "42 s".
  function fmtUptime(s) {
    s = num(s);
    if (!(s >= 0)) return 'unknown';
    s = Math.floor(s);
    if (s < 60) return s + ' s';
    var d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
    var parts = [];
    if (d) parts.push(d + (d === 1 ? ' day,' : ' days,'));
    if (d || h) parts.push(h + ' h');
    parts.push(m + ' min');
    return parts.join(' ');
  }

  // kB -> "63.9 MiB" (binary units, as /proc/meminfo's kB are KiB).
  function fmtKB(kb) {
    var units = ['KiB', 'MiB', 'GiB', 'TiB'], i = 0;
    while (kb >= 1024 && i < units.length - 1) { kb /= 1024; i++; }
    return (i ? kb.toFixed(1) : String(Math.round(kb))) + ' ' + units[i];
  }

  function fmtLoad(x) { x = num(x); return isNaN(x) ? '\u2013' : x.toFixed(2); }
  function str(x) { return typeof x === 'string' && x ? x : 'unknown'; }

  function render(st) {
    set('hostname', str(st.hostname));
    document.title = str(st.hostname) + ' \u2013 device status';
    set('uptime', fmtUptime(st.uptime));
    set('kernel', str(st.kernel));
    set('firmware', str(st.firmware));
    var pushed = typeof st.counter === 'number'; // only the backend's events count
    set('counter', pushed ? String(st.counter) : '\u2013');
    $('counter').parentNode.hidden = !pushed;
    var load = Array.isArray(st.load) ? st.load : [];
    set('load1', fmtLoad(load[0]));
    set('load5', fmtLoad(load[1]));
    set('load15', fmtLoad(load[2]));

    var total = num(st.mem_total_kb);
    var avail = num(st.mem_available_kb);
    if (isNaN(avail)) avail = num(st.mem_free_kb); // kernels before 3.14 have no MemAvailable
    var bar = $('membar');
    if (total > 0 && avail >= 0) {
      var used = Math.max(0, total - avail);
      var pct = Math.min(100, Math.round(used / total * 100));
      set('mem', fmtKB(used) + ' used of ' + fmtKB(total) + ' (' + pct + '%)');
      $('memfill').style.width = pct + '%';
      bar.setAttribute('aria-valuenow', String(pct));
      bar.setAttribute('aria-valuetext', pct + '% used');
      bar.className = pct >= 90 ? 'bar high' : 'bar';
    } else {
      set('mem', 'unknown');
    }
  }

  function showError(msg) {
    var el = $('alert');
    // Only touch the live region when the message changes, so screen readers don't repeat it every 5 s.
    if (el.hidden || el.textContent !== msg) { el.textContent = msg; el.hidden = false; }
    document.body.classList.toggle('stale', hasData);
    if ($('updated')) set('updated', hasData ? 'Showing the values of ' + lastOk + '.' : 'No status data yet.');
  }

  function clearError() {
    var el = $('alert');
    if (!el.hidden) { el.hidden = true; el.textContent = ''; }
    document.body.classList.remove('stale');
  }

  function tell(id, msg) {
    var el = $(id);
    if (msg === '') { el.hidden = true; el.textContent = ''; return; }
    if (el.hidden || el.textContent !== msg) { el.textContent = msg; el.hidden = false; }
  }

  function shown(st) {
    if (!st || typeof st !== 'object') return false;
    render(st);
    hasData = true;
    clearError();
    lastOk = new Date().toLocaleTimeString();
    return true;
  }

  // ---- status page: the stream while the backend answers, the CGI otherwise ----

  var stream = null, stall = 0, retry = 0, polling = false;

  function poll() {
    clearTimeout(timer);
    if (!polling || inflight) return; // the running request schedules the next one
    inflight = true;
    var ctl = typeof AbortController === 'function' ? new AbortController() : null;
    var killer = ctl ? setTimeout(function () { ctl.abort(); }, TIMEOUT_MS) : 0;
    fetch(STATUS_URL, { cache: 'no-store', headers: { Accept: 'application/json' }, signal: ctl && ctl.signal })
      .then(function (res) {
        if (!res.ok) throw new Error('Status endpoint unavailable (HTTP ' + res.status + ')');
        return res.json().catch(function () {
          throw new Error('Status endpoint returned invalid data');
        });
      })
      .then(function (st) {
        if (!polling) return;
        if (!shown(st)) throw new Error('Status endpoint returned invalid data');
        set('updated', 'Updated ' + lastOk);
      })
      .catch(function (err) {
        if (!polling) return;
        var msg = err && /^Status endpoint/.test(err.message) ? err.message
          : err && err.name === 'AbortError' ? 'Status endpoint unavailable (no answer within ' + TIMEOUT_MS / 1000 + ' s)'
          : 'Status endpoint unavailable (network error)';
        showError(msg);
      })
      .then(function () {
        clearTimeout(killer);
        inflight = false;
        if (polling && !document.hidden) timer = setTimeout(poll, POLL_MS);
      });
  }

  function fallBack() {
    closeStream();
    tell('backend', NO_BACKEND + ': live values come from the CGI status script, every ' + POLL_MS / 1000 +
      ' s. Start it with: python3 board/demo/backend.py');
    set('source', 'Polling cgi-bin/status every ' + POLL_MS / 1000 + ' seconds.');
    if (!polling) { polling = true; poll(); }
    clearTimeout(retry);
    retry = setTimeout(connect, RETRY_MS);
  }

  function closeStream() {
    clearTimeout(stall);
    if (stream) { stream.onopen = stream.onmessage = stream.onerror = null; stream.close(); stream = null; }
  }

  function watch() {
    clearTimeout(stall);
    stall = setTimeout(fallBack, STALL_MS);
  }

  function connect() {
    closeStream();
    if (typeof EventSource !== 'function') { fallBack(); return; }
    stream = new EventSource(STREAM_URL);
    watch();
    stream.onmessage = function (ev) {
      var st;
      try { st = JSON.parse(ev.data); } catch (e) { st = null; }
      if (!shown(st)) { showError('Device backend sent invalid data'); return; }
      watch();
      if (polling) { polling = false; clearTimeout(timer); }
      clearTimeout(retry);
      tell('backend', '');
      set('updated', 'Updated ' + lastOk + ' (event ' + st.counter + ')');
      set('source', 'Live status pushed by the device backend every second.');
    };
    // A refused stream (404, 502: no backend) is CLOSED at once; a dropped one reconnects by itself,
    // and the stall timer catches one that never comes back.
    stream.onerror = function () {
      if (!stream || stream.readyState === EventSource.CLOSED) fallBack();
    };
  }

  function statusPage() {
    // Don't poll a hidden tab; refresh at once when it becomes visible again.
    document.addEventListener('visibilitychange', function () {
      if (document.hidden) clearTimeout(timer); else if (polling) poll();
    });
    connect();
  }

  // ---- the backend's pages ----

  // What a failed answer of the backend means to the person using the page.
  function backendProblem(status, doc) {
    if (status === 404 || status === 502 || status === 0) return NO_BACKEND + ' (start it with: python3 board/demo/backend.py).';
    if (status === 504) return 'The device backend did not answer in time.';
    if (status === 401) return 'Sign in to change the device (the browser asks for the password).';
    if (status === 413) return 'Too large for the device' + (doc && doc.error ? ': ' + doc.error : '') + '.';
    return (doc && typeof doc.error === 'string' ? doc.error : 'The device backend answered HTTP ' + status) + '.';
  }

  function jsonOf(text) {
    try { return JSON.parse(text); } catch (e) { return null; }
  }

  function request(method, url, body, done) {
    var x = new XMLHttpRequest();
    x.open(method, url);
    x.setRequestHeader('Accept', 'application/json');
    if (body !== null) x.setRequestHeader('Content-Type', 'application/json');
    x.onload = function () { done(x.status, jsonOf(x.responseText)); };
    x.onerror = function () { done(0, null); };
    x.send(body);
    return x;
  }

  var FIELDS = { hostname: 'f-hostname', timezone: 'f-timezone', ntp_server: 'f-ntp' };

  function fill(doc) {
    for (var k in FIELDS) if (typeof doc[k] === 'string') $(FIELDS[k]).value = doc[k];
  }

  function settingsPage() {
    request('GET', '/api/settings', null, function (status, doc) {
      if (status !== 200 || !doc) { showError(backendProblem(status, doc)); return; }
      fill(doc);
      $('fields').disabled = false;
    });
    $('settings').addEventListener('submit', function (ev) {
      ev.preventDefault();
      var doc = {};
      for (var k in FIELDS) doc[k] = $(FIELDS[k]).value;
      tell('saved', '');
      clearError();
      $('fields').disabled = true;
      request('POST', '/api/settings', JSON.stringify(doc), function (status, got) {
        $('fields').disabled = false;
        if (status !== 200 || !got) { showError('Not saved: ' + backendProblem(status, got)); return; }
        fill(got);
        tell('saved', 'Saved at ' + new Date().toLocaleTimeString() + '.');
      });
    });
  }

  function fmtBytes(n) {
    return n < 1024 ? n + ' bytes' : fmtKB(n / 1024) + ' (' + n + ' bytes)';
  }

  function firmwarePage() {
    request('GET', '/api/health', null, function (status) {
      if (status !== 200) { showError(backendProblem(status, null)); return; }
      $('fields').disabled = false;
    });
    $('upload').addEventListener('submit', function (ev) {
      ev.preventDefault();
      var file = $('f-image').files[0];
      if (!file) { showError('Choose an image first.'); return; }
      clearError();
      $('fields').disabled = true;
      set('size', '\u2013');
      set('sha256', '\u2013');
      var bar = $('progress');
      bar.value = 0;
      var x = new XMLHttpRequest();
      x.open('POST', '/api/firmware');
      x.setRequestHeader('Content-Type', 'application/octet-stream');
      x.setRequestHeader('Accept', 'application/json');
      x.upload.onprogress = function (e) {
        if (!e.lengthComputable) return;
        bar.value = Math.floor(e.loaded / e.total * 100);
        set('sent', fmtBytes(e.loaded) + ' of ' + fmtBytes(e.total) + ' sent');
      };
      x.onload = function () {
        $('fields').disabled = false;
        var doc = jsonOf(x.responseText);
        if (x.status !== 200 || !doc || typeof doc.sha256 !== 'string') {
          showError('Upload failed: ' + backendProblem(x.status, doc));
          return;
        }
        bar.value = 100;
        set('sent', 'All ' + fmtBytes(file.size) + ' of ' + file.name + ' sent.');
        set('size', fmtBytes(doc.size));
        set('sha256', doc.sha256);
      };
      x.onerror = function () {
        $('fields').disabled = false;
        showError('Upload failed: ' + backendProblem(0, null));
      };
      x.send(file);
    });
  }

  var page = document.body.getAttribute('data-page');
  if (page === 'settings') settingsPage();
  else if (page === 'firmware') firmwarePage();
  else statusPage();
}());
