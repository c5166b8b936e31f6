// Chromium logs in to LuCI and opens its pages, as a user does; bench/luci-guest.sh runs it once per
// server, scheme and round. Per page, from the browser's own Resource Timing: the time from the
// page's start (its navigation; for the login, the moment the form is sent) to the end of its last
// answer from the ubus endpoint before 2 s without any, the number of those answers, the time they
// took summed in two parts (request sent to first byte, first byte to last: a server that sends a
// head before the body waits out the client's delayed ACK there), and any answer of 400 or more.
// One JSON line per page on stdout.
//
//   LUCI_URL=http://127.0.0.1:PORT LUCI_PASSWORD=... node bench/luci-guest.mjs PAGE...
//
// PAGE: a path under /cgi-bin/luci/ (admin/status/overview ...); the first is where the login
// lands. Uses tests/browser's pinned playwright-core and Debian's Chromium (CHROMIUM overrides).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const require = createRequire(new URL('../tests/browser/package.json', import.meta.url));
const { chromium } = require('playwright-core');

const base = process.env.LUCI_URL;
const password = process.env.LUCI_PASSWORD || 'marmoset';
const pages = process.argv.slice(2);
const QUIET_MS = 2000;      // no ubus answer for this long: the page is done
const PAGE_MS = 180000;     // a page that takes longer is reported as failed
if (!base || pages.length === 0) {
  console.error('usage: LUCI_URL=... node luci-guest.mjs PAGE...');
  process.exit(2);
}

const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'luci-guest-chromium-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  ignoreHTTPSErrors: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run'],
  viewport: { width: 1200, height: 800 },
});
const isUbus = (url) => { try { return new URL(url).pathname.startsWith('/ubus'); } catch { return false; } };
let rc = 0;
try {
  const page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(PAGE_MS);
  let bad = [];
  let inflight = 0;
  let lastUbus = Date.now();
  page.on('request', (r) => { if (isUbus(r.url())) { inflight++; lastUbus = Date.now(); } });
  const done = (r) => { if (isUbus(r.url())) { inflight = Math.max(0, inflight - 1); lastUbus = Date.now(); } };
  page.on('requestfinished', done);
  page.on('requestfailed', (r) => { done(r); bad.push(`${r.url()} ${r.failure()?.errorText}`); });
  page.on('response', (r) => { if (r.status() >= 400 && !(r.status() === 403 && r.url().includes('/cgi-bin/luci'))) bad.push(`${r.status()} ${r.url()}`); });

  // Waits for 2 s without a ubus request in flight or answered, then reads the page's timings.
  const settle = async (name, startedAt) => {
    const deadline = Date.now() + PAGE_MS;
    await page.waitForLoadState('load');
    // LuCI renders its view after the load event, asking ubus as it goes; the spinner goes when
    // the view is there.
    await page.waitForFunction(() => {
      const v = document.querySelector('#view');
      return v && v.children.length > 0 && !v.querySelector('.spinning');
    }, null, { timeout: PAGE_MS });
    lastUbus = Math.max(lastUbus, Date.now() - QUIET_MS + 500);
    while (inflight > 0 || Date.now() - lastUbus < QUIET_MS) {
      if (Date.now() > deadline) { bad.push('no quiet within the deadline'); break; }
      await page.waitForTimeout(100);
    }
    const t = await page.evaluate(() => {
      const ubus = performance.getEntriesByType('resource').filter((e) => new URL(e.name).pathname.startsWith('/ubus'));
      const nav = performance.getEntriesByType('navigation')[0];
      return {
        last: ubus.length ? Math.max(...ubus.map((e) => e.responseEnd)) : null,
        calls: ubus.length,
        toFirst: ubus.reduce((a, e) => a + e.responseStart - e.requestStart, 0),
        toLast: ubus.reduce((a, e) => a + e.responseEnd - e.responseStart, 0),
        load: nav ? nav.loadEventEnd : null,
        origin: performance.timeOrigin,
      };
    });
    // For the login the clock starts when the form is sent, before this document's time origin.
    const shift = startedAt ? t.origin - startedAt : 0;
    const row = {
      page: name,
      ms_last_ubus: t.last === null ? null : Math.round(t.last + shift),
      ms_load: t.load === null ? null : Math.round(t.load + shift),
      ubus_answers: t.calls,
      ubus_ms_to_first_byte: Math.round(t.toFirst),
      ubus_ms_first_to_last_byte: Math.round(t.toLast),
      failed: bad,
    };
    if (bad.length || t.last === null) rc = 1;
    console.log(JSON.stringify(row));
    bad = [];
  };

  await page.goto(`${base}/cgi-bin/luci/`);
  await page.waitForSelector('input[name=luci_password]');
  await page.fill('input[name=luci_password]', password);
  const sent = Date.now();
  await Promise.all([page.waitForURL(/\/cgi-bin\/luci\/?/), page.press('input[name=luci_password]', 'Enter')]);
  await page.waitForSelector('#maincontent, #view', { timeout: PAGE_MS });
  await settle(`login -> ${pages[0]}`, sent);
  for (const p of pages.slice(1)) {
    lastUbus = Date.now();
    await page.goto(`${base}/cgi-bin/luci/${p}`);
    await settle(p, 0);
  }
} catch (e) {
  console.error(`luci-guest.mjs: ${e.message}`);
  rc = 1;
} finally {
  await context.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
process.exit(rc);
