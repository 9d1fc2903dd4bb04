// Opens the Flower dashboard in headless Chromium (Debian's /usr/bin/chromium driven by
// playwright-core) with basic-auth credentials, and prints JSON: the text of the workers
// dashboard and of the tasks page once `expect` shows on it. Screenshots go to OUT_DIR.
// usage: node flower_check.cjs URL USER PASSWORD OUT_DIR EXPECT_ON_TASKS_PAGE
const path = require("path");
const { chromium } = require(process.env.PLAYWRIGHT_CORE || "playwright-core");

const [url, user, password, outDir, expect] = process.argv.slice(2);

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    const context = await browser.newContext({ httpCredentials: { username: user, password },
                                               viewport: { width: 1600, height: 1000 } });
    const page = await context.newPage();
    const dash = await page.goto(url + "/", { waitUntil: "networkidle" });
    const workersText = await page.innerText("body");
    await page.screenshot({ path: path.join(outDir, "flower-workers.png"), fullPage: true });
    await page.goto(url + "/tasks", { waitUntil: "networkidle" });
    await page.waitForFunction((s) => document.body.innerText.includes(s), expect, { timeout: 20000 });
    const tasksText = await page.innerText("body");
    await page.screenshot({ path: path.join(outDir, "flower-tasks.png"), fullPage: true });
    console.log(JSON.stringify({ status: dash.status(), workers: workersText, tasks: tasksText }));
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
