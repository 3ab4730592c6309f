"""Reasoning and no answer (docs/behaviour.md): the text a stream sent as reasoning is sent again
as the answer at its end where a body of the same output gives it as the answer (issue 31 item
4: a tagless complete output that started inside; issue 32: `force_nonempty_content`), on every
surface, body and stream, at every chunking (the byte and C paths included)."""

import json

import pytest

from harness import rechunk
from support.responses import check_invariants, sdk_final, shape
from support.runs import BODIES, LENGTH, STOP, STREAMS, chunkings
from thinkwire.again import KEEP_MAX

SURFACES = sorted(BODIES)
# A model whose template opens the block (the deepseek-r1 profile starts inside) answering
# without thinking: no tag at all.
OPENS = {"model": "deepseek-r1-distill-qwen-7b", "messages": [{"role": "user", "content": "hi"}]}
FORCE = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
         "chat_template_kwargs": {"enable_thinking": False, "force_nonempty_content": True}}
ANSWER = "Hello there, this is all I have to say on it, and it ends here."


def words(text):
    return [w + " " for w in text.split(" ")[:-1]] + [text.split(" ")[-1]]


@pytest.mark.parametrize("surface", SURFACES)
def test_a_tagless_complete_output_that_started_inside_is_the_answer_body_and_stream(surface):
    assert BODIES[surface](ANSWER, OPENS, {}) == ((), ANSWER)
    for name, chunks in dict(chunkings(ANSWER, "again"), words=words(ANSWER)).items():
        # The stream sent it as reasoning before it could know: the same text comes again as
        # the answer at the end.
        assert STREAMS[surface](chunks, OPENS, {}) == ((ANSWER,), ANSWER), name


@pytest.mark.parametrize("surface", SURFACES)
def test_a_tagless_output_cut_off_while_thinking_stays_reasoning(surface):
    assert BODIES[surface](ANSWER, OPENS, {}, LENGTH) == ((ANSWER,), "")
    assert STREAMS[surface](words(ANSWER), OPENS, {}, LENGTH) == ((ANSWER,), "")


@pytest.mark.parametrize("surface", SURFACES)
def test_an_output_that_closed_its_block_is_not_sent_again(surface):
    text = "Weighing it.</think>\n\nIt is 4."
    assert BODIES[surface](text, OPENS, {}) == (("Weighing it.",), "It is 4.")
    assert STREAMS[surface](list(text), OPENS, {}) == (("Weighing it.",), "It is 4.")


@pytest.mark.parametrize("surface", SURFACES)
def test_force_nonempty_content_gives_the_reasoning_as_the_answer(surface):
    text = f"<think>\n{ANSWER}\n</think>\n\n"
    # A body moves it (vLLM's parsers do the same); a stream sends it again.
    assert BODIES[surface](text, FORCE, {}) == ((), ANSWER)
    for name, chunks in dict(chunkings(text, "force"), words=words(text)).items():
        assert STREAMS[surface](chunks, FORCE, {}) == ((ANSWER,), ANSWER), name
    # Whatever the output ended with (vLLM: any output without an answer).
    assert BODIES[surface](text, FORCE, {}, LENGTH) == ((), ANSWER)
    assert STREAMS[surface](words(text), FORCE, {}, LENGTH) == ((ANSWER,), ANSWER)


# Several reasoning blocks (an empty one between them): a body gives them as one answer, joined
# with a blank line as chat's reasoning field joins them; a stream's answer again is that text too,
# on Messages and Responses as well, whose blocks went out apart (a thinking block, a reasoning
# item each).
BLOCKS = "<think>\nFirst, add them.\n</think>\n<think></think>\n<think> Then check the sum. </think>\n"
JOINED = "First, add them.\n\nThen check the sum."
SHOWN = {"chat": (JOINED,), "ollama": (JOINED,), "messages": ("First, add them.", "Then check the sum."),
         "responses": ("First, add them.", "Then check the sum.")}


@pytest.mark.parametrize("surface", SURFACES)
def test_force_nonempty_content_joins_several_blocks_with_a_blank_line_body_and_stream(surface):
    for finish in (STOP, LENGTH):
        assert BODIES[surface](BLOCKS, FORCE, {}, finish) == ((), JOINED)
        for name, chunks in dict(chunkings(BLOCKS, "blocks"), words=words(BLOCKS)).items():
            assert STREAMS[surface](chunks, FORCE, {}, finish) == (SHOWN[surface], JOINED), (name, finish)


@pytest.mark.parametrize("surface", SURFACES)
def test_force_nonempty_content_leaves_an_answer_written_before_the_reasoning_alone(surface):
    # (A Messages stream passes a text delta that is all answer as it came, its block unmoved:
    # the answer went out all the same. `alone`: the first delta is the answer.)
    text = "It is 4.<think>Checked it twice.</think>"
    assert BODIES[surface](text, FORCE, {}) == (("Checked it twice.",), "It is 4.")
    alone = ["It is 4.", "<think>Checked it twice.</think>"]
    for name, chunks in dict(chunkings(text, "answer first"), words=words(text), alone=alone).items():
        assert STREAMS[surface](chunks, FORCE, {}) == (("Checked it twice.",), "It is 4."), name


@pytest.mark.parametrize("surface", SURFACES)
def test_force_nonempty_content_leaves_an_output_with_an_answer_alone(surface):
    text = "<think>Weighing it.</think>It is 4."
    assert BODIES[surface](text, FORCE, {}) == STREAMS[surface](list(text), FORCE, {}) == (("Weighing it.",),
                                                                                          "It is 4.")
    plain = dict(FORCE, chat_template_kwargs={"enable_thinking": False})
    assert BODIES[surface]("<think>x</think>", plain, {}) == STREAMS[surface](["<think>x</think>"], plain, {}) == (
        ("x",), "")


@pytest.mark.parametrize("surface", SURFACES)
def test_a_prefill_that_opened_the_block_is_not_sent_again(surface):
    # The client's own prefill opened the block (Messages; chat with continue_final_message):
    # what the model writes after it is reasoning, as the client asked.
    if surface not in ("messages", "chat"):
        pytest.skip("a prefill is a Messages or chat request")
    req = {"model": "m", "continue_final_message": True,
           "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "<think>"}]}
    assert BODIES[surface](ANSWER, req, {}) == STREAMS[surface](words(ANSWER), req, {}) == ((ANSWER,), "")


# -- the way back (issue 32): the turn sent back as the client got it reaches the upstream as the
# model wrote it, not as the guess (the text twice) nor the answer without its tags ------------
def way_back(surface, text, request, mode, chunks=None, finish=STOP, answer=None, seen=None):
    """What the upstream reads of the assistant turn when the client sends it back as it got it
    (tests/test_designed_way_back.py's echo; `answer`: the client's answer, changed; `seen`: a
    list to put the answer the client got in)."""
    from test_designed_way_back import USER, _ctx, _echo, _restore
    from thinkwire import written
    request = dict(request, input=[USER]) if surface == "responses" else dict(request, messages=[USER])
    mem = written.Memory()
    ctx = _ctx(mem, request, {}, surface)
    kept: list = []
    if mode == "body":
        got = BODIES[surface](text, request, {}, finish, ctx=ctx, keep=kept)
    else:
        got = STREAMS[surface](chunks, request, {}, finish, ctx=ctx, keep=kept)
    ctx.tally()
    if seen is not None:
        seen.append(got[1])
    if answer is not None:
        got = (got[0], answer)
        kept = [dict(k, text=answer) if k.get("type") == "text" else k for k in kept]
        kept = [dict(k, content=[dict(k["content"][0], text=answer)]) if k.get("type") == "message" else k
                for k in kept]
    data = _echo(surface, request, got, kept)
    back = _restore(surface, data, _ctx(mem, data, {}, surface))
    return got[1] if back is None else back   # (None: the turn went as the client sent it)


FORCED_OUTPUTS = [
    # (the request, what the model wrote, what the upstream reads back)
    (FORCE, f"<think>\n{ANSWER}\n</think>\n\n", f"<think>\n{ANSWER}\n</think>\n\n"),
    (FORCE, "<think>a</think>\n<think> b </think>", "<think>a</think>\n<think> b </think>"),
    # The template opened the block: it goes back behind the template's opening tag, as always.
    (dict(OPENS, chat_template_kwargs={"force_nonempty_content": True}), f"{ANSWER}\n</think>\n \n",
     f"<think>{ANSWER}\n</think>\n \n"),
]


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("request_, text, back", FORCED_OUTPUTS)
def test_force_nonempty_content_goes_back_as_the_model_wrote_it_body_and_stream(surface, request_, text, back):
    assert way_back(surface, text, request_, "body") == back
    for name, chunks in dict(chunkings(text, "force back"), words=words(text)).items():
        assert way_back(surface, text, request_, "stream", chunks) == back, name
    # Cut off at the token limit too (vLLM gives any output without an answer its reasoning).
    assert way_back(surface, text, request_, "body", finish=LENGTH) == back
    assert way_back(surface, text, request_, "stream", words(text), LENGTH) == back
    # An answer the client changed is not the reasoning again: a miss, the way back writes the pair
    # the model was last seen writing and that answer (Responses: the reasoning item goes as it
    # came, beside the message; a body: there is no reasoning to write).
    if text == FORCED_OUTPUTS[0][1]:
        guess = "Edited." if surface == "responses" else f"<think>\n{ANSWER}\n</think>\n\nEdited."
        assert way_back(surface, text, request_, "stream", words(text), answer="Edited.") == guess
        assert way_back(surface, text, request_, "body", answer="Edited.") == "Edited."


@pytest.mark.parametrize("surface", SURFACES)
def test_several_forced_blocks_go_back_as_the_model_wrote_them_under_the_joined_answer(surface):
    # The answer the client got (the blocks joined with a blank line, body and stream) is the
    # one the layout is filed under: sent back as it came, the turn is the model's bytes.
    for finish in (STOP, LENGTH):
        seen: list = []
        assert way_back(surface, BLOCKS, FORCE, "body", finish=finish, seen=seen) == BLOCKS
        for name, chunks in dict(chunkings(BLOCKS, "blocks back"), words=words(BLOCKS)).items():
            assert way_back(surface, BLOCKS, FORCE, "stream", chunks, finish, seen=seen) == BLOCKS, (name, finish)
        assert seen == [JOINED] * 6, finish


@pytest.mark.parametrize("surface", SURFACES)
def test_a_tagless_answer_a_stream_sent_twice_goes_back_once_as_the_model_wrote_it(surface):
    text = f"\n{ANSWER} \n"
    assert way_back(surface, text, OPENS, "body") == text
    for name, chunks in dict(chunkings(text, "tagless back"), words=words(text)).items():
        assert way_back(surface, text, OPENS, "stream", chunks) == text, name


def test_reasoning_past_the_keep_cap_is_not_sent_again():
    big = "a" * (KEEP_MAX + 10)
    assert STREAMS["chat"]([big[i:i + 65536] for i in range(0, len(big), 65536)], OPENS, {}) == ((big,), "")
    assert BODIES["chat"](big, OPENS, {}) == ((), big)


# -- read by the official SDKs' stream helpers ---------------------------------------------------
def test_the_responses_answer_item_reads_as_a_message_in_the_sdk():
    from support.responses import run_stream, stream_of, msg
    from conftest import make_ctx
    data = stream_of([msg(words(ANSWER))])
    for sizes in ([len(data)], [1], [37]):
        out = run_stream(data, rechunk(data, sizes), ctx=make_ctx(OPENS, surface="responses"))[0]
        check_invariants(out)
        final = sdk_final(out)
        assert shape(final.output) == [("reasoning", ANSWER), ("message", ANSWER)]
        assert final.output_text == ANSWER


def test_the_messages_answer_block_reads_as_text_in_the_sdk():
    import anthropic
    import httpx2 as httpx
    from conftest import make_ctx
    from support import drive
    from support.messages import stream, text
    from thinkwire.surfaces import messages
    data = stream(text(*words(ANSWER)))
    out = drive(messages, make_ctx(OPENS, surface="messages"), data, rechunk(data, [23]))[0]
    client = anthropic.Anthropic(api_key="x", base_url="http://test", max_retries=0, http_client=httpx.Client(
        transport=httpx.MockTransport(lambda r: httpx.Response(200, headers={"content-type": "text/event-stream"},
                                                               content=out))))
    with client.messages.stream(model="m", max_tokens=9, messages=[{"role": "user", "content": "hi"}]) as s:
        m = s.get_final_message()
    assert [(b.type, b.thinking if b.type == "thinking" else b.text) for b in m.content] == [
        ("thinking", ANSWER), ("text", ANSWER)]
    assert json.loads(json.dumps(m.to_dict()))["stop_reason"] == "end_turn"
