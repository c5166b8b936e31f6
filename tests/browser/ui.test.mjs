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
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const base = (process.env.MARMOSET_URL || '').replace(/\/$/, '');
const outDir = process.env.OUT_DIR || 'tests/out/browser';
const STEP_MS = 15000; // deadline for each wait; the page polls every 5 s

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
  timeout: STEP_MS,
});

let phase = 'load';        // 'load' | 'outage' | 'done'
const assets = [];         // { url, request, response } of the CSS and JS files
const isStatus = (url) => new URL(url).pathname === '/cgi-bin/status';
// During the simulated outage the 404s of the status endpoint are the point of the test.
const expected = (url) => phase === 'outage' && isStatus(url);

try {
  const page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(STEP_MS);

  page.on('console', (msg) => {
    if (phase === 'done' || msg.type() !== 'error') return;
    const where = msg.location().url || '';
    if (!expected(where)) problem(`console error: ${msg.text()}${where ? ` (${where})` : ''}`);
  });
  page.on('pageerror', (err) => { if (phase !== 'done') problem(`page error: ${err.message}`); });
  page.on('requestfailed', (req) => {
    if (phase !== 'done' && !expected(req.url())) problem(`request failed: ${req.url()} (${req.failure()?.errorText})`);
  });
  page.on('response', (res) => {
    if (phase === 'done') return;
    if (res.status() >= 400 && !expected(res.url())) problem(`HTTP ${res.status()} for ${res.url()}`);
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
      if (PLACEHOLDERS.includes(got) || !shape.test(got)) problem(`#${id} shows "${got}", not a value from cgi-bin/status`);
      else if (LIVE) info(`#${id}: ${got}`);
    }
    if (await page.locator('#alert').isVisible()) problem('the error banner is visible while the endpoint works');
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

  // 4. A narrow (phone) screen, for a person to look at.
  await page.setViewportSize({ width: 390, height: 800 });
  await page.screenshot({ path: path.join(outDir, `ui${TAG}-narrow.png`), fullPage: true });

  // 5. Information only: does the server answer unknown paths with 404.html? (needs `error-page 404 /404.html`)
  //    (Playwright's own HTTP client, not the browser: it does not know the trusted key.)
  const missing = await context.request.get(`${base}/no-such-page`, { ignoreHTTPSErrors: HTTPS });
  const body = await missing.text();
  info(`GET /no-such-page: HTTP ${missing.status()}${body.includes('404 &ndash; Not found') ? ', 404.html' : ''}`);
} catch (err) {
  problem(`test aborted: ${err.message.split('\n')[0]}`);
} finally {
  phase = 'done';
  await context.close().catch(() => {});
  if (!process.env.PROFILE_DIR) fs.rmSync(profile, { recursive: true, force: true });
}

if (problems.length) {
  console.error(`${problems.length} problem(s): ${problems[0]}${problems.length > 1 ? ' ...' : ''}`);
  process.exit(1);
}
process.exit(0);
