// Runs the Vercel AI SDK through thinkwire, one scenario per line of output (JSON).
// Usage: node run.mjs PREFIX SCENARIO... where a scenario is SURFACE:MODE, SURFACE one of
// chat, openai-chat (@ai-sdk/openai's .chat()), responses, messages and MODE one of body, stream, roundtrip (streamed, a tool loop the
// SDK runs itself, so it builds turn 2 from its own turn-1 result), roundtrip-nostore (Responses
// with store: false). Each scenario talks to PREFIX-SURFACE-MODE/v1 (PREFIX: the proxy URL and a
// path naming the scripted upstream, e.g. http://127.0.0.1:8080/s/vercel).
import { generateText, streamText, jsonSchema, stepCountIs, tool } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { createOpenAI } from "@ai-sdk/openai";
import { createAnthropic } from "@ai-sdk/anthropic";

const [proxy, ...scenarios] = process.argv.slice(2);

function model(surface, baseURL) {
  if (surface === "chat") return createOpenAICompatible({ name: "tw", baseURL, apiKey: "x" })("qwen3");
  if (surface === "openai-chat") return createOpenAI({ baseURL, apiKey: "x" }).chat("qwen3");
  if (surface === "responses") return createOpenAI({ baseURL, apiKey: "x" }).responses("qwen3");
  return createAnthropic({ baseURL, apiKey: "x" })("qwen3");
}

const bash = tool({
  description: "run a command",
  inputSchema: jsonSchema({ type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"] }),
  execute: async () => "ok",
});

const reasoning = (parts) => (parts ?? []).filter((p) => p.type === "reasoning").map((p) => p.text);

async function run(surface, mode) {
  const m = model(surface, `${proxy}-${surface}-${mode}/v1`);
  const common = { model: m, prompt: "fix the build", maxRetries: 0 };
  // The docs/clients.md recipe for servers that store nothing: store: false sends reasoning items back
  // only with encrypted_content, which the SDK asks for only for models it knows to reason;
  // forceReasoning says this one does.
  if (mode === "roundtrip-nostore") common.providerOptions = { openai: { store: false, forceReasoning: true } };
  if (mode === "body") {
    const r = await generateText(common);
    return { steps: [{ reasoning: reasoning(r.content), text: r.text }] };
  }
  const tools = mode === "stream" ? undefined : { bash };
  let failed;
  const r = streamText({ ...common, tools, stopWhen: stepCountIs(3), onError: ({ error }) => { failed = error; } });
  const steps = await r.steps;
  if (failed) throw failed;
  return { steps: steps.map((s) => ({ reasoning: reasoning(s.content), text: s.text })) };
}

for (const sc of scenarios) {
  const [surface, mode] = sc.split(":");
  let out;
  try {
    out = { scenario: sc, ok: true, ...(await run(surface, mode)) };
  } catch (e) {
    out = { scenario: sc, ok: false, error: String(e?.message ?? e).slice(0, 500) };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}
