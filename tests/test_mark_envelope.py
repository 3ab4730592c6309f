"""Marks are bound to the client's credential and an issue time, and read only when they are
strict base64url of a bounded size (issue 33, finding 9; docs/marks-and-keys.md)."""

from __future__ import annotations

import base64
import json

import pytest

from conftest import make_ctx
from harness import json_reply, post
from thinkwire import marks
from thinkwire.marks import MAX_MARK_CHARS, PREFIX, Sealer, client_binding
from thinkwire.rules import TagPair
from thinkwire.settings import OPTIONS, SettingError, Settings
from thinkwire.surfaces import messages

PAIR = TagPair("<think>", "</think>")
KEY = b"mark envelope test key, 32 bytes or more"
ALICE = client_binding({"authorization": "Bearer alice-key"})
BOB = client_binding({"authorization": "Bearer bob-key"})
DAY = 86400


class Clock:
    def __init__(self, now: float = 1_800_000_000) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def request_with(block: dict) -> dict:
    return {"model": "m", "max_tokens": 9, "messages": [
        {"role": "user", "content": "q"}, {"role": "assistant", "content": [block, {"type": "text", "text": "a"}]},
        {"role": "user", "content": "go on"}]}


def restore(req: dict, sealer, client: bytes, **opts):
    data = json.dumps(req).encode()
    ctx = make_ctx(json.loads(data), sealer, **opts)
    ctx.sealer = marks.Bound(sealer, client, ctx.settings.mark_max_age)
    return messages.restore_request(data, ctx), ctx


# -- the credential ----------------------------------------------------------------------------
def test_the_binding_is_a_hash_of_authorization_else_x_api_key_else_api_key_else_nothing():
    assert client_binding({"authorization": "Bearer a", "x-api-key": "b"}) == client_binding({"authorization": "Bearer a"})
    assert client_binding({"x-api-key": "b"}) not in (b"", client_binding({"x-api-key": "c"}))
    # Azure OpenAI's api-key header tells clients apart too (as it does for what is kept per client)
    assert client_binding({"api-key": "b"}) not in (b"", client_binding({"api-key": "c"}))
    assert client_binding({}) == b"" and client_binding({"authorization": ""}) == b""
    assert b"alice-key" not in ALICE and len(ALICE) == 32


def test_a_mark_opens_only_for_the_credential_it_was_sealed_for():
    s = Sealer(KEY)
    mark = s.seal("alice's plan", PAIR, client=ALICE)
    assert s.open(mark, ALICE).text == "alice's plan"
    assert s.open(mark, BOB) is None and s.open(mark, b"") is None
    anonymous = s.seal("no credential", PAIR)
    assert s.open(anonymous).text == "no credential" and s.open(anonymous, ALICE) is None


def test_another_clients_block_is_refused_and_passes_as_the_client_sent_it():
    s = Sealer(KEY)
    block = {"type": "redacted_thinking", "data": s.seal("alice's private plan", PAIR, client=ALICE)}
    new, ctx = restore(request_with(block), s, BOB)
    assert new is None and (ctx.stats.restored, ctx.stats.refused) == (0, 1)
    new, ctx = restore(request_with(block), s, ALICE)
    assert json.loads(new)["messages"][1]["content"][0] == {"type": "text", "text": "<think>alice's private plan</think>a"}
    assert (ctx.stats.restored, ctx.stats.refused) == (1, 0)


# -- the age -----------------------------------------------------------------------------------
def test_a_mark_older_than_the_maximum_age_is_refused():
    clock = Clock()
    s = Sealer(KEY, clock=clock)
    mark = s.seal("yesterday's plan", PAIR, client=ALICE)
    clock.now += DAY
    assert s.open(mark, ALICE, max_age=DAY).text == "yesterday's plan"
    clock.now += 1
    assert s.open(mark, ALICE, max_age=DAY) is None
    assert s.open(mark, ALICE, max_age=0).text == "yesterday's plan"     # 0: no maximum


def test_a_mark_from_the_future_beyond_clock_skew_is_refused():
    clock = Clock()
    ahead = Sealer(KEY, clock=Clock(clock.now + marks.SKEW + 1))
    assert Sealer(KEY, clock=clock).open(ahead.seal("x", PAIR)) is None
    near = Sealer(KEY, clock=Clock(clock.now + marks.SKEW)).seal("x", PAIR)
    assert Sealer(KEY, clock=clock).open(near).text == "x"


def test_the_issue_time_cannot_be_changed_without_breaking_the_mark():
    clock = Clock()
    s = Sealer(KEY, clock=clock)
    mark = s.seal("x", PAIR)
    raw = base64.urlsafe_b64decode(mark[len(PREFIX):] + "=" * (-len(mark) % 4))
    younger = (int.from_bytes(raw[:8], "big") + 1000).to_bytes(8, "big") + raw[8:]
    forged = PREFIX + base64.urlsafe_b64encode(younger).rstrip(b"=").decode()
    clock.now += 1000
    assert s.open(forged) is None and s.open(mark).text == "x"


@pytest.mark.parametrize("value,seconds", [("30d", 30 * DAY), ("12h", 43200), ("90m", 5400), ("600s", 600),
                                           ("600", 600), (" 0 ", 0)])
def test_the_maximum_age_option_reads_units(value, seconds):
    assert Settings.from_values({"think_mark_max_age": value}).mark_max_age == seconds


@pytest.mark.parametrize("value", ["", "-1", "1w", "1.5h", "d", "30 d"])
def test_a_maximum_age_that_cannot_be_one_is_refused(value):
    with pytest.raises(SettingError) as e:
        Settings.from_values({"think_mark_max_age": value})
    assert str(e.value) == (f"think_mark_max_age (env THINK_MARK_MAX_AGE) is {value!r}; use a whole number of "
                            "seconds, or with a unit: 30d, 12h, 90m, 600s (0: no maximum)")


def test_the_maximum_age_is_30_days_unless_set_and_comes_from_the_environment(monkeypatch):
    opt = next(o for o in OPTIONS if o.name == "think_mark_max_age")
    assert (opt.env, opt.default) == ("THINK_MARK_MAX_AGE", "30d")
    assert Settings.from_values({}).mark_max_age == 30 * DAY
    monkeypatch.setenv("THINK_MARK_MAX_AGE", "2h")
    assert Settings.from_values({}).mark_max_age == 7200


def test_a_flows_context_opens_with_the_settings_maximum_age():
    clock = Clock()
    s = Sealer(KEY, clock=clock)
    mark = s.seal("x", PAIR)
    clock.now += 3 * 3600
    ctx = make_ctx({"model": "m"}, s, think_mark_max_age="2h")
    assert ctx.open_mark(mark) is None and ctx.stats.refused == 1
    assert make_ctx({"model": "m"}, s, think_mark_max_age="4h").open_mark(mark) == ("x", PAIR)


# -- the envelope: strict base64url, bounded, read before any key is tried ------------------------
class CountingSealer(Sealer):
    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.decrypts = 0

    def _decrypt(self, raw, aad):
        self.decrypts += 1
        return super()._decrypt(raw, aad)


def test_a_64_mib_mark_is_refused_before_it_is_decoded_or_tried_under_a_key(monkeypatch):
    s = CountingSealer(KEY, previous=[b"an older key, 32 bytes or more...", b"the next key, 32 bytes or more..."])
    decoded = []
    real = base64.urlsafe_b64decode
    monkeypatch.setattr(base64, "urlsafe_b64decode", lambda data: (decoded.append(len(data)), real(data))[1])
    huge = PREFIX + "A" * (64 << 20)
    ctx = make_ctx({"model": "m"}, s)
    assert ctx.open_mark(huge) is None and ctx.stats.refused == 1
    assert decoded == [] and s.decrypts == 0
    at_the_limit = s.seal("x" * 10, PAIR)
    assert s.open(at_the_limit).text == "x" * 10 and s.decrypts == 1


def test_the_size_limit_is_4_mib_of_mark_text():
    assert MAX_MARK_CHARS == 4 << 20
    s = CountingSealer(KEY)
    assert s.open(PREFIX + "A" * (MAX_MARK_CHARS + 1)) is None and s.decrypts == 0
    assert s.open(PREFIX + "A" * MAX_MARK_CHARS) is None and s.decrypts == 1   # read, and not ours


def test_marks_that_are_not_strict_base64url_are_refused_without_trying_a_key():
    s = CountingSealer(KEY)
    mark = s.seal("the reasoning", PAIR)
    body = mark[len(PREFIX):]
    padded = mark + "=" * (-len(body) % 4)
    standard = PREFIX + body.replace("-", "+").replace("_", "/")
    spaced = mark[:20] + " " + mark[20:]
    variants = [padded if padded != mark else mark + "==", spaced, mark + "\n", PREFIX + body[:-1] + "!"]
    if standard != mark:
        variants.append(standard)
    if len(body) % 4:
        # The last character's spare bits set: it decodes to the same bytes, but seal never writes it.
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        spare = {2: 0b1111, 3: 0b11}[len(body) % 4]
        variants.append(PREFIX + body[:-1] + alphabet[alphabet.index(body[-1]) | spare])
    for v in variants:
        assert s.open(v) is None, v
    assert s.decrypts == 0
    assert s.open(mark).text == "the reasoning" and s.decrypts == 1


def test_format_1_marks_are_refused_and_counted():
    """Format 1 (`tw1.`, bound to nothing) marks are not opened: they pass as the client sent them."""
    s = Sealer(KEY)
    old = "tw1." + base64.urlsafe_b64encode(b"\0" * 60).rstrip(b"=").decode()
    ctx = make_ctx({"model": "m"}, s)
    assert ctx.open_mark(old) is None and ctx.stats.refused == 1
    new, ctx = restore(request_with({"type": "thinking", "thinking": "", "signature": old}), s, b"")
    assert new is None and ctx.stats.refused == 1


# -- through mitmdump ---------------------------------------------------------------------------------
@pytest.mark.e2e
def test_one_users_block_pasted_by_another_reaches_the_upstream_as_sent(proxy_factory, up):
    """Finding 9: marks were bearer tokens: Bob, pasting Alice's redacted_thinking block, got it
    restored with Alice's reasoning. Now it goes upstream as Bob sent it, counted as refused."""
    p = proxy_factory(options={"think_signature": "redacted"}, env={"THINK_SIGNING_KEY": KEY.decode()})
    up.route("/v1/messages", json_reply({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "<think>alice's private plan</think>answer"}],
        "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}))
    ask = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "q"}]}
    first = post(p.url + "/v1/messages", ask, headers={"authorization": "Bearer alice-key"}).json()
    block = first["content"][0]
    assert block["type"] == "redacted_thinking" and "alice" not in block["data"]
    turn = request_with(block)
    up.requests.clear()
    bob = json.dumps(turn).encode()
    assert post(p.url + "/v1/messages", raw=bob, headers={"authorization": "Bearer bob-key"}).status == 200
    assert up.requests[-1].body == bob
    post(p.url + "/v1/messages", raw=bob, headers={"authorization": "Bearer alice-key"})
    assert json.loads(up.requests[-1].body)["messages"][1]["content"][0] == {
        "type": "text", "text": "<think>alice's private plan</think>a"}
    metrics = post(p.url + "/.well-known/thinkwire/metrics", method="GET").content.decode()
    assert 'thinkwire_marks_refused_total{surface="messages"} 1.0' in metrics
    assert 'thinkwire_restored_objects_total{surface="messages"} 1.0' in metrics
