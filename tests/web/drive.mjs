// Drives the web view in headless Chromium (Debian's chromium through playwright-core) and prints what it saw as JSON.
//
//   node drive.mjs MODULES_DIR [CHROMIUM]
//
// One browser serves every scenario of a test module: each line read from stdin is a scenario (JSON), run in a fresh
// browser context of its own (no cookies, storage or cache of an earlier one), and answered by one line on stdout,
// the report. Launching Chromium costs seconds on a loaded machine; a context costs a few milliseconds.
//
// A scenario names the page's base URL, the folder for screenshots, and steps:
//   {"open": "#/instance/KEY"}                       load a page and wait until it is drawn
//   {"diagram": true}                                wait for the diagram; report each element's markers
//   {"screenshot": "name"}                           save name.png in the artifacts folder
//   {"click": "CSS selector"}                        click, then wait for the page to redraw
//   {"fill": "CSS selector", "text": "..."}          type into a field
//   {"select": "CSS selector", "value": "..."}       choose an option of a select
//   {"check": "CSS selector", "checked": false}      tick a checkbox (or clear it)
//   {"submit": "CSS selector"}                       click a button that changes the URL; wait for the new page
//   {"badges": true}                                 report the diagram's count badges: {elementId: {kind: text}}
//   {"auth": {"scheme": "basic", "user": "...", "password": "..."}}   enter credentials in the sign-in form
//   {"texts": "CSS selector"}                        report the text of every match
//   {"block": "URL glob"}                            answer requests for it with 404 from now on
//   {"answer": "URL glob", "with": [{"status": 200, "json": {}}, …]}   answer requests for it with these, in turn
//                                                    (the last one repeats); the requests' bodies are reported
//                                                    by the next {"answered": "URL glob"} step
//   {"api": {"method": "POST", "path": "/v2/…", "body": {}}}   call the REST API beside the page (status reported)
//   {"waitFor": "CSS selector"}                      wait until the page shows it, without reloading
//   {"gone": "CSS selector"}                         wait until the page no longer shows it
//   ("timeoutMs": how long a step may wait, 30000 unless given)
// Playwright-core comes from .cache/browser (make browser); no browser is downloaded.

import { createRequire } from "node:module";
import path from "node:path";
import { createInterface } from "node:readline";

const [modules, executablePath = "/usr/bin/chromium"] = process.argv.slice(2);
const require = createRequire(path.join(modules, "noop.js"));
const { chromium } = require("playwright-core");

const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

let browser = null;

/** The browser, launched on the first scenario (again if it went away). */
async function launched() {
  if (!browser || !browser.isConnected()) {
    browser = await chromium.launch({ executablePath, args: CHROMIUM_ARGS, headless: true });
  }
  return browser;
}

const renders = (page) => page.evaluate(() => Number(document.getElementById("view").dataset.renders || 0));

/** Waits until the page has drawn `hash` after the `before`-th drawing. */
async function drawn(page, hash, before) {
  await page.waitForFunction(
    ([want, count]) => {
      const view = document.getElementById("view").dataset;
      return Number(view.renders || 0) > count && (!want || view.shown === want);
    },
    [hash, before],
  );
}

/** Runs one scenario's steps in a fresh context; returns the report. */
async function run(scenario) {
  const report = { steps: [], console: [] };
  const answered = {}; // URL glob → bodies of the requests an {"answer"} step fulfilled
  let context = null;
  try {
    context = await (await launched()).newContext({ viewport: { width: 1200, height: 900 } });
    const page = await context.newPage();
    page.on("console", (message) => report.console.push(`${message.type()}: ${message.text()}`));
    page.on("pageerror", (error) => report.console.push(`pageerror: ${error.message}`));
    page.setDefaultTimeout(scenario.timeoutMs || 30000); // generous: a loaded machine exports slowly
    for (const step of scenario.steps) {
      const seen = { step };
      if (step.open !== undefined) {
        const before = page.url().startsWith(scenario.base) ? await renders(page) : 0;
        await page.goto(scenario.base + step.open);
        await drawn(page, step.open, before);
        seen.heading = await page.locator("#view h1").first().innerText();
      } else if (step.diagram) {
        await page.waitForSelector("#diagram[data-ready=true]");
        seen.markers = await page.evaluate(() => {
          const marks = {};
          for (const node of document.querySelectorAll("#diagram .djs-element[data-element-id]")) {
            const classes = [...node.classList].filter((c) => c.startsWith("weir-"));
            if (classes.length) marks[node.dataset.elementId] = classes;
          }
          return marks;
        });
      } else if (step.screenshot) {
        const file = path.join(scenario.artifacts, `${step.screenshot}.png`);
        await page.screenshot({ path: file, fullPage: true });
        seen.file = file;
      } else if (step.click) {
        // the page marks itself busy from the click until it has drawn the action's effect
        await page.locator(step.click).first().click();
        await page.waitForFunction(() => !document.getElementById("view").dataset.busy);
        seen.notice = await page.locator("#notice").innerText();
      } else if (step.select) {
        await page.locator(step.select).first().selectOption(step.value);
      } else if (step.check) {
        await page.locator(step.check).first().setChecked(step.checked ?? true);
      } else if (step.submit) {
        const before = await renders(page);
        await page.locator(step.submit).first().click();
        await drawn(page, null, before);
        seen.url = new URL(page.url()).hash;
      } else if (step.badges) {
        await page.waitForSelector("#diagram[data-ready=true]");
        seen.badges = await page.evaluate(() => {
          const badges = {};
          for (const overlay of document.querySelectorAll("#diagram [data-container-id]")) {
            for (const badge of overlay.querySelectorAll(".weir-badge[data-kind]")) {
              (badges[overlay.dataset.containerId] ||= {})[badge.dataset.kind] = badge.textContent;
            }
          }
          return badges;
        });
      } else if (step.fill) {
        await page.locator(step.fill).first().fill(step.text);
      } else if (step.auth) {
        if (await page.locator("#auth").isHidden()) await page.click("#auth-toggle");
        await page.selectOption("#auth select[name=scheme]", step.auth.scheme);
        for (const [name, value] of Object.entries(step.auth)) {
          if (name !== "scheme") await page.fill(`#auth input[name=${name}]`, value);
        }
        const before = await renders(page);
        await page.click("#auth button[type=submit]");
        await drawn(page, null, before);
      } else if (step.texts) {
        seen.texts = await page.locator(step.texts).allInnerTexts();
      } else if (step.api) {
        seen.status = await page.evaluate(async ({ method, path, body }) => {
          const init = { method, headers: { "content-type": "application/json" }, body: JSON.stringify(body ?? {}) };
          return (await fetch(path, init)).status;
        }, step.api);
      } else if (step.waitFor) {
        await page.waitForSelector(step.waitFor);
      } else if (step.gone) {
        await page.waitForSelector(step.gone, { state: "detached" });
      } else if (step.answer) {
        const replies = [...step.with];
        answered[step.answer] = [];
        await page.route(step.answer, (route) => {
          answered[step.answer].push(route.request().postDataJSON?.() ?? null);
          const reply = replies.length > 1 ? replies.shift() : replies[0];
          route.fulfill({ status: reply.status, contentType: "application/json", body: JSON.stringify(reply.json ?? null) });
        });
      } else if (step.answered) {
        seen.requests = answered[step.answered] || [];
      } else if (step.block) {
        await page.route(step.block, (route) => route.fulfill({ status: 404, body: "" }));
      }
      report.steps.push(seen);
    }
  } catch (error) {
    report.error = String(error?.stack || error);
  } finally {
    await context?.close().catch(() => {});
  }
  return report;
}

// one scenario at a time, in the order they come; stdin's end (the test module is done) closes the browser
for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (!line.trim()) continue;
  let report;
  try {
    report = await run(JSON.parse(line));
  } catch (error) {
    report = { steps: [], console: [], error: String(error?.stack || error) };
  }
  process.stdout.write(JSON.stringify(report) + "\n");
}
await browser?.close().catch(() => {});
