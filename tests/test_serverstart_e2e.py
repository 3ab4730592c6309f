"""Where the output starts, asked of the server itself, through a real mitmdump: scripted
llama-server, vLLM, SGLang, LM Studio and Ollama servers render the models' real chat templates
(support.templates) under served names no profile matches, and the first stream of each comes
out right, body and stream alike, on every endpoint each kind serves.

SGLang and LM Studio tell only who the model is (SGLang's /get_model_info model_path, LM
Studio's instance -> key), so there the real model's profile decides, with the request's
switches. Left out, and why: LM Studio with chat_template_kwargs and with a prefill (what it
does with either is not documented); SGLang's Messages prefill (its Anthropic adapter's handling
of a trailing assistant turn is not documented); and see KNOWN_WRONG."""

from __future__ import annotations

import json
import threading

import pytest

from harness import Reply, Upstream, json_reply, post
from support import templates as t

pytestmark = pytest.mark.e2e

PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages", "responses": "/v1/responses",
         "ollama": "/api/chat"}
KINDS = {"llama-server": ("chat", "messages", "responses"), "vllm": ("chat", "messages", "responses"),
         "sglang": ("chat", "messages", "responses"), "lmstudio": ("chat", "messages", "responses"),
         "ollama": ("ollama",)}
VARIANTS = ("default", "enable_thinking_false", "no_think", "prefill")
LEFT_OUT = {("ollama", "enable_thinking_false"),   # (Ollama's `think` has its own tests)
            ("lmstudio", "enable_thinking_false"), ("lmstudio", "prefill"), ("sglang", "prefill", "messages")}
PREFILL = "Sure,"


def _need(name: str) -> t.TemplateModel:
    tm = t.model(name)
    if tm is None:
        pytest.skip(f"the real chat template {t.MODELS[name][0]}.jinja is not in {t.DIR} "
                    "(scripts/chat-templates brings llama.cpp's)")
    return tm


def request(surface: str, served: str, variant: str, stream: bool) -> dict:
    """A request as a client sends it: a system prompt, a question, the variant's switch."""
    system = "You are terse." + (" /no_think" if variant == "no_think" else "")
    turns = [{"role": "user", "content": "What is 2+2?"}]
    if variant == "prefill":
        turns.append({"role": "assistant", "content": PREFILL})
    if surface == "messages":
        r = {"model": served, "max_tokens": 64, "system": system, "messages": turns}
    elif surface == "responses":
        r = {"model": served, "instructions": system, "input": turns}
    else:
        r = {"model": served, "messages": [{"role": "system", "content": system}, *turns]}
    if variant == "prefill" and surface == "chat":
        r.update(add_generation_prompt=False, continue_final_message=True)
    if variant == "enable_thinking_false":
        r["chat_template_kwargs"] = {"enable_thinking": False}
    r["stream"] = stream
    return r


# Known wrong, and what the user sees instead: llama.cpp's copies of the R1-distill and QwQ
# templates close the block unless `enable_thinking` (the models' own templates, which SGLang and
# LM Studio load, always open it); served by a server that tells only who the model is, the
# profile starts the output inside, so a stream shows the answer first as reasoning, then again as
# the answer (thinkwire.again); the body is right. The same for Nemotron Nano v2's Responses turn
# after an assistant message on SGLang: its template puts that message's text after `<think>\n`,
# which no profile can know (llama-server and vLLM render it, and say).
KNOWN_WRONG = {("r1-distill", "sglang"), ("qwq", "sglang"), ("r1-distill", "lmstudio"), ("qwq", "lmstudio"),
               ("nemotron-nano-v2", "sglang", "responses", "prefill")}


def _known_wrong(name: str, kind: str, surface: str, variant: str) -> bool:
    return (name, kind) in KNOWN_WRONG or (name, kind, surface, variant) in KNOWN_WRONG


def expected(tm: t.TemplateModel, kind: str, surface: str, req: dict, name: str = "",
             variant: str = "") -> tuple[str, str]:
    """What the user should read: the reasoning the model wrote (none, when it wrote none) and
    its answer."""
    written = t._written(tm, req, surface, kind)
    if t.is_prefill(req, surface):
        return "", written
    if _known_wrong(name, kind, surface, variant) and req["stream"]:
        return t.ANSWER, t.ANSWER
    return (t.REASONING if t.REASONING in written else ""), t.ANSWER


@pytest.fixture(scope="module")
def fleet(upstream, proxy_factory):
    upstream.reset()
    f = t.Fleet(upstream)
    proxy = proxy_factory({"think_start_wait": "5"})   # (a loaded machine: the deadline has its own test)
    return f, proxy, upstream


CASES = [(name, kind, surface) for name in t.MODELS for kind, surfaces in KINDS.items() for surface in surfaces]


@pytest.mark.parametrize("name,kind,surface", CASES, ids=[f"{n}-{k}-{s}" for n, k, s in CASES])
def test_the_first_stream_of_an_unknown_name_comes_out_right(fleet, name, kind, surface):
    f, proxy, up = fleet
    tm = _need(name)
    prefix = f"/{name}-{kind}-{surface}"
    served = "local-model"   # no profile matches it
    f.add(prefix, kind, {served: tm})
    failed = []
    for variant in VARIANTS:
        if (kind, variant) in LEFT_OUT or (kind, variant, surface) in LEFT_OUT:
            continue
        for stream in (True, False):
            req = request(surface, served, variant, stream)
            got = post(proxy.url + prefix + PATHS[surface], req)
            assert got.status == 200, got.content[:300]
            texts = t.stream_texts(surface, got.content) if stream else t.body_texts(surface, got.json())
            want = expected(tm, kind, surface, req, name, variant)
            if texts != want:
                failed.append((variant, stream, texts, want))
    assert failed == [], "\n".join(map(repr, failed))


def test_a_conversation_asks_once(fleet):
    f, proxy, up = fleet
    tm = _need("minimax-m2")
    f.add("/once", "llama-server", {"alias": tm})
    before = len(up.requests)
    for n in range(3):
        req = request("chat", "alias", "default", True)
        req["messages"] += [{"role": "assistant", "content": "It is 4."}, {"role": "user", "content": f"And {n}?"}] * n
        got = post(proxy.url + "/once" + PATHS["chat"], req)
        assert t.stream_texts("chat", got.content) == (t.REASONING, t.ANSWER)
    asked = [s.path for s in up.requests[before:] if not s.path.endswith(PATHS["chat"])]
    assert asked == ["/once/props", "/once/apply-template"]
    # What was asked: a user turn of one word, the system prompt's switches only.
    sent = [s for s in up.requests[before:] if s.path.endswith("/apply-template")][0].json()
    assert sent == {"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": True}


def test_the_log_line_says_the_server_template_decided(fleet):
    f, proxy, up = fleet
    tm = _need("r1-distill")
    f.add("/said", "vllm", {"my-model": tm})
    got = post(proxy.url + "/said" + PATHS["chat"], request("chat", "my-model", "default", True))
    assert got.status == 200
    # The vLLM rendering of llama.cpp's R1 template closes the block when enable_thinking is
    # not passed: the output starts in the answer, and the line says who said so.
    proxy.wait_for(r"POST /said/v1/chat/completions: thinkwire chat \[deepseek-r1\]: 0 reasoning block\(s\), 0 chars "
                   r"moved; started in the answer \(the server's chat template\)", timeout=10)


def test_the_real_model_behind_an_alias_picks_the_profile(fleet):
    f, proxy, up = fleet
    tm = _need("gpt-oss")
    f.add("/oss", "llama-server", {"x": tm})
    got = post(proxy.url + "/oss" + PATHS["chat"], request("chat", "x", "default", True))
    assert t.stream_texts("chat", got.content) == (t.REASONING, t.ANSWER)
    proxy.wait_for(r"POST /oss/v1/chat/completions: thinkwire chat \[gpt-oss\]: 1 reasoning block\(s\)", timeout=10)


# -- a server that cannot say in time ------------------------------------------------------------
@pytest.fixture
def own(proxy_factory):
    """An upstream of the test's own (the fleet's keeps its routes)."""
    up = Upstream()
    yield up, lambda options=None: proxy_factory(options, upstream_url=up.url)
    up.close()


def test_a_server_that_hangs_leaves_it_to_the_profile_within_the_deadline(own):
    """/props never answers: the first byte waits think_start_wait, then the name decides; the
    ask goes on in the background (bounded by think_ask_timeout) and is not repeated while its
    failure is kept."""
    upstream, start = own
    gate = threading.Event()
    upstream.route("/props", Reply(200, {"content-type": "application/json"}, [b"{}"], gate=gate, gate_at=0))
    text = f"<think>{t.REASONING}</think>{t.ANSWER}"
    upstream.route(PATHS["chat"], t.completion("chat", text, True, "m"))
    proxy = start({"think_start_wait": "0.2", "think_ask_timeout": "1"})
    try:
        for _ in range(2):
            got = post(proxy.url + PATHS["chat"], request("chat", "deepseek-r1-distill-qwen", "default", True))
            # The profile (deepseek-r1: starts inside) decides; the opening tag the model wrote is dropped.
            assert t.stream_texts("chat", got.content) == (t.REASONING, t.ANSWER)
        proxy.wait_for(r"started inside the reasoning block \(the profile\)", timeout=10)
        assert [s.path for s in upstream.requests].count("/props") == 1
    finally:
        gate.set()


def test_a_redirect_is_not_followed(own):
    upstream, start = own
    upstream.route("/props", Reply(302, {"location": "http://127.0.0.1:9/props"}, [b""], chunked=False))
    upstream.route("/v1/models", Reply(307, {"location": "http://127.0.0.1:9/v1/models"}, [b""], chunked=False))
    upstream.route(PATHS["chat"], t.completion("chat", f"{t.REASONING}</think>{t.ANSWER}", True, "m"))
    proxy = start()
    got = post(proxy.url + PATHS["chat"], request("chat", "local-model", "default", True),
               headers={"authorization": "Bearer sk-mine"})
    assert got.status == 200
    asked = [s for s in upstream.requests if not s.path.endswith(PATHS["chat"])]
    # (/api/v1/models ends as /v1/models does: the same 307 answers it; then /api/v0/models: 404, unrecorded)
    assert [s.path for s in asked] == ["/props", "/v1/models", "/api/v1/models"]
    assert all(s.headers.get("authorization") == "Bearer sk-mine" for s in asked)
    # No profile, no template: the closing tag with text before it still ends the reasoning.
    assert t.stream_texts("chat", got.content)[1].endswith(t.ANSWER)


def test_ollamas_own_template_read_for_the_requests_think(own):
    """An Ollama model under a name no profile matches, whose model_info names DeepSeek-R1 and
    whose template is the library's deepseek-r1 one: `think: false` renders a closed empty
    block, so the answer streams as the answer (read only by the name, the deepseek-r1 profile
    started it inside); unset, the model opens its own block."""
    from pathlib import Path

    from support import ollama as osupport
    upstream, start = own
    gotmpl = (Path(__file__).parent / "support" / "ollama_templates" / "deepseek-r1.gotmpl").read_text()
    upstream.route("/api/show", json_reply({"template": gotmpl, "capabilities": ["completion", "thinking"],
                                            "model_info": {"general.basename": "DeepSeek-R1-Distill-Qwen"},
                                            "details": {"format": "gguf"}}))

    def chat(seen):
        req = seen.json()
        text = t.ANSWER if req.get("think") is False else f"<think>\n{t.REASONING}\n</think>\n\n{t.ANSWER}"
        return osupport.reply(osupport.chat_objs("local-model", t._pieces(text)), req.get("stream", True))
    upstream.route("/api/chat", chat)
    proxy = start({"think_start_wait": "5"})
    for think, want in ((False, ("", t.ANSWER)), ("unset", (t.REASONING, t.ANSWER))):
        for stream in (True, False):
            req = {"model": "local-model", "messages": [{"role": "user", "content": "What is 2+2?"}], "stream": stream}
            if think != "unset":
                req["think"] = think
            got = post(proxy.url + "/api/chat", req)
            texts = t.stream_texts("ollama", got.content) if stream else t.body_texts("ollama", got.json())
            assert texts == want, (think, stream)
    proxy.wait_for(r"started in the answer \(the server's chat template\)", timeout=10)


def test_off_asks_nothing(own):
    upstream, start = own
    upstream.route(PATHS["chat"], json_reply({"choices": [{"index": 0, "message": {"role": "assistant",
                                                                                   "content": "hi"}}]}))
    proxy = start({"think_ask_template": "off"})
    assert post(proxy.url + PATHS["chat"], request("chat", "m", "default", False)).status == 200
    assert upstream.asks == [] and [s.path for s in upstream.requests] == [PATHS["chat"]]
    assert json.loads(upstream.requests[0].body)["model"] == "m"
