"""A fleet: two thinkwire replicas (real mitmdump processes) sharing a key behind a real HAProxy,
configured by the shipped deploy/haproxy/haproxy.cfg itself (its addresses from the environment).

One conversation per surface (Claude Code's loop over Messages, Codex's over Responses, a chat
client that keeps reasoning_content) runs through the load balancer against strict upstreams
that refuse reasoning objects they did not issue, so a turn completes only if the replica that
serves it restores what the other one made. The tests share the processes and go on with the
same conversations: turns alternate between the replicas; one replica is killed with a stream in
flight and the next turns go on; then the key is rotated, replica by replica, mid-conversation.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

import anthropic
import httpx
import openai
import pytest

from conftest import make_ctx
from harness import Proxy, StrictAnthropic, StrictChat, StrictResponses, Turn, Upstream, sse, sse_reply
from support.events import encode_events, model_objs
from support import drive
from support.fleet import HAPROXY, MISSING, Balancer
from support.loops import ChatConversation, MessagesConversation, ResponsesConversation
from thinkwire import keys
from thinkwire.endpoints import METRICS
from thinkwire.marks import Sealer, client_binding
from thinkwire.surfaces import chat

pytestmark = pytest.mark.e2e

SURFACES = ("messages", "responses", "chat")
STEPS = 12   # tool turns in each conversation's script (the tests use 8 of them)


def steps() -> list[tuple[str, str]]:
    """(reasoning, answer) of each turn: distinct per turn, so a turn restored from the wrong
    mark would not read as the model wrote it."""
    return [(f"Step {k}: check ünïcode ✓ and the plan.", f"Doing step {k}.") for k in range(1, STEPS + 1)]


def script() -> list[Turn]:
    return [Turn(f"<think>{r}</think>{a}", ("bash", {"cmd": f"step {k}"})) for k, (r, a) in enumerate(steps(), 1)] + \
        [Turn("<think>done</think>All steps are done.")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slow_chunk(delta: dict) -> dict:
    return {"id": "slow", "object": "chat.completion.chunk", "created": 1, "model": "slow",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


# A stream that takes ~4 s: long enough to be killed in flight.
SLOW = sse(slow_chunk({"role": "assistant", "content": "<think>"}),
           *[slow_chunk({"content": f"thought {k} "}) for k in range(40)],
           slow_chunk({"content": "</think>answer"}), "[DONE]")


@dataclass
class Fleet:
    up: Upstream
    secrets: dict              # key name -> path of the file holding it (a mounted Secret)
    ports: dict                # replica name (HAProxy's server name) -> its port
    confdir: object
    replicas: dict = field(default_factory=dict)   # name -> running Proxy
    haproxy: Balancer | None = None
    lb: str = ""
    convs: dict = field(default_factory=dict)
    stricts: dict = field(default_factory=dict)
    done: dict = field(default_factory=lambda: dict.fromkeys(SURFACES, 0))   # turns each conversation took

    def start(self, name: str, current: str, previous: str) -> None:
        """A replica as a fleet runs one: the key from a file, the other key still opening, the
        fleet's key id; lazy upstream connections (deploy/); on its own port, as HAProxy knows it."""
        options = {"think_key_file": self.secrets[current], "think_key_previous_files": self.secrets[previous],
                   "think_key_id": keys.key_id(KEYS[current].encode()), "think_chat_restore": "inline",
                   "connection_strategy": "lazy"}
        self.replicas[name] = Proxy(self.up.url, self.confdir, options, port=self.ports[name])

    def status(self) -> dict:
        return self.haproxy.status()

    def wait(self, name: str, status: str, timeout: float = 20) -> None:
        self.haproxy.wait(name, status, timeout)

    def flows(self) -> dict:
        """Each live replica's flows so far, per surface (from its own metrics endpoint)."""
        out = {}
        for name, p in self.replicas.items():
            if not p.alive():
                continue
            text = httpx.get(p.url + METRICS, timeout=5).text
            out[name] = {s: sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                                if line.startswith("thinkwire_flows_total{") and f'surface="{s}"' in line)
                         for s in SURFACES}
        return out

    def turn(self) -> dict:
        """One turn of every conversation through the load balancer; each client must read the
        turn exactly as the model wrote it, and the strict upstream must accept the history.
        Returns, per surface, the replicas whose flow count rose: the one that served the turn."""
        served = {}
        for s in SURFACES:
            before = self.flows()
            k = self.done[s]
            reasoning, answer = steps()[k]
            got = self.convs[s].turn(self.lb)
            self.done[s] += 1
            assert self.stricts[s].errors == []
            if s == "messages":
                assert [(b.type, getattr(b, "thinking", None) or getattr(b, "text", None)) for b in got.content[:2]] == \
                    [("thinking", reasoning), ("text", answer)]
            elif s == "responses":
                r, m = got.output[0].to_dict(), got.output[1].to_dict()
                assert (r["summary"][0]["text"], m["content"][0]["text"]) == (reasoning, answer)
            else:
                assert got == (reasoning, answer)
            after = self.flows()
            served[s] = [n for n in after if after[n][s] > before.get(n, {}).get(s, 0)]
        return served

    def marks(self) -> list[str]:
        """Every mark the clients hold: thinking signatures and encrypted_content."""
        out = [b["signature"] for m in self.convs["messages"].msgs if m["role"] == "assistant"
               for b in m["content"] if b.get("type") == "thinking"]
        return out + [it["encrypted_content"] for it in self.convs["responses"].items if it.get("type") == "reasoning"]


KEYS = {"k1": keys.new_key(), "k2": keys.new_key()}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    if HAPROXY is None:
        pytest.skip(MISSING)
    tmp = tmp_path_factory.mktemp("fleet")
    secrets = {}
    for name, key in KEYS.items():
        (tmp / name).write_text(key + "\n")
        secrets[name] = str(tmp / name)
    up = Upstream()
    f = Fleet(up, secrets, {"replica1": free_port(), "replica2": free_port()}, tmp)
    f.stricts = {"messages": StrictAnthropic(script()), "responses": StrictResponses(script()),
                 "chat": StrictChat(script())}
    f.convs = {"messages": MessagesConversation(display=None), "responses": ResponsesConversation(),
               "chat": ChatConversation()}
    up.route("/messages", f.stricts["messages"].handle)
    up.route("/responses", f.stricts["responses"].handle)
    up.route("/chat/completions", lambda seen: sse_reply(SLOW, delay=0.1) if seen.json().get("model") == "slow"
             else f.stricts["chat"].handle(seen))
    try:
        # The fleet before a rotation: k1 seals; k2, the next key, is already staged to open.
        for name in f.ports:
            f.start(name, "k1", "k2")
        f.haproxy = Balancer(f.ports, free_port(), free_port())
        f.lb = f.haproxy.url
        yield f
    finally:
        if f.haproxy is not None:
            f.haproxy.stop()
        for p in f.replicas.values():
            p.stop()
        up.close()


def test_clients_of_the_load_balancer_cannot_read_the_replicas_endpoints(fleet):
    """Finding 7 of issue 33: HAProxy passed the metrics (traffic counts, the key id) to every
    client. Its frontend now refuses the endpoints' path; its own health checks, which ask each
    replica directly, keep the replicas up."""
    for path in (METRICS, "/.well-known/thinkwire/health", "/.well-known/thinkwire/x"):
        got = httpx.get(fleet.lb + path, timeout=5)
        assert got.status_code == 404 and "thinkwire" not in got.text
    assert all(httpx.get(p.url + METRICS, timeout=5).status_code == 200 for p in fleet.replicas.values())
    assert fleet.status() == {"replica1": "UP", "replica2": "UP", "BACKEND": "UP"}


def test_turns_alternate_between_replicas_and_each_restores_what_the_other_made(fleet):
    served = [fleet.turn() for _ in range(2)]
    # Round robin: each surface's two turns went one to each replica, and the second restored
    # (strict upstream: accepted) the marks the first one sealed.
    for s in SURFACES:
        assert sorted(n for turn in served for n in turn[s]) == ["replica1", "replica2"]


def test_a_replica_killed_with_a_stream_in_flight_cuts_it_and_the_fleet_goes_on(fleet):
    expected, _ = drive(chat, make_ctx({"model": "slow", "stream": True}, chat_restore="inline"), b"".join(SLOW))
    received, error, victim = b"", None, None
    try:
        with httpx.stream("POST", fleet.lb + "/v1/chat/completions", json={"model": "slow", "stream": True},
                          timeout=20) as r:
            for piece in r.iter_raw():
                received += piece
                if victim is None and received.count(b"\n\n") >= 4:
                    open_now = {n: p for n, p in fleet.replicas.items() if 'thinkwire_open_streams{surface="chat"} 1.0'
                                in httpx.get(p.url + METRICS, timeout=5).text}
                    assert len(open_now) == 1
                    victim, proc = next(iter(open_now.items()))
                    proc.proc.kill()   # SIGKILL: no goodbye
                    proc.proc.wait()
    except httpx.RemoteProtocolError as e:
        error = str(e)
    # The client sees a cut connection, never a stream that looks complete, and every byte it got
    # is the rewritten stream's own, in order.
    assert error == "peer closed connection without sending complete message body (incomplete chunked read)"
    assert expected.startswith(received) and received.count(b"\n\n") >= 4 and len(received) < len(expected)
    assert b'"reasoning_content":"thought 0"' in received   # rewritten, not passed through
    # Right away, before any health check: the next turns go to the survivor, which opens the
    # marks the dead replica sealed; HAProxy has taken the dead one out.
    survivor = next(n for n in fleet.replicas if n != victim)
    for _ in range(2):
        assert fleet.turn() == dict.fromkeys(SURFACES, [survivor])
    fleet.wait(victim, "DOWN", timeout=5)
    assert fleet.status()[survivor] == "UP"


def test_a_key_rotation_mid_conversation_replica_by_replica(fleet):
    # Replica by replica (a dead one first): k2 seals, k1 still opens. In between the fleet is
    # mixed: one replica seals with k1, the other with k2, and each opens the other's marks.
    order = sorted(fleet.replicas, key=lambda n: fleet.replicas[n].alive())
    for name in order:
        fleet.replicas[name].stop()
        fleet.start(name, "k2", "k1")
        fleet.wait(name, "UP")
        served = [fleet.turn() for _ in range(2)]
        for s in SURFACES:
            assert sorted(n for turn in served for n in turn[s]) == ["replica1", "replica2"]
    # The conversations hold marks sealed under both keys, and their last turns restored them all.
    # (Marks are bound to the credential the conversations' SDK clients send: api_key="x".)
    sdk = client_binding({"authorization": "Bearer x"})
    sealed = {m: [k for k in KEYS if Sealer(KEYS[k].encode()).open(m, sdk) is not None] for m in fleet.marks()}
    assert all(len(ks) == 1 for ks in sealed.values())
    assert {ks[0] for ks in sealed.values()} == {"k1", "k2"}
    assert len(sealed) == fleet.done["messages"] + fleet.done["responses"]   # one mark per turn each
    for s in SURFACES:
        assert fleet.stricts[s].errors == []
    health = {n: httpx.get(p.url + "/.well-known/thinkwire/health", timeout=5).json()["key_id"]
              for n, p in fleet.replicas.items()}
    assert health == dict.fromkeys(fleet.replicas, keys.key_id(KEYS["k2"].encode()))


def test_what_the_sdks_raise_when_a_stream_is_cut(proxy, up):
    """What docs/operations.md, "When a replica dies mid-stream", says a client sees, with the pinned SDKs: the
    text that came, then an exception (the cut comes from the upstream here: to the client a
    connection that closes without the stream's end is the same, whoever closed it)."""
    cut = "peer closed connection without sending complete message body (incomplete chunked read)"
    events = encode_events("chat", model_objs("chat", ["<think>a", "</think>b", "c"]))
    up.route("/chat/completions", sse_reply(events, close_after=len(events) - 2))   # the end never comes
    reasoning, content = "", ""
    with pytest.raises(openai.APIConnectionError, match="^Connection error.$") as e:
        for ch in openai.OpenAI(base_url=proxy.url + "/v1", api_key="x", max_retries=0).chat.completions.create(
                model="m", messages=[], stream=True):
            for c in ch.choices:
                reasoning += getattr(c.delta, "reasoning_content", None) or ""
                content += c.delta.content or ""
    assert str(e.value.__cause__) == cut and (reasoning, content) == ("a", "bc")
    events = encode_events("messages", model_objs("messages", ["<think>a", "</think>b", "c"]))
    up.route("/messages", sse_reply(events, close_after=len(events) - 2))
    client = anthropic.Anthropic(base_url=proxy.url, api_key="x", max_retries=0)
    texts = []
    with pytest.raises(Exception) as e:
        with client.messages.stream(model="m", max_tokens=9, messages=[{"role": "user", "content": "q"}]) as s:
            for ev in s:
                if ev.type == "content_block_delta" and ev.delta.type in ("thinking_delta", "text_delta"):
                    texts.append(getattr(ev.delta, "thinking", None) or ev.delta.text)
    # anthropic 2.17 (pinned) raises its APIConnectionError, naming the address, from httpx's
    # RemoteProtocolError.
    where = proxy.url.removeprefix("http://")
    assert (type(e.value).__name__, str(e.value), str(e.value.__cause__)) == (
        "APIConnectionError", f"Connection to {where} failed: {cut}", cut) and texts == ["a", "b", "c"]
