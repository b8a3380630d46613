#!/usr/bin/env node
// throughput.mjs measures tool calls per second through the official MCP
// TypeScript SDK client, the way an agent loops on one page: snapshot →
// click → fill → get_text, over and over, from N clients at once.
//
// Usage:
//   node throughput.mjs sovereign <mcp-url> <page-url> <clients> <seconds>
//   node throughput.mjs playwright <playwright-mcp cli.js> <page-url> <clients> <seconds> [extra args…]
//
// Sovereign: each client is an MCP session on the gateway (protocol
// 2025-11-25), so each has its own browser session. Playwright MCP: each
// client starts its own Playwright MCP process over stdio (its deployment
// model: one server per client) with the extra arguments given, e.g.
// --isolated --headless --timeout-settle 0 --executable-path <chromium>.
//
// The page needs a button named "Save" and a textbox named "Name"; get_text
// reads the element #out (Playwright MCP: browser_evaluate of its text).
// One JSON line goes to stdout: {"ok":true,"ops":…,"seconds":…,"ops_per_s":…}
// or {"ok":false,"error":…}; the exit code says the same.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const CALL_TIMEOUT_MS = 30_000;

const [kind, target, pageURL, clientsArg, secondsArg, ...extra] = process.argv.slice(2);
const clients = Number(clientsArg);
const seconds = Number(secondsArg);

function done(out, code) {
  process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(code));
}

if (!["sovereign", "playwright"].includes(kind) || !target || !pageURL || !(clients > 0) || !(seconds > 0)) {
  done({ ok: false, error: "usage: throughput.mjs sovereign|playwright <mcp-url|cli.js> <page-url> <clients> <seconds> [extra…]" }, 2);
}
// Never hang past the run: setup, the loop and closing have a bound.
setTimeout(() => done({ ok: false, error: `did not finish within ${seconds + 120} s` }, 1), (seconds + 120) * 1000).unref();

function text(result) {
  return (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

// refOf finds the ref of the first line with role and name in a snapshot
// (both servers write ARIA YAML: - button "Save" [ref=e5]).
function refOf(snapshot, role, name) {
  for (const line of snapshot.split("\n")) {
    if (line.includes(`${role} "${name}"`)) {
      const m = line.match(/\[ref=([^\]]+)\]/);
      if (m) return m[1];
    }
  }
  throw new Error(`no ${role} "${name}" with a ref in the snapshot:\n${snapshot.slice(0, 2000)}`);
}

// The tool calls of each server for the loop's steps.
const tools = {
  sovereign: {
    open: (url) => ["open", { url }],
    snapshot: () => ["snapshot", {}],
    click: (ref) => ["click", { ref }],
    fill: (ref, value) => ["fill", { ref, value }],
    getText: () => ["get_text", { selector: "#out" }],
  },
  playwright: {
    open: (url) => ["browser_navigate", { url }],
    snapshot: () => ["browser_snapshot", {}],
    click: (ref) => ["browser_click", { target: ref, element: "Save button", ref }],
    fill: (ref, value) => ["browser_type", { target: ref, element: "Name textbox", ref, text: value }],
    getText: () => ["browser_evaluate", { function: "() => document.querySelector('#out')?.textContent ?? ''" }],
  },
}[kind];

async function connect() {
  const client = new Client({ name: "sovereign-throughput", version: "1.0.0" });
  const transport = kind === "sovereign"
    ? new StreamableHTTPClientTransport(new URL(target))
    : new StdioClientTransport({ command: process.execPath, args: [target, ...extra], stderr: "ignore" });
  await client.connect(transport);
  return { client, transport };
}

async function call(client, [name, args]) {
  const res = await client.callTool({ name, arguments: args }, undefined, { timeout: CALL_TIMEOUT_MS });
  if (res.isError) throw new Error(`${name}: ${text(res)}`);
  return res;
}

async function prepare() {
  const c = await connect();
  await call(c.client, tools.open(pageURL));
  const snap = text(await call(c.client, tools.snapshot()));
  c.button = refOf(snap, "button", "Save");
  c.input = refOf(snap, "textbox", "Name");
  return c;
}

async function main() {
  const conns = await Promise.all(Array.from({ length: clients }, prepare));
  let ops = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  await Promise.all(conns.map(async (c, i) => {
    for (let n = 0; performance.now() < end; n++) {
      await call(c.client, tools.snapshot());
      await call(c.client, tools.click(c.button));
      await call(c.client, tools.fill(c.input, `client ${i} loop ${n}`));
      await call(c.client, tools.getText());
      ops += 4;
    }
  }));
  const took = (performance.now() - start) / 1000;
  for (const c of conns) {
    if (kind === "sovereign") await c.transport.terminateSession().catch(() => {});
    await c.client.close().catch(() => {});
  }
  done({ ok: true, ops, seconds: took, ops_per_s: ops / took }, 0);
}

main().catch((err) => done({ ok: false, error: err instanceof Error ? err.message : String(err) }, 1));
