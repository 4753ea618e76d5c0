// serve_openai.cjs - drive `k3 serve` with the official `openai` npm package
// (tests/t_serve.sh). Prints PASS/FAIL lines.
//   node tests/serve_openai.cjs BASE_URL MODEL
// The package is found at build/node (tools/node_deps.sh).
const path = require("path");
const OpenAI = require(path.resolve(__dirname, "../build/node/node_modules/openai"));
const [base, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + "/v1", apiKey: "unused", maxRetries: 0, timeout: 60000 });
const say = (ok, name, why) => console.log(ok ? `PASS ${name}` : `FAIL ${name}: ${why}`);
const msgs = [{ role: "user", content: "Say something about the sea" }];

(async () => {
  try {
    const list = await client.models.list();
    const ids = list.data.map((m) => m.id);
    say(ids.length === 1 && ids[0] === model, "openai npm: models.list", JSON.stringify(ids));
  } catch (e) { say(false, "openai npm: models.list", e.message); }
  let whole = null;
  try {
    const r = await client.chat.completions.create({ model, messages: msgs, max_tokens: 12, temperature: 0 });
    whole = r.choices[0].message.content;
    const u = r.usage;
    say(r.object === "chat.completion" && typeof whole === "string" && u.completion_tokens > 0 &&
        u.total_tokens === u.prompt_tokens + u.completion_tokens,
        "openai npm: chat.completions.create (non-stream)", JSON.stringify(r));
  } catch (e) { say(false, "openai npm: chat.completions.create (non-stream)", e.message); }
  try {
    const stream = await client.chat.completions.create({ model, messages: msgs, max_tokens: 12, temperature: 0,
                                                         stream: true, stream_options: { include_usage: true } });
    let text = "", chunks = 0, finish = null, usage = null;
    for await (const c of stream) {
      chunks++;
      if (c.choices.length) {
        text += c.choices[0].delta.content || "";
        finish = c.choices[0].finish_reason || finish;
      }
      if (c.usage) usage = c.usage;
    }
    say(chunks >= 3 && text === whole && finish !== null && usage && usage.completion_tokens > 0,
        "openai npm: streaming chat equals the non-stream answer",
        `chunks=${chunks} text=${JSON.stringify(text)} whole=${JSON.stringify(whole)} finish=${finish}`);
  } catch (e) { say(false, "openai npm: streaming chat", e.message); }
  try {
    const r = await client.completions.create({ model, prompt: "The capital of France is", max_tokens: 5, temperature: 0 });
    say(r.object === "text_completion" && r.usage.completion_tokens === 5 && r.choices[0].finish_reason === "length",
        "openai npm: completions.create", JSON.stringify(r));
  } catch (e) { say(false, "openai npm: completions.create", e.message); }
  try {
    await client.chat.completions.create({ model: "no-such-model", messages: msgs });
    say(false, "openai npm: unknown model is a NotFoundError", "no error");
  } catch (e) {
    say(e instanceof OpenAI.NotFoundError && e.status === 404 && /does not exist/.test(e.message),
        "openai npm: unknown model is a NotFoundError (404)", `${e.constructor.name} ${e.status} ${e.message}`);
  }
  try {
    await client.chat.completions.create({ model, messages: msgs, temperature: 7 });
    say(false, "openai npm: temperature 7 is a BadRequestError", "no error");
  } catch (e) {
    say(e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === "temperature",
        "openai npm: temperature 7 is a BadRequestError (400, param temperature)", `${e.constructor.name} ${e.status} ${e.message}`);
  }
})();
