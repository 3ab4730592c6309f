// Runs ollama-js through thinkwire, one scenario per line of output (JSON).
// Usage: node ollama.mjs PREFIX MODE... where MODE is body (chat, stream: false), stream, or
// roundtrip (two streamed turns: the first turn's message, thinking included, goes back in the
// second). Each mode talks to host PREFIX-MODE (the proxy URL and a path naming the scripted
// upstream, e.g. http://127.0.0.1:8080/s/ollama_js). Every request asks think: true.
import { Ollama } from "ollama";

const [prefix, ...modes] = process.argv.slice(2);
const ask = [{ role: "user", content: "fix the build" }];

async function streamed(client, messages) {
  // What the Ollama docs show: thinking and content accumulated chunk by chunk.
  let thinking = "";
  let content = "";
  for await (const chunk of await client.chat({ model: "qwen3", messages, think: true, stream: true })) {
    thinking += chunk.message.thinking ?? "";
    content += chunk.message.content ?? "";
  }
  return { role: "assistant", content, thinking };
}

const step = (m) => ({ reasoning: m.thinking ? [m.thinking] : [], text: m.content });

async function run(mode) {
  const client = new Ollama({ host: `${prefix}-${mode}` });
  if (mode === "body") {
    const r = await client.chat({ model: "qwen3", messages: ask, think: true, stream: false });
    return { steps: [step(r.message)] };
  }
  const first = await streamed(client, ask);
  if (mode === "stream") return { steps: [step(first)] };
  const second = await streamed(client, [...ask, first, { role: "user", content: "go on" }]);
  return { steps: [step(first), step(second)] };
}

for (const mode of modes) {
  let out;
  try {
    out = { scenario: mode, ok: true, ...(await run(mode)) };
  } catch (e) {
    out = { scenario: mode, ok: false, error: String(e?.message ?? e).slice(0, 500) };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}
