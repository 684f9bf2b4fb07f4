// Drives a running `kvtrie serve` with OpenAI's official Node.js client library (the `openai` npm package),
// as an application would: the models list, a chat completion, the same chat streamed, a completion, a
// second turn of the conversation (which must find the first turn's prompt in the cache) and an error.
// Run by tests/server/test_openai_client.cpp, which installs the package beside a copy of this file and
// sets KVTRIE_BASE_URL. Exits non-zero on the first failed check; prints a JSON summary last.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const client = new OpenAI({
  baseURL: process.env.KVTRIE_BASE_URL,
  apiKey: 'kvtrie-needs-no-key',
  maxRetries: 0,
  timeout: 60_000,
});

const ids = [];
for await (const m of client.models.list()) ids.push(m.id);
assert.equal(ids.length, 1, `one model is served, got ${JSON.stringify(ids)}`);
const model = ids[0];

const messages = [
  { role: 'system', content: 'You are a storyteller.' },
  { role: 'user', content: 'Tell me a story about a dragon.' },
];
const first = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0, seed: 1 });
assert.equal(first.object, 'chat.completion');
assert.equal(first.model, model);
assert.equal(first.choices.length, 1);
assert.equal(first.choices[0].message.role, 'assistant');
assert.equal(typeof first.choices[0].message.content, 'string');
assert.ok(['stop', 'length'].includes(first.choices[0].finish_reason), first.choices[0].finish_reason);
assert.ok(first.usage.prompt_tokens > 0);
assert.ok(first.usage.completion_tokens > 0 && first.usage.completion_tokens <= 8);
assert.equal(first.usage.total_tokens, first.usage.prompt_tokens + first.usage.completion_tokens);
assert.equal(typeof first.usage.prompt_tokens_details.cached_tokens, 'number');

const stream = await client.chat.completions.create({
  model, messages, max_tokens: 8, temperature: 0, seed: 1, stream: true, stream_options: { include_usage: true },
});
let streamed = '';
let finish = null;
let streamUsage = null;
for await (const chunk of stream) {
  assert.equal(chunk.object, 'chat.completion.chunk');
  if (chunk.usage) streamUsage = chunk.usage;
  for (const choice of chunk.choices) {
    streamed += choice.delta?.content ?? '';
    if (choice.finish_reason) finish = choice.finish_reason;
  }
}
// Greedy on --deterministic kernels: the same tokens whether the prompt came from the cache or not.
assert.equal(streamed, first.choices[0].message.content);
assert.equal(finish, first.choices[0].finish_reason);
assert.ok(streamUsage, 'stream_options.include_usage gave no usage');
assert.equal(streamUsage.prompt_tokens, first.usage.prompt_tokens);
assert.equal(streamUsage.completion_tokens, first.usage.completion_tokens);

const completion = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 6, temperature: 0 });
assert.equal(completion.object, 'text_completion');
assert.equal(typeof completion.choices[0].text, 'string');
assert.ok(completion.usage.prompt_tokens > 0);
assert.ok(completion.usage.completion_tokens > 0 && completion.usage.completion_tokens <= 6);

const second = await client.chat.completions.create({
  model,
  messages: [...messages, first.choices[0].message, { role: 'user', content: 'What happened next?' }],
  max_tokens: 8,
  temperature: 0,
});
const cached = second.usage.prompt_tokens_details.cached_tokens;
assert.ok(cached >= first.usage.prompt_tokens,
          `the second turn found ${cached} cached tokens; the first turn's prompt had ${first.usage.prompt_tokens}`);
assert.ok(cached < second.usage.prompt_tokens);

let refused = null;
try {
  await client.chat.completions.create({ model, messages: [], max_tokens: 1 });
} catch (e) {
  refused = e;
}
assert.ok(refused instanceof OpenAI.BadRequestError, `an empty conversation gave ${refused}`);
assert.equal(refused.status, 400);
assert.match(refused.message, /messages/);

console.log(JSON.stringify({
  model,
  first_prompt_tokens: first.usage.prompt_tokens,
  second_prompt_tokens: second.usage.prompt_tokens,
  second_cached_tokens: cached,
  streamed_tokens: streamUsage.completion_tokens,
  completion_tokens: completion.usage.completion_tokens,
}));
