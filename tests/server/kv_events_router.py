#!/usr/bin/env python3
"""A router's view of kvtrie's KV events (issue 10), checked against the daemon it listens to.

Run by tests/server/test_kv_events.cpp against a running `kvtrie serve --kv-events tcp://127.0.0.1:EVENTS
--kv-events-replay tcp://127.0.0.1:REPLAY --kv-events-topic TOPIC` on lavapipe with 1 MiB KV tiers. As llm-d's
endpoint picker does, it binds a ZMQ SUB socket that the daemon's PUB connects to, fills gaps in the sequence
numbers (the first batches go out before the subscription arrives) through the ROUTER replay socket, and
decodes every batch with a decoder written against vLLM's msgspec structs (vllm/distributed/kv_events.py:
tagged arrays, fields in declaration order). Then:
  1. random multi-conversation traffic (shared system prompts, multi-turn histories, branches, two cache
     namespaces, a flush, concurrent clients) over tiers small enough to demote to host and evict: the index
     rebuilt from the events alone equals, per tier, the page hashes GET /cache/pages lists;
  2. for new prompts, the index's longest prefix of whole pages equals the daemon's cached_tokens (in whole
     pages, at most the prompt's length - 1, as the daemon always computes one token);
  3. the same tokens in two namespaces are published under disjoint hashes, each the chain of
     cache/page_hash.h for its namespace;
  4. a subscriber that starts last rebuilds the same index from the replay socket alone.
Exits 0 when every check holds, 1 with the failures listed, 77 when python3-zmq, python3-msgpack or
python3-xxhash is missing.
"""
import argparse
import http.client
import json
import random
import struct
import sys
import threading
import time

try:
    import msgpack
    import xxhash
    import zmq
except ImportError as e:  # the test skips with this message
    print(f"missing Python module: {e.name} (Debian: python3-zmq python3-msgpack python3-xxhash)")
    sys.exit(77)

PAGE = 16
PAGE_HASH_SEED = 0x6B76747269652D31  # cache/page_hash.h: kPageHashSeed
END_OF_REPLAY = -1

# vLLM's structs, fields in declaration order: (name, types, required). msgspec encodes each as an array led
# by the tag (the class name) and omits trailing fields left at their defaults.
INT, NONE, STR, FLOAT, LIST = int, type(None), str, float, list
SCHEMA = {
    "BlockStored": [("block_hashes", (LIST,), True), ("parent_block_hash", (INT, NONE), True),
                    ("token_ids", (LIST,), True), ("block_size", (INT,), True), ("lora_id", (INT, NONE), True),
                    ("medium", (STR, NONE), True), ("lora_name", (STR, NONE), True),
                    ("extra_keys", (LIST, NONE), False), ("group_idx", (INT, NONE), False),
                    ("kv_cache_spec_kind", (STR, NONE), False),
                    ("kv_cache_spec_sliding_window", (INT, NONE), False)],
    "BlockRemoved": [("block_hashes", (LIST,), True), ("medium", (STR, NONE), True),
                     ("group_idx", (INT, NONE), False)],
    "AllBlocksCleared": [],
}
BATCH_SCHEMA = [("ts", (FLOAT,), True), ("events", (LIST,), True), ("data_parallel_rank", (INT, NONE), False)]


class SchemaError(Exception):
    pass


def decode_fields(values, schema, what):
    if len(values) > len(schema):
        raise SchemaError(f"{what}: {len(values)} fields, vLLM's struct has {len(schema)}")
    out = {}
    for i, (name, types, required) in enumerate(schema):
        if i >= len(values):
            if required:
                raise SchemaError(f"{what}: required field {name} (position {i}) is missing")
            out[name] = None
            continue
        if not isinstance(values[i], types) or isinstance(values[i], bool):
            raise SchemaError(f"{what}: field {name} (position {i}) is a {type(values[i]).__name__}")
        out[name] = values[i]
    return out


def decode_batch(payload):
    """One EventBatch as vLLM's msgspec decoder reads it (array_like structs, tagged events)."""
    raw = msgpack.unpackb(payload, raw=False, strict_map_key=True)
    if not isinstance(raw, list):
        raise SchemaError("an EventBatch is not an array")
    batch = decode_fields(raw, BATCH_SCHEMA, "EventBatch")
    events = []
    for e in batch["events"]:
        if not isinstance(e, list) or not e or e[0] not in SCHEMA:
            raise SchemaError(f"an event is not a tagged array of a known type: {str(e)[:80]}")
        fields = decode_fields(e[1:], SCHEMA[e[0]], e[0])
        fields["type"] = e[0]
        for h in fields.get("block_hashes") or []:
            if not isinstance(h, int) or not 0 <= h < 2**64:
                raise SchemaError(f"{e[0]}: a block hash is not a 64-bit unsigned integer")
        if e[0] == "BlockStored":
            if fields["block_size"] != PAGE or len(fields["token_ids"]) != PAGE * len(fields["block_hashes"]):
                raise SchemaError("BlockStored: token_ids do not fill block_size tokens per block")
        if e[0] != "AllBlocksCleared" and fields["medium"] not in ("GPU", "CPU", "DISK"):
            raise SchemaError(f"{e[0]}: medium {fields['medium']!r}")
        events.append(fields)
    return batch, events


def namespace_seed(namespace):
    ns_id = xxhash.xxh64_intdigest(namespace.encode(), 0)  # runner: the namespace with tenant salt 0
    return xxhash.xxh3_64_intdigest(struct.pack("<Q", ns_id), PAGE_HASH_SEED)


def page_hashes(namespace, tokens):
    """The hash of each whole page of tokens in namespace, as cache/page_hash.h defines it."""
    h, out = namespace_seed(namespace), []
    for i in range(0, len(tokens) - PAGE + 1, PAGE):
        h = xxhash.xxh3_64_intdigest(struct.pack(f"<{PAGE}i", *tokens[i:i + PAGE]), h)
        out.append(h)
    return out


class Index:
    """The pages a router believes the daemon holds: (hash, medium), rebuilt from events alone."""

    def __init__(self):
        self.held = {"GPU": set(), "CPU": set(), "DISK": set()}
        self.errors = []
        self.counts = {"BlockStored": 0, "BlockRemoved": 0, "AllBlocksCleared": 0}
        self.stored_tokens = {}  # hash -> token ids of its page, for the namespace check

    def apply(self, event):
        self.counts[event["type"]] += 1
        if event["type"] == "AllBlocksCleared":
            for s in self.held.values():
                s.clear()
            return
        held = self.held[event["medium"]]
        if event["type"] == "BlockStored":
            parent = event["parent_block_hash"]
            if parent is not None and not any(parent in s for s in self.held.values()):
                self.errors.append(f"BlockStored with an unknown parent {parent:#x}")
            for i, h in enumerate(event["block_hashes"]):
                if h in held:
                    self.errors.append(f"{h:#x} stored twice on {event['medium']}")
                held.add(h)
                self.stored_tokens[h] = tuple(event["token_ids"][i * PAGE:(i + 1) * PAGE])
        else:
            for h in event["block_hashes"]:
                if h not in held:
                    self.errors.append(f"{h:#x} removed from {event['medium']} where it was not")
                held.discard(h)

    def cached_pages(self, namespace, tokens):
        """Whole pages of tokens' longest prefix held on any tier (what a router scores)."""
        n = 0
        for h in page_hashes(namespace, tokens):
            if not any(h in s for s in self.held.values()):
                break
            n += 1
        return n


def replay(context, endpoint, start):
    """(sequence, payload) of every buffered batch from start on, through the ROUTER replay socket."""
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 10000)
    sock.connect(endpoint)
    try:
        sock.send_multipart([b"", struct.pack(">q", start)])
        out = []
        while True:
            frames = sock.recv_multipart()
            if len(frames) != 3 or frames[0] != b"":
                raise SchemaError(f"a replay answer of {len(frames)} frames")
            seq = struct.unpack(">q", frames[1])[0]
            if seq == END_OF_REPLAY:
                return out
            out.append((seq, frames[2]))
    finally:
        sock.close()


class Subscriber:
    """The live subscriber: a bound SUB socket fed by the daemon's PUB, gaps filled by replay."""

    def __init__(self, context, events_endpoint, replay_endpoint, topic):
        self.context, self.replay_endpoint, self.topic = context, replay_endpoint, topic
        self.sock = context.socket(zmq.SUB)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.SUBSCRIBE, b"")
        self.sock.bind(events_endpoint)
        self.received = {}  # sequence -> payload
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.index = Index()
        self.applied = 0  # batches applied to the index, in sequence order
        self.errors = []
        self.live = self.replayed = 0
        self.thread = threading.Thread(target=self._receive, daemon=True)
        self.thread.start()

    def _receive(self):
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        while not self.stop.is_set():
            if not poller.poll(50):
                continue
            topic, seq, payload = self.sock.recv_multipart()
            if topic != self.topic.encode():
                self.errors.append(f"topic frame {topic!r}")
            with self.lock:
                self.received[struct.unpack(">q", seq)[0]] = payload
                self.live += 1

    def catch_up(self, upto):
        """Applies batches [applied, upto) in order, asking the replay socket for any that did not arrive."""
        with self.lock:
            missing = [s for s in range(self.applied, upto) if s not in self.received]
        if missing:
            for seq, payload in replay(self.context, self.replay_endpoint, missing[0]):
                with self.lock:
                    if seq not in self.received:
                        self.received[seq] = payload
                        self.replayed += 1
        while self.applied < upto:
            with self.lock:
                payload = self.received.get(self.applied)
            if payload is None:
                raise SchemaError(f"batch {self.applied} is neither received nor replayable")
            for e in decode_batch(payload)[1]:
                self.index.apply(e)
            self.applied += 1

    def close(self):
        self.stop.set()
        self.thread.join()
        self.sock.close()


class Daemon:
    def __init__(self, port):
        self.port = port

    def call(self, method, path, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            conn.request(method, path, body=json.dumps(body) if body is not None else None,
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                raise RuntimeError(f"{method} {path} answered {resp.status}: {data[:200]!r}")
            return data
        finally:
            conn.close()

    def generate(self, tokens, namespace, max_tokens):
        body = {"tokens": tokens, "max_tokens": max_tokens, "temperature": 0, "stream": False, "add_bos": False,
                "cache_namespace": namespace}
        return json.loads(self.call("POST", "/generate", body))

    def metrics(self):
        out = {}
        for line in self.call("GET", "/metrics").decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def pages(self):
        listing = json.loads(self.call("GET", "/cache/pages"))
        return {"GPU": listing["device"], "CPU": listing["host"]}


def sync(daemon, sub):
    """Once the daemon is idle: every batch it has sent is applied. Returns its page listing."""
    listing = daemon.pages()  # runs on the engine thread, after everything before it
    deadline = time.time() + 20
    while True:
        sent = int(daemon.metrics()["kvtrie_kv_events_batches_total"])
        sub.catch_up(sent)
        time.sleep(0.1)  # ten batch intervals: nothing left in the publisher's queue
        if int(daemon.metrics()["kvtrie_kv_events_batches_total"]) == sent:
            return listing
        if time.time() > deadline:
            raise RuntimeError("the daemon kept publishing while idle")


def compare(index, listing, what, failures):
    for medium in ("GPU", "CPU"):
        listed = listing[medium]
        if len(set(listed)) != len(listed):
            failures.append(f"{what}: /cache/pages lists a {medium} page twice")
        if set(listed) != index.held[medium]:
            failures.append(f"{what}: {medium}: the events give {len(index.held[medium])} pages, /cache/pages "
                            f"{len(set(listed))} ({len(index.held[medium] - set(listed))} only in the events, "
                            f"{len(set(listed) - index.held[medium])} only in the listing)")


def random_tokens(rng, n):
    return [rng.randrange(3, 300) for _ in range(n)]


def traffic(daemon, rng, conversations, clients, failures):
    """Multi-turn conversations on shared system prompts, in two namespaces, with branches and a flush."""
    systems = [random_tokens(rng, rng.randint(40, 72)) for _ in range(3)]
    plans = []
    for c in range(conversations):
        plans.append({"ns": "" if c % 3 else "tenant-b", "system": rng.choice(systems), "turns": rng.randint(2, 4),
                      "seed": rng.randrange(1 << 30)})
    lock = threading.Lock()
    todo = list(plans)
    flush_after = conversations // 2
    done = [0]

    def run(plan):
        crng = random.Random(plan["seed"])
        history, boundaries = list(plan["system"]), []
        for _ in range(plan["turns"]):
            boundaries.append(len(history))
            history += random_tokens(crng, crng.randint(6, 30))
            history += daemon.generate(history, plan["ns"], crng.randint(2, 8))["tokens"]
        # A branch: the conversation again from an earlier turn, with another user message.
        branch = history[:crng.choice(boundaries)] + random_tokens(crng, crng.randint(4, 20))
        daemon.generate(branch, plan["ns"], 4)

    def client():
        while True:
            with lock:
                if not todo:
                    return
                plan = todo.pop()
            try:
                run(plan)
            except Exception as e:  # noqa: BLE001 - every failure is reported
                with lock:
                    failures.append(f"traffic: {e}")
            with lock:
                done[0] += 1
                flush = done[0] == flush_after
            if flush:
                daemon.call("POST", "/cache/flush")

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return systems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--events", required=True, help="endpoint the SUB socket binds (the daemon's --kv-events)")
    ap.add_argument("--replay", required=True, help="the daemon's --kv-events-replay")
    ap.add_argument("--topic", default="")
    ap.add_argument("--conversations", type=int, default=10)
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--seed", type=int, default=10)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    daemon = Daemon(args.port)
    context = zmq.Context()
    sub = Subscriber(context, args.events, args.replay, args.topic)
    failures = []
    started = time.time()
    try:
        # 1. Traffic, then the rebuilt index against the listing.
        systems = traffic(daemon, rng, args.conversations, args.clients, failures)
        listing = sync(daemon, sub)
        compare(sub.index, listing, "after the traffic", failures)
        m = daemon.metrics()
        for name in ("kvtrie_cache_demotions_total", "kvtrie_cache_evictions_total"):
            if m.get(name, 0) == 0:
                failures.append(f"the traffic never exercised {name}")
        if m.get("kvtrie_kv_events_dropped_total", -1) != 0:
            failures.append(f"dropped events: {m.get('kvtrie_kv_events_dropped_total')}")

        # 2. The router's longest prefix against the daemon's cached_tokens, for new prompts.
        probes = []
        for _ in range(6):
            probes.append(("", rng.choice(systems) + random_tokens(rng, rng.randint(1, 40))))
        probes.append(("tenant-b", rng.choice(systems) + random_tokens(rng, 20)))
        probes.append(("", random_tokens(rng, 50)))
        probes.append(("", probes[0][1][:PAGE * 3]))  # exactly three pages: at most two are reused
        probes.append(("", probes[1][1] + random_tokens(rng, 24)))  # a prompt extending one just cached
        for namespace, tokens in probes:
            sync(daemon, sub)
            expected = min(sub.index.cached_pages(namespace, tokens), (len(tokens) - 1) // PAGE)
            cached = daemon.generate(tokens, namespace, 1)["cached_tokens"]
            if cached // PAGE != expected:
                failures.append(f"a {len(tokens)}-token prompt in namespace {namespace!r}: the index holds "
                                f"{expected} whole pages of it, the daemon reused {cached} tokens")
        compare(sub.index, sync(daemon, sub), "after the probes", failures)

        # 3. The same tokens in two namespaces: disjoint hashes, each the chain of its namespace.
        same = random_tokens(rng, 3 * PAGE + 5)
        for namespace in ("ns-x", "ns-y"):
            daemon.generate(same, namespace, 1)
        sync(daemon, sub)
        x, y = page_hashes("ns-x", same), page_hashes("ns-y", same)
        if set(x) & set(y):
            failures.append("two namespaces share a page hash")
        held = sub.index.held["GPU"] | sub.index.held["CPU"]
        for namespace, hashes in (("ns-x", x), ("ns-y", y)):
            if not set(hashes) <= held:
                failures.append(f"namespace {namespace}: the events do not hold cache/page_hash.h's hashes")
            for i, h in enumerate(hashes):
                if sub.index.stored_tokens.get(h) != tuple(same[i * PAGE:(i + 1) * PAGE]):
                    failures.append(f"namespace {namespace}: page {i} was published with other tokens")

        # 4. A subscriber that starts now: the replay socket alone rebuilds the same index.
        late = Index()
        batches = replay(context, args.replay, 0)
        if not batches or batches[0][0] != 0 or [s for s, _ in batches] != list(range(len(batches))):
            failures.append("the replay does not start at 0 or skips batches")
        for _, payload in batches:
            for e in decode_batch(payload)[1]:
                late.apply(e)
        if late.held != sub.index.held:
            failures.append("the index replayed from 0 differs from the live subscriber's")
        compare(late, daemon.pages(), "replayed", failures)
        if late.counts["AllBlocksCleared"] == 0:
            failures.append("no AllBlocksCleared (the publisher's first batch) was replayed")

        failures += sub.errors + sub.index.errors + late.errors
        print(f"kv events: {sub.applied} batches ({sub.live} live, {sub.replayed} replayed), "
              f"{sub.index.counts}, {len(sub.index.held['GPU'])} GPU + {len(sub.index.held['CPU'])} CPU pages "
              f"held, demotions {m.get('kvtrie_cache_demotions_total')}, evictions "
              f"{m.get('kvtrie_cache_evictions_total')}, {time.time() - started:.1f} s")
    except (SchemaError, RuntimeError, OSError, zmq.ZMQError) as e:
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        sub.close()
        context.term()
    for f in failures[:40]:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
