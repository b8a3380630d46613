// run.mjs runs Google Lighthouse on one tab of a running Chromium, for the
// browser worker's lighthouse_audit tool (services/browser/internal/page/
// lighthouse.go).
//
// It reads one JSON request on stdin:
//
//	{"wsEndpoint": "ws://127.0.0.1:PORT/devtools/browser/ID",
//	 "targetId": "…", "browserContextId": "…",
//	 "mode": "snapshot"|"navigation", "device": "desktop"|"mobile",
//	 "url": "…", "report": ""|"html"}
//
// and prints one JSON object on stdout: {"lhr": <Lighthouse result>} plus
// "html" (the HTML report) when report is "html". It fails with a message
// on stderr and a non-zero exit status.
//
// It attaches to that target only (the other tabs, and the other sessions'
// browser contexts, are left alone), never resets storage (the session's
// logins stay), never throttles the page and only disconnects at the end:
// the browser and the page stay open.

import {snapshot, navigation, generateReport} from 'lighthouse';
import * as constants from 'lighthouse/core/config/constants.js';
import {Fetcher} from 'lighthouse/core/gather/fetcher.js';
import puppeteer from 'puppeteer-core';

// None of these categories needs a trace (Lighthouse 12.8.2 gathers its
// Trace artifact for the performance category only), so the runner never
// calls Tracing.start. Keep it so: Chromium records one trace per browser,
// shared by every session of the worker, whose performance recordings take
// turns at it (perfturns.go); a traced audit would fail with
// TRACING_ALREADY_STARTED while any session records, and block their
// recordings while it runs (TestLighthouseWhileRecording).
const categories = ['accessibility', 'best-practices', 'seo'];

// Lighthouse fetches robots.txt and the source maps a page names with
// Network.loadNetworkResource: the browser loads them outside the page,
// where the worker's URL policy guard (Fetch interception on the tab) does
// not see them, so a page could make the worker load any URL (an internal
// host, a cloud metadata address) and read part of it in the report. Fetch
// them from inside the page instead, as the page itself would: the guard
// sees the request (and each redirect) and refuses what the session's
// policy refuses; CORS applies. A refused or failed fetch is a status
// without content, which Lighthouse reports as a failed fetch.
Fetcher.prototype.fetchResource = async function (url, options = {timeout: 2_000}) {
  const expression = `fetch(${JSON.stringify(url)}, {credentials: 'include', cache: 'no-store'})` +
    '.then(async r => ({status: r.status, content: r.ok ? await r.text() : null}))' +
    '.catch(() => ({status: null, content: null}))';
  const call = this.session.sendCommand('Runtime.evaluate', {expression, awaitPromise: true, returnByValue: true})
    .then(r => (r.result && r.result.value) || {status: null, content: null});
  return this._wrapWithTimeout(call, options.timeout);
};

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

function flagsFor(device) {
  const mobile = device === 'mobile';
  return {
    onlyCategories: categories,
    disableStorageReset: true,
    // "simulate" loads the page at full speed (it only models throttled
    // timings afterwards, for the performance category, which is not
    // run) and waits 1 s for network and CPU quiet; "provided" or
    // "devtools" would wait 5.25 s each (a navigation took 14 s instead
    // of 6 s on a plain page).
    throttlingMethod: 'simulate',
    // The element screenshots of the report need a full-page capture,
    // which is slow and makes the result large; the worker has
    // screenshot for that.
    disableFullPageScreenshot: true,
    formFactor: mobile ? 'mobile' : 'desktop',
    screenEmulation: mobile ? constants.screenEmulationMetrics.mobile : constants.screenEmulationMetrics.desktop,
    emulatedUserAgent: mobile ? constants.userAgents.mobile : constants.userAgents.desktop,
    maxWaitForLoad: 30_000,
    logLevel: 'error',
  };
}

async function main() {
  const req = await readStdin();
  if (!req.wsEndpoint || !req.targetId) throw new Error('the request needs wsEndpoint and targetId');
  const browser = await puppeteer.connect({
    browserWSEndpoint: req.wsEndpoint,
    defaultViewport: null,
    // Only the audited tab: its tab target (the parent of the page
    // target) and its page, in its browser context.
    targetFilter: target => {
      const info = target._getTargetInfo();
      if (req.browserContextId && info.browserContextId !== req.browserContextId) return false;
      if (info.type === 'tab') return true;
      return info.targetId === req.targetId;
    },
  });
  try {
    const target = await browser.waitForTarget(t => t._targetId === req.targetId, {timeout: 10_000});
    const page = await target.page();
    if (!page) throw new Error(`target ${req.targetId} is not a page`);
    const options = {flags: flagsFor(req.device)};
    const result = req.mode === 'navigation' ?
      await navigation(page, req.url || page.url(), options) :
      await snapshot(page, options);
    if (!result) throw new Error('Lighthouse returned no result');
    const out = {lhr: result.lhr};
    if (req.report === 'html') out.html = generateReport(result.lhr, 'html');
    await new Promise((resolve, reject) =>
      process.stdout.write(JSON.stringify(out), err => (err ? reject(err) : resolve())));
  } finally {
    await browser.disconnect();
  }
}

main().then(
  () => process.exit(0),
  err => {
    process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
    process.exit(1);
  });
