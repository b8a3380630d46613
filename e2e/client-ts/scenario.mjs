#!/usr/bin/env node
// scenario.mjs drives a Sovereign gateway with the official MCP TypeScript
// SDK (Client + StreamableHTTPClientTransport, protocol 2025-11-25 with an
// Mcp-Session-Id) the way an agent would: list tools, open a page, snapshot,
// click a button and fill a textbox by ref, read text, take a screenshot, and
// end the session with DELETE.
//
// Usage: node scenario.mjs <mcp-url> <page-url>
//
// The page must have a button named "Save" that writes "clicked <n>" into the
// element #out, and a textbox named "Name" (id "name").
//
// It prints one JSON line to stdout ({"ok":true,...} or {"ok":false,"step":...,
// "error":...}) and exits 0 only when every step succeeded.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const CALL_TIMEOUT_MS = 30_000;
const OVERALL_TIMEOUT_MS = 90_000;
const FILL_VALUE = "typed by the TypeScript SDK";

const out = { ok: false };
let step = "args";

function finish(code) {
  process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(code));
}

function fail(err) {
  out.ok = false;
  out.step = step;
  out.error = err instanceof Error ? err.message : String(err);
  finish(1);
}

// Never hang: a stuck server ends the run with a clear failure.
setTimeout(() => fail(new Error(`scenario did not finish within ${OVERALL_TIMEOUT_MS} ms`)), OVERALL_TIMEOUT_MS).unref();

function text(result) {
  return (result.content ?? [])
    .filter((c) => c.type === "text")
    .map((c) => c.text)
    .join("\n");
}

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

// refFor finds the ref of the first snapshot line `- <role> "<name>" ... [ref=eN]`.
function refFor(snapshot, role, name) {
  for (const line of snapshot.split("\n")) {
    const m = line.match(/^\s*- ([\w-]+)(?: "((?:[^"\\]|\\.)*)")?.*\[ref=(e\d+)\]/);
    if (m && m[1] === role && (m[2] ?? "") === name) return m[3];
  }
  return "";
}

async function main() {
  const [mcpURL, pageURL] = process.argv.slice(2);
  check(mcpURL && pageURL, "usage: node scenario.mjs <mcp-url> <page-url>");

  const client = new Client({ name: "sovereign-e2e-ts", version: "0.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(mcpURL));
  const opts = { timeout: CALL_TIMEOUT_MS };

  async function call(name, args) {
    step = name;
    const res = await client.callTool({ name, arguments: args ?? {} }, undefined, opts);
    if (res.isError) throw new Error(`${name}: tool error: ${text(res)}`);
    return res;
  }

  step = "connect";
  await client.connect(transport, opts);
  out.protocolVersion = transport.protocolVersion ?? "";
  out.sessionId = transport.sessionId ?? "";
  out.server = client.getServerVersion()?.name ?? "";
  check(out.sessionId !== "", "the server sent no Mcp-Session-Id");

  step = "tools/list";
  const { tools } = await client.listTools(undefined, opts);
  out.tools = tools.length;
  out.hasScreenshot = tools.some((t) => t.name === "screenshot");

  await call("open", { url: pageURL });

  const title = await call("get_title");
  out.title = text(title).trim();

  const snap = await call("snapshot", {});
  const snapText = text(snap);
  out.buttonRef = refFor(snapText, "button", "Save");
  out.inputRef = refFor(snapText, "textbox", "Name");
  check(out.buttonRef !== "", `no button "Save" with a ref in the snapshot:\n${snapText}`);
  check(out.inputRef !== "", `no textbox "Name" with a ref in the snapshot:\n${snapText}`);
  const refs = snap.structuredContent?.refs ?? {};
  out.structuredRefs = Object.keys(refs).length;
  check(out.buttonRef in refs, `structuredContent.refs lacks ${out.buttonRef}`);

  await call("click", { ref: out.buttonRef });
  await call("fill", { ref: "@" + out.inputRef, value: FILL_VALUE });

  out.clickText = text(await call("get_text", { selector: "#out" })).trim();
  out.inputValue = text(await call("eval", { script: "document.querySelector('#name').value" })).trim();
  check(out.clickText.includes("clicked 1"), `get_text #out = ${JSON.stringify(out.clickText)}, want it to contain "clicked 1"`);
  check(out.inputValue.includes(FILL_VALUE), `input value = ${JSON.stringify(out.inputValue)}, want ${JSON.stringify(FILL_VALUE)}`);

  const shot = await call("screenshot", {});
  const img = (shot.content ?? []).find((c) => c.type === "image");
  check(img, "screenshot returned no image content");
  const bytes = Buffer.from(img.data, "base64");
  out.screenshot = {
    mimeType: img.mimeType,
    bytes: bytes.length,
    png: bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
  };
  check(out.screenshot.mimeType === "image/png" && out.screenshot.png, `screenshot is not a PNG: ${JSON.stringify(out.screenshot)}`);

  step = "terminateSession";
  await transport.terminateSession();
  out.terminated = transport.sessionId === undefined;
  step = "close";
  await client.close();

  out.ok = true;
  delete out.step;
  finish(0);
}

main().catch(fail);
