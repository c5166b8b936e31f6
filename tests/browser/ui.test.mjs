// Browser test of the demo UI: Debian's headless Chromium, driven by playwright-core, against a
// marmoset that run.sh started. Prints one line per problem to stderr; exit 0 only if there were none.
//
//   MARMOSET_URL  base URL of the running server (required), e.g. http://127.0.0.1:41234
//   OUT_DIR       where the screenshots go (default tests/out/browser)
//   PROFILE_DIR   a fresh, empty Chromium user-data-dir (default: a new temp dir)
//   CHROMIUM      the browser (default /usr/bin/chromium)
//   LIVE_HOSTNAME with the shipped cgi-bin/status instead of run.sh's stub: this machine's hostname;
//                 every value the page shows must then be a real one (no placeholder, no "unknown")
//   LIVE_KERNEL, LIVE_FIRMWARE  (live only, optional) `uname -r` and os-release's PRETTY_NAME, shown exactly
//   SHOT_TAG      added to the screenshot names (ui$TAG.png, ui$TAG-outage.png, ui$TAG-narrow.png);
//                 default "" for the stub, "-live" with LIVE_HOSTNAME
//   TRUST_SPKI    (https:// URLs) base64 SHA-256 of the server certificate's SubjectPublicKeyInfo:
//                 Chromium trusts that key (--ignore-certificate-errors-spki-list) and no other, so
//                 the page is a secure context served with that certificate; the page must then
//                 come over TLS 1.2 or 1.3
//   BACKEND       "present": the demo backend (board/demo/backend.py) answers /api/ through the
//                 server's proxy: the status must come pushed by its event stream (the counter
//                 moving, no CGI request), the settings page must save (a refused value shown as an
//                 error first), the firmware page must upload UPLOAD_BYTES of random data and show
//                 the size and SHA-256 computed here, and a saved host name must reach the status
//                 page through the stream. Otherwise (default) the backend is absent: the pages say
//                 so, the status comes from cgi-bin/status, and the backend's 404 or 502 answers
//                 (and Chromium's console line for each) are the only failures allowed
//   AUTH_USER, AUTH_PASS  Basic-auth credentials for the settings and firmware pages and their
//                 /api/ paths (given to Chromium as httpCredentials); without them no credentials
//                 are sent. With them, those paths must answer 401 to a client without credentials
//   UPLOAD_BYTES  size of the uploaded file (default 5 MiB + 321 bytes)
//   BACKEND_PID   (with BACKEND=present) the backend's process: at the end it gets SIGTERM while
//                 the status page is open, which must then say so and show the CGI's values
//                 (hostname CGI_HOSTNAME); the stream's failures are expected from then on
import { chromium, request } from 'playwright-core';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const base = (process.env.MARMOSET_URL || '').replace(/\/$/, '');
const outDir = process.env.OUT_DIR || 'tests/out/browser';
const STEP_MS = 15000; // deadline for each wait; the page polls every 5 s
// Starting Chromium on a busy 2-core machine has taken longer than a step.
const LAUNCH_MS = 60000;

// What the stub cgi-bin/status of run.sh returns, and how the page must show it.
// With LIVE_HOSTNAME, the shipped status script runs instead: the hostname (and, when run.sh
// passes them, kernel and firmware) are known in advance, the rest must at least look real.
const LIVE = process.env.LIVE_HOSTNAME;
const EXPECT = LIVE ? Object.fromEntries(Object.entries({
  hostname: LIVE,
  kernel: process.env.LIVE_KERNEL,
  firmware: process.env.LIVE_FIRMWARE,
}).filter(([, v]) => v)) : {
  hostname: 'testbox',
  uptime: '1 day, 2 h 3 min',
  kernel: '6.1.0-test',
  firmware: 'Buildroot 2024.02',
  load1: '0.10',
  mem: '24.9 MiB used of 64.0 MiB (39%)',
};
// Every element app.js fills from cgi-bin/status, and the form a real value has there.
// The page starts with "\u2026" (hostname) and "\u2013" (the rest); app.js writes "unknown" or "\u2013"
// for a field the script left out or could not read, and "unknown" when the memory figures are 0.
const ANY = /\S/;
const LOAD = /^\d+\.\d\d$/;
const SHAPE = {
  hostname: ANY,
  uptime: /^(\d+ s|(\d+ days?, )?(\d+ h )?\d+ min)$/,
  kernel: ANY,
  firmware: ANY,
  load1: LOAD,
  load5: LOAD,
  load15: LOAD,
  mem: /^\d+(\.\d)? [KMGT]iB used of \d+(\.\d)? [KMGT]iB \(\d+%\)$/,
};
const PLACEHOLDERS = ['', '\u2026', '\u2013', 'unknown'];
const BACKEND = process.env.BACKEND === 'present';
if (BACKEND) SHAPE.counter = /^\d+$/;
const AUTH = process.env.AUTH_USER ? { username: process.env.AUTH_USER, password: process.env.AUTH_PASS || '' } : null;
const UPLOAD_BYTES = Number(process.env.UPLOAD_BYTES || 5 * 1024 * 1024 + 321);
const TAG = process.env.SHOT_TAG ?? (LIVE ? '-live' : '');
const SHOT = `ui${TAG}.png`;

const problems = [];
const info = (msg) => console.error(`  ${msg}`);
const problem = (msg) => { problems.push(msg); console.error(`  problem: ${msg}`); };

if (!base) { console.error('MARMOSET_URL is not set'); process.exit(2); }
const HTTPS = base.startsWith('https:');
const SPKI = process.env.TRUST_SPKI || '';
if (HTTPS && !SPKI) { console.error('an https:// MARMOSET_URL needs TRUST_SPKI'); process.exit(2); }
fs.mkdirSync(outDir, { recursive: true });
const profile = process.env.PROFILE_DIR || fs.mkdtempSync(path.join(os.tmpdir(), 'marmoset-chromium-'));

const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run',
    ...(SPKI ? [`--ignore-certificate-errors-spki-list=${SPKI}`] : [])],
  viewport: { width: 1000, height: 700 },
  timeout: LAUNCH_MS,
  ...(AUTH ? { httpCredentials: AUTH } : {}),
});

let phase = 'load';        // 'load' | 'outage' | 'bad-settings' | 'leave' | 'stopped' | 'done'
const assets = [];         // { url, request, response } of the CSS and JS files
const pathOf = (url) => { try { return new URL(url).pathname; } catch { return ''; } };
const isStatus = (url) => pathOf(url) === '/cgi-bin/status';
let cgiPolls = 0;          // requests for cgi-bin/status: none while the backend pushes the status
// What the pages ask the backend for. Without it they get 404 (a server without a proxy line) or
// 502 (the proxy with nothing on its socket); those answers, and only those, are expected then.
const BACKEND_PATHS = ['/api/status/stream', '/api/settings', '/api/health'];
const backendMiss = (url, status) => !BACKEND && BACKEND_PATHS.includes(pathOf(url)) && [404, 502].includes(status);
// During the simulated outage the 404s of the status endpoint are the point of the test, and
// so is the 400 of the refused settings.
const expected = (url, status) => (phase === 'outage' && isStatus(url)) || backendMiss(url, status) ||
  (phase === 'stopped' && BACKEND_PATHS.includes(pathOf(url)) && [404, 502].includes(status)) ||
  (phase === 'bad-settings' && pathOf(url) === '/api/settings' && status === 400);
// Chromium's console line for an answer >= 400: "Failed to load resource: the server responded
// with a status of 502 (Bad Gateway)", located at the resource's URL.
const consoleStatus = (text) => Number((/^Failed to load resource: the server responded with a status of (\d+) /.exec(text) || [])[1]);

try {
  const page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(STEP_MS);

  page.on('console', (msg) => {
    if (phase === 'done' || msg.type() !== 'error') return;
    const where = msg.location().url || '';
    // A stream cut by the backend's stop ends without its last chunk (net::ERR_INCOMPLETE_CHUNKED_ENCODING).
    const cut = phase === 'stopped' && pathOf(where) === '/api/status/stream' && /^Failed to load resource: net::/.test(msg.text());
    if (!cut && !expected(where, phase === 'outage' ? 404 : consoleStatus(msg.text()))) problem(`console error: ${msg.text()}${where ? ` (${where})` : ''}`);
  });
  page.on('pageerror', (err) => { if (phase !== 'done') problem(`page error: ${err.message}`); });
  page.on('requestfailed', async (req) => {
    if (phase === 'done') return;
    const aborted = req.failure()?.errorText === 'net::ERR_ABORTED';
    // Leaving the status page cancels its event stream: that one abort is expected.
    if (phase === 'leave' && pathOf(req.url()) === '/api/status/stream' && aborted) return;
    if (phase === 'outage' && isStatus(req.url())) return;
    if (phase === 'stopped' && pathOf(req.url()) === '/api/status/stream') return; // cut by the stop
    // An event stream refused with 404 or 502 is then cancelled by Chromium (its body unread).
    if (aborted && backendMiss(req.url(), (await req.response().catch(() => null))?.status())) return;
    problem(`request failed: ${req.url()} (${req.failure()?.errorText})`);
  });
  page.on('response', (res) => {
    if (phase === 'done') return;
    if (isStatus(res.url())) cgiPolls++;
    if (res.status() >= 400 && !expected(res.url(), res.status())) problem(`HTTP ${res.status()} for ${res.url()}`);
    if (/\.(css|js)$/.test(new URL(res.url()).pathname)) assets.push(res);
  });

  // 1. The page loads and renders the stub's status.
  const main = await page.goto(`${base}/`, { waitUntil: 'load' });
  if (!main || main.status() !== 200) problem(`GET / answered ${main ? main.status() : 'nothing'}`);
  if (HTTPS && main) {
    // What Chromium negotiated, and whether it treats the page as secure (no interstitial,
    // no "Not secure": the certificate is the one trusted above).
    const tls = await main.securityDetails();
    if (!tls) problem('GET / came without TLS security details');
    else {
      info(`TLS: ${tls.protocol}, certificate subject "${tls.subjectName}", issuer "${tls.issuer}"`);
      if (!/^TLS 1\.[23]$/.test(tls.protocol || '')) problem(`GET / over ${tls.protocol}, not TLS 1.2 or 1.3`);
    }
    const secure = await page.evaluate(() => [location.protocol, window.isSecureContext]);
    if (secure[0] !== 'https:' || secure[1] !== true) {
      problem(`the page is not a secure https: context (protocol ${secure[0]}, isSecureContext ${secure[1]})`);
    }
  }
  let rendered = false;
  try {
    await page.waitForFunction((host) => {
      const t = (id) => document.getElementById(id)?.textContent;
      return t('hostname') === host && /\d/.test(t('uptime') || '');
    }, EXPECT.hostname);
    rendered = true;
  } catch {
    const alert = await page.locator('#alert').textContent().catch(() => '');
    problem(`hostname "${EXPECT.hostname}" and uptime not shown within ${STEP_MS / 1000} s` +
      (alert ? `; the page says: "${alert}"` : ''));
  }
  if (rendered) { // otherwise every field would just repeat the problem above
    for (const [id, want] of Object.entries(EXPECT)) {
      const got = await page.locator(`#${id}`).textContent();
      if (got !== want) problem(`#${id} shows "${got}", expected "${want}"`);
    }
    for (const [id, shape] of Object.entries(SHAPE)) {
      const got = (await page.locator(`#${id}`).textContent() ?? '').trim();
      if (PLACEHOLDERS.includes(got) || !shape.test(got)) problem(`#${id} shows "${got}", not a value from ${BACKEND ? 'the backend' : 'cgi-bin/status'}`);
      else if (LIVE) info(`#${id}: ${got}`);
    }
    if (await page.locator('#alert').isVisible()) problem('the error banner is visible while the endpoint works');
  }
  const source = async () => (await page.locator('#source').textContent()) || '';
  if (BACKEND) {
    // Pushed, not polled: the counter moves once a second, and cgi-bin/status is never asked.
    const counter = async () => Number(await page.locator('#counter').textContent());
    try {
      for (let i = 0; i < 2; i++) {
        const before = await counter();
        await page.waitForFunction((n) => Number(document.getElementById('counter').textContent) > n, before);
      }
      info(`status events: #counter at ${await counter()}, "${await page.locator('#updated').textContent()}"`);
    } catch {
      problem(`the status counter did not move within ${STEP_MS / 1000} s: no events from /api/status/stream`);
    }
    if (!/pushed by the device backend/.test(await source())) problem(`the footer says "${await source()}", not the pushed status`);
    if (await page.locator('#backend').isVisible()) problem(`the page says "${await page.locator('#backend').textContent()}" with the backend running`);
    if (cgiPolls) problem(`the page asked cgi-bin/status ${cgiPolls} time(s) while the backend pushed the status`);
  } else {
    const absent = page.locator('#backend', { hasText: 'Device backend not running' });
    if (!(await absent.isVisible())) problem('the status page does not say that the device backend is not running');
    if (!/cgi-bin\/status/.test(await source())) problem(`the footer says "${await source()}", not the CGI fallback`);
  }
  await page.screenshot({ path: path.join(outDir, SHOT), fullPage: true });
  info(`screenshot: ${path.join(outDir, SHOT)}`);

  // 2. CSS and JS come precompressed: br if the browser offers it, else gzip.
  if (assets.length < 2) problem(`expected a CSS and a JS response, saw ${assets.length}`);
  for (const res of assets) {
    const sent = (await res.request().allHeaders())['accept-encoding'] || '';
    const enc = (await res.allHeaders())['content-encoding'] || 'identity';
    const want = /\bbr\b/.test(sent) ? 'br' : /\bgzip\b/.test(sent) ? 'gzip' : 'identity';
    const name = new URL(res.url()).pathname;
    info(`${name}: Accept-Encoding "${sent}" -> Content-Encoding ${enc}`);
    if (enc !== want) problem(`${name} came with Content-Encoding ${enc}, expected ${want}`);
  }

  // 3. An outage of the status endpoint is shown plainly, and the page recovers after it.
  //    The outage is simulated in the browser, so this part does not depend on the server's CGI.
  //    With the backend the page does not poll the CGI: nothing to interrupt.
  if (!BACKEND) await outage(page, rendered);

  // 4. A narrow (phone) screen, for a person to look at.
  await page.setViewportSize({ width: 390, height: 800 });
  await page.screenshot({ path: path.join(outDir, `ui${TAG}-narrow.png`), fullPage: true });
  await page.setViewportSize({ width: 1000, height: 700 });

  // 5. Information only: does the server answer unknown paths with 404.html? (needs `error-page 404 /404.html`)
  //    (Playwright's own HTTP client, not the browser: it does not know the trusted key.)
  const missing = await context.request.get(`${base}/no-such-page`, { ignoreHTTPSErrors: HTTPS });
  const body = await missing.text();
  info(`GET /no-such-page: HTTP ${missing.status()}${body.includes('404 &ndash; Not found') ? ', 404.html' : ''}`);

  // 6. The pages that change the device: behind Basic auth when credentials are given.
  if (AUTH) await needsAuth();
  if (BACKEND) {
    const host = await settings(page);
    await firmware(page);
    if (host) { // the saved name, pushed to a status page opened afresh
      await go(page, '/');
      try {
        await page.locator('#hostname', { hasText: host }).waitFor();
        info(`status page shows the saved host name "${host}"`);
      } catch {
        problem(`the status page does not show the saved host name "${host}" within ${STEP_MS / 1000} s`);
      }
    }
    if (process.env.BACKEND_PID) await backendStops(page);
  } else {
    for (const name of ['settings', 'firmware']) {
      await go(page, `/${name}.html`);
      try {
        await page.locator('#alert', { hasText: 'Device backend not running' }).waitFor();
      } catch {
        problem(`${name}.html does not say that the device backend is not running`);
      }
      if (!(await page.locator('#fields').evaluate((el) => el.disabled))) problem(`${name}.html offers its form without a backend`);
      await page.screenshot({ path: path.join(outDir, `ui${TAG}-${name}.png`), fullPage: true });
    }
  }
} catch (err) {
  problem(`test aborted: ${err.message.split('\n')[0]}`);
} finally {
  phase = 'done';
  await context.close().catch(() => {});
  if (!process.env.PROFILE_DIR) fs.rmSync(profile, { recursive: true, force: true });
}

// 3. Simulated outage of the status endpoint (see the call above).
async function outage(page, rendered) {
  phase = 'outage';
  await page.route('**/cgi-bin/status', (route) =>
    route.fulfill({ status: 404, contentType: 'text/plain', body: 'not found\n' }));
  const banner = 'Status endpoint unavailable (HTTP 404)';
  try {
    await page.locator('#alert', { hasText: banner }).waitFor({ state: 'visible' });
    await page.screenshot({ path: path.join(outDir, `ui${TAG}-outage.png`), fullPage: true });
  } catch {
    problem(`"${banner}" not shown within ${STEP_MS / 1000} s of the endpoint failing`);
  }
  await page.unroute('**/cgi-bin/status');
  phase = 'load';
  if (rendered) { // recovery can only be judged when the real endpoint worked in step 1
    try {
      await page.locator('#alert').waitFor({ state: 'hidden' });
    } catch {
      problem(`the page did not recover within ${STEP_MS / 1000} s of the endpoint coming back`);
    }
  } else {
    info('recovery after the outage not checked: the status endpoint never worked');
  }
}

// The backend stops under an open status page: the page says so and falls back to the CGI.
async function backendStops(page) {
  phase = 'stopped';
  process.kill(Number(process.env.BACKEND_PID), 'SIGTERM');
  try {
    await page.locator('#backend', { hasText: 'Device backend not running' }).waitFor();
    await page.locator('#source', { hasText: 'cgi-bin/status' }).waitFor();
    if (process.env.CGI_HOSTNAME) await page.locator('#hostname', { hasText: process.env.CGI_HOSTNAME }).waitFor();
    info(`backend stopped: the page says "${await page.locator('#backend').textContent()}"; ` +
      `host name "${await page.locator('#hostname').textContent()}" from the CGI`);
    await page.screenshot({ path: path.join(outDir, `ui${TAG}-stopped.png`), fullPage: true });
  } catch {
    problem(`after the backend stopped the page did not fall back to the CGI within ${STEP_MS / 1000} s: ` +
      `"${await page.locator('#backend').textContent()}", "${await page.locator('#source').textContent()}"`);
  }
}

// Another page of the UI; the event stream of the page left may be cancelled meanwhile.
async function go(page, where) {
  phase = 'leave';
  try {
    return await page.goto(`${base}${where}`, { waitUntil: 'load' });
  } finally {
    phase = 'load';
  }
}

// The settings and firmware pages and their backend paths answer 401 without credentials.
async function needsAuth() {
  const anon = await request.newContext({ ignoreHTTPSErrors: HTTPS });
  for (const [method, p] of [['GET', '/settings.html'], ['GET', '/api/settings'], ['GET', '/firmware.html'], ['POST', '/api/firmware']]) {
    const res = await anon.fetch(`${base}${p}`, { method, data: method === 'POST' ? 'x' : undefined });
    if (res.status() !== 401) problem(`${method} ${p} without credentials answered ${res.status()}, not 401`);
    else if (!/^Basic realm=/.test(res.headers()['www-authenticate'] || '')) problem(`${method} ${p}: 401 without a Basic challenge`);
  }
  await anon.dispose();
  info('settings and firmware pages: 401 without credentials');
}

// Loads the settings, has a bad host name refused, saves a good one; returns it (or '').
async function settings(page) {
  const res = await go(page, '/settings.html');
  if (!res || res.status() !== 200) { problem(`GET /settings.html answered ${res ? res.status() : 'nothing'}`); return ''; }
  try {
    await page.locator('#fields:not([disabled])').waitFor();
  } catch {
    problem(`the settings did not load within ${STEP_MS / 1000} s: "${await page.locator('#alert').textContent()}"`);
    return '';
  }
  const current = await page.inputValue('#f-hostname');
  info(`settings loaded: host name "${current}"`);
  phase = 'bad-settings';
  await page.fill('#f-hostname', 'not a host name!');
  await page.click('button[type=submit]');
  try {
    await page.locator('#alert', { hasText: 'Not saved: hostname:' }).waitFor();
  } catch {
    problem(`a bad host name was not refused with a message: "${await page.locator('#alert').textContent()}"`);
  }
  await page.locator('#fields:not([disabled])').waitFor();
  phase = 'load';
  const host = `demo-${process.pid}`;
  await page.fill('#f-hostname', host);
  await page.fill('#f-timezone', 'Europe/Paris');
  await page.click('button[type=submit]');
  try {
    await page.locator('#saved', { hasText: 'Saved at' }).waitFor();
  } catch {
    problem(`saving the settings showed no success message: "${await page.locator('#alert').textContent()}"`);
    return '';
  }
  if (await page.locator('#alert').isVisible()) problem('the error message stays visible after a save');
  await page.screenshot({ path: path.join(outDir, `ui${TAG}-settings.png`), fullPage: true });
  const saved = await (await context.request.get(`${base}/api/settings`, { ignoreHTTPSErrors: HTTPS })).json();
  if (saved.hostname !== host || saved.timezone !== 'Europe/Paris') problem(`GET /api/settings after the save: ${JSON.stringify(saved)}`);
  else info(`settings saved: ${JSON.stringify(saved)}`);
  return host;
}

// Uploads UPLOAD_BYTES of random data; the page must show the size and SHA-256 computed here.
async function firmware(page) {
  const file = path.join(os.tmpdir(), `marmoset-firmware-${process.pid}.bin`);
  const data = crypto.randomBytes(UPLOAD_BYTES);
  fs.writeFileSync(file, data);
  const sha = crypto.createHash('sha256').update(data).digest('hex');
  try {
    const res = await go(page, '/firmware.html');
    if (!res || res.status() !== 200) { problem(`GET /firmware.html answered ${res ? res.status() : 'nothing'}`); return; }
    await page.locator('#fields:not([disabled])').waitFor();
    await page.setInputFiles('#f-image', file);
    await page.click('button[type=submit]');
    try {
      await page.locator('#sha256', { hasText: sha }).waitFor({ timeout: 4 * STEP_MS });
    } catch {
      problem(`the upload of ${UPLOAD_BYTES} bytes did not show SHA-256 ${sha}: "${await page.locator('#sha256').textContent()}", ` +
        `"${await page.locator('#alert').textContent()}"`);
      return;
    }
    const size = await page.locator('#size').textContent();
    if (!size.includes(`(${UPLOAD_BYTES} bytes)`)) problem(`#size shows "${size}", not ${UPLOAD_BYTES} bytes`);
    const bar = await page.locator('#progress').evaluate((el) => el.value);
    if (bar !== 100) problem(`the progress bar ends at ${bar}, not 100`);
    info(`firmware upload: ${size}, SHA-256 ${sha}, ${await page.locator('#sent').textContent()}`);
    await page.screenshot({ path: path.join(outDir, `ui${TAG}-firmware.png`), fullPage: true });
  } finally {
    fs.rmSync(file, { force: true });
  }
}

if (problems.length) {
  console.error(`${problems.length} problem(s): ${problems[0]}${problems.length > 1 ? ' ...' : ''}`);
  process.exit(1);
}
process.exit(0);
