// Device status page: polls /cgi-bin/status and renders it. Plain ES5+fetch, no dependencies.
(function () {
  'use strict';

  var STATUS_URL = '/cgi-bin/status';
  var POLL_MS = 5000;    // how often the page refreshes
  var TIMEOUT_MS = 4000; // a request slower than this counts as failed (less than POLL_MS, so polls never overlap)
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
    set('updated', hasData ? 'Showing the values of ' + lastOk + '.' : 'No status data yet.');
  }

  function clearError() {
    var el = $('alert');
    if (!el.hidden) { el.hidden = true; el.textContent = ''; }
    document.body.classList.remove('stale');
  }

  function poll() {
    clearTimeout(timer);
    if (inflight) return; // the running request schedules the next one
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
        if (!st || typeof st !== 'object') throw new Error('Status endpoint returned invalid data');
        render(st);
        hasData = true;
        clearError();
        lastOk = new Date().toLocaleTimeString();
        set('updated', 'Updated ' + lastOk);
      })
      .catch(function (err) {
        var msg = err && /^Status endpoint/.test(err.message) ? err.message
          : err && err.name === 'AbortError' ? 'Status endpoint unavailable (no answer within ' + TIMEOUT_MS / 1000 + ' s)'
          : 'Status endpoint unavailable (network error)';
        showError(msg);
      })
      .then(function () {
        clearTimeout(killer);
        inflight = false;
        if (!document.hidden) timer = setTimeout(poll, POLL_MS);
      });
  }

  // Don't poll a hidden tab; refresh at once when it becomes visible again.
  document.addEventListener('visibilitychange', function () {
    if (!document.hidden) poll(); else clearTimeout(timer);
  });

  poll();
}());
