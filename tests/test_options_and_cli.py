"""Options (validated, env defaults), tag set loading, the addon glue in-process, and the CLI."""

import json
import os
import subprocess
import sys

import pytest
from mitmproxy import exceptions
from mitmproxy.test import taddons, tflow, tutils

from conftest import ROOT, make_settings
from thinkwire import cli, tagsets
from thinkwire.addon import ThinkWire
from thinkwire.report import MARK_FELL_BACK, MARK_REWRITTEN
from thinkwire.settings import SettingError, Settings
from thinkwire.rules import TagPair


# -- settings -----------------------------------------------------------------------------
def test_defaults():
    s = make_settings()
    assert (s.chat, s.chat_field, s.trim, s.tags_anywhere) == (True, "reasoning_content", True, False)
    assert s.tagsets.default.pairs[0] == TagPair("<think>", "</think>")


@pytest.mark.parametrize("value,expected", [("0", False), ("false", False), ("OFF", False), ("no", False),
                                            ("1", True), ("on", True), ("True", True)])
def test_switch_values(value, expected):
    assert make_settings(chat=value).chat is expected


def test_bad_switch_value_says_how_to_fix_it():
    with pytest.raises(SettingError, match=r"think_chat \(env THINK_CHAT\) is 'maybe'; use on or off"):
        make_settings(chat="maybe")


def test_bad_choice_lists_the_choices():
    with pytest.raises(SettingError, match="reasoning_content, reasoning, both"):
        make_settings(chat_field="thoughts")


def test_environment_gives_the_default(monkeypatch):
    monkeypatch.setenv("THINK_CHAT_FIELD", "both")
    assert Settings.from_values({}).chat_field == "both"
    assert Settings.from_values({"think_chat_field": "reasoning"}).chat_field == "reasoning"


def test_think_tags_replaces_the_tag_sets():
    s = make_settings(tags="<a> </a>, [T] [/T]")
    assert s.tagsets.default.pairs == (TagPair("<a>", "</a>"), TagPair("[T]", "[/T]"))


@pytest.mark.parametrize("value,problem", [("<a>", "must be an opening and a closing tag"),
                                           ("<a> </a> x", "must be an opening"),
                                           ("<a> <a>", "the same"),
                                           ("<a> </a>,<b> <a>x", "starts with opening tag")])
def test_bad_think_tags(value, problem):
    with pytest.raises(SettingError, match=problem):
        make_settings(tags=value)


# -- tag set files --------------------------------------------------------------------------
def write(tmp_path, text):
    p = tmp_path / "t.yaml"
    p.write_text(text)
    return p


def test_shipped_tagsets_load():
    ts = tagsets.load(tagsets.SHIPPED)
    assert TagPair("<think>", "</think>") in ts.default.pairs


def test_tagsets_file_from_option(tmp_path):
    p = write(tmp_path, 'default:\n  pairs:\n    - ["<x>", "</x>"]\n')
    assert make_settings(tagsets=str(p)).tagsets.default.pairs == (TagPair("<x>", "</x>"),)


@pytest.mark.parametrize("text,problem", [
    ("", "the file is empty"),
    ("default: [\n", "not valid YAML"),
    ("x: 1\n", ":1: unknown key 'x'"),
    ("profiles: []\n", "a 'default' section"),
    ("default:\n  pairs: []\n", ":2: default pairs must be a non-empty list"),
    ('default:\n  pairs:\n    - ["<x>", ""]\n', ":3: a closing tag is empty"),
    ('default:\n  pairs:\n    - ["<x>"]\n', ":3: each pair"),
    ('default:\n  pairs:\n    - ["<x>", 5]\n', ":3: a closing tag must be a string"),
    ('default:\n  pairs:\n    - ["<x>", "</x>"]\n    - ["<y>", "<x>y"]\n', "starts with opening tag"),
    ('default:\n  pairs:\n    - ["<x>", "</x>"]\n  colour: red\n', ":4: unknown key 'colour'"),
    ('default:\n  pairs:\n    - ["<x>", "</x>"]\nprofiles:\n  - name: a\n', ":5: a profile needs 'models'"),
    ('default:\n  pairs:\n    - ["<x>", "</x>"]\nprofiles:\n  - name: a\n    models: []\n', "non-empty list of globs"),
    ('default:\n  pairs:\n    - ["<x>", "</x>"]\nprofiles:\n  - name: a\n    models: ["m"]\n    starts_inside: 3\n',
     "starts_inside must be true or false"),
    ('default:\n  pairs:\n    - ["<x>", "</x>"]\nprofiles:\n  - name: a\n    models: ["m"]\n    tagless_means: x\n',
     "tagless_means must be"),
    ('default:\n  pairs:\n    - ["<x>", "</x>"]\nprofiles: 3\n', "'profiles' must be a list"),
    ('default:\n  pairs:\n    - ["<x>", "</x>"]\n    - ["</x>", "<y>"]\n', "'</x>' is both an opening and a closing tag"),
    ('default:\n  pairs:\n    - ["<x>", "</x>"]\n  ends_reasoning: ["</x>"]\n',
     ":4: ends_reasoning marker '</x>' is also a tag of 'default'"),
    ('default:\n  pairs:\n    - ["<x>", "</x>"]\nprofiles:\n  - name: a\n    models: ["m"]\n    ends_reasoning: x\n',
     "'ends_reasoning' of 'a' must be a list of strings"),
    ("- 1\n", "the top level must be a mapping"),
])
def test_tagset_file_problems_name_file_line_and_problem(tmp_path, text, problem):
    p = write(tmp_path, text)
    with pytest.raises(tagsets.TagsetError) as e:
        tagsets.load(p)
    assert str(p) in str(e.value) and problem in str(e.value)


def test_missing_tagsets_file(tmp_path):
    with pytest.raises(SettingError, match="cannot read tag sets"):
        make_settings(tagsets=str(tmp_path / "nope.yaml"))


def test_profiles_match_model_globs_case_insensitively(tmp_path):
    p = write(tmp_path, 'default:\n  pairs:\n    - ["<think>", "</think>"]\nprofiles:\n'
                        '  - name: r1\n    models: ["*deepseek-r1*"]\n    starts_inside: true\n')
    ts = tagsets.load(p)
    assert ts.profile_for("DeepSeek-R1-Distill").name == "r1"
    assert ts.profile_for("qwen") is ts.default and ts.profile_for(None) is ts.default
    prof = ts.profile_for("deepseek-r1")
    assert prof.starts_inside and prof.pairs == ts.default.pairs


# -- the addon in-process -------------------------------------------------------------------
def chat_flow(content, stream=False, status=200, path="/v1/chat/completions"):
    body = {"id": "c", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}
    f = tflow.tflow(req=tutils.treq(path=path.encode(), content=b'{"model": "m"}'),
                    resp=tutils.tresp(status_code=status, content=json.dumps(body).encode()))
    f.response.headers["content-type"] = "text/event-stream" if stream else "application/json"
    return f


def test_addon_rewrites_a_body_and_comments_the_flow():
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.configure(tw)
        f = chat_flow("<think>x</think>hi")
        tw.responseheaders(f)
        tw.response(f)
        assert json.loads(f.response.content)["choices"][0]["message"]["reasoning_content"] == "x"
        assert f.marked == MARK_REWRITTEN and "[default]: 1 reasoning block(s), 1 chars moved" in f.comment


def test_addon_leaves_errors_and_other_paths_alone():
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.configure(tw)
        for f in (chat_flow("<think>x</think>", status=400), chat_flow("<think>x</think>", path="/v1/models")):
            before = f.response.content
            tw.responseheaders(f)
            tw.response(f)
            assert f.response.content == before and not f.comment


def test_addon_non_json_body_is_marked_fell_back():
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.configure(tw)
        f = chat_flow("x")
        f.response.content = b"<html>"
        tw.response(f)
        assert f.response.content == b"<html>" and f.marked == MARK_FELL_BACK and "unchanged" in f.comment


def test_addon_body_rewrite_bug_fails_open(monkeypatch):
    from thinkwire.surfaces import chat
    monkeypatch.setattr(chat, "rewrite_body", lambda data, ctx: 1 / 0)
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.configure(tw)
        f = chat_flow("<think>x</think>")
        before = f.response.content
        tw.response(f)
        assert f.response.content == before and "ZeroDivisionError" in f.comment


def test_addon_installs_a_stream_callable_and_fixes_headers():
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.configure(tw)
        f = chat_flow("", stream=True)
        f.response.headers["content-length"] = "10"
        tw.responseheaders(f)
        assert callable(f.response.stream) and "content-length" not in f.response.headers
        assert f.response.headers["transfer-encoding"] == "chunked"
        tw.error(f)


def test_addon_bad_option_raises_options_error():
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        with pytest.raises(exceptions.OptionsError, match="think_signature"):
            tctx.configure(tw, think_signature="sometimes")


def test_addon_reconfigures_on_change():
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.configure(tw, think_chat_field="reasoning")
        assert tw.settings.chat_field == "reasoning"


# -- the CLI --------------------------------------------------------------------------------
def run_cli(args, stdin=b"", env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("THINK_")}
    e.update(env or {})
    e["HOME"] = e.get("HOME", "/tmp")
    return subprocess.run([sys.executable, "-m", "thinkwire.cli", *args], input=stdin, capture_output=True,
                          env=e, cwd=ROOT, timeout=60)


def test_cli_rewrites_a_body_from_stdin():
    body = json.dumps({"choices": [{"index": 0, "message": {"content": "<think>x</think>y"}}]}).encode()
    r = run_cli(["rewrite", "--surface", "chat"], body)
    assert r.returncode == 0
    assert json.loads(r.stdout)["choices"][0]["message"] == {"content": "y", "reasoning_content": "x"}


def test_cli_rewrites_a_stream_file(tmp_path):
    p = tmp_path / "s.sse"
    p.write_bytes(b'data: {"choices":[{"index":0,"delta":{"content":"<think>x</think>y"}}]}\n\ndata: [DONE]\n\n')
    r = run_cli(["rewrite", "--surface", "chat", str(p)])
    assert r.returncode == 0 and b'"reasoning_content":"x"' in r.stdout and r.stdout.endswith(b"data: [DONE]\n\n")


def test_cli_same_code_path_as_the_addon():
    data = b'data: {"choices":[{"index":0,"delta":{"content":"<think>a"}}]}\n\n'
    assert cli.rewrite(data, "chat", make_settings()) == b"".join(
        __import__("thinkwire.engine", fromlist=["x"]).stream_driver(
            __import__("thinkwire.surfaces.chat", fromlist=["x"]), cli.engine.new_context(make_settings(), None))(data)
        + [b""])


def test_cli_env_options_apply():
    body = json.dumps({"choices": [{"message": {"content": "<r>x</r>y"}}]}).encode()
    r = run_cli(["rewrite", "--surface", "chat"], body, env={"THINK_TAGS": "<r> </r>", "THINK_CHAT_FIELD": "reasoning"})
    assert json.loads(r.stdout)["choices"][0]["message"]["reasoning"] == "x"


@pytest.mark.parametrize("data,problem", [(b"hello", "neither a JSON body nor an SSE stream"),
                                          (b'{"object": "list"}', "not a chat response"),
                                          (b"data: {\"a\": 1}\n\n", "not a chat response (stream")])
def test_cli_rejects_input_of_another_kind(data, problem):
    r = run_cli(["rewrite", "--surface", "chat"], data)
    assert r.returncode == 2 and problem in r.stderr.decode()


def test_cli_bad_env_value_is_a_clear_error():
    r = run_cli(["rewrite", "--surface", "chat"], b"{}", env={"THINK_TRIM": "maybe"})
    assert r.returncode == 2 and "THINK_TRIM" in r.stderr.decode()


def test_cli_tags_lists_the_effective_sets():
    r = run_cli(["tags"])
    assert r.returncode == 0 and "<think>  ...  </think>" in r.stdout.decode()


def test_cli_tags_for_a_model():
    r = run_cli(["tags", "--model", "some-model"])
    assert r.returncode == 0 and "no profile matched" in r.stdout.decode()


def test_console_script_is_installed():
    exe = os.path.join(os.path.dirname(sys.executable), "thinkwire")
    assert os.path.exists(exe)


def test_addon_path_in_a_clone_is_addon_think_py():
    assert cli.addon_path() == ROOT / "addon" / "think.py"
    assert run_cli(["addon-path"]).stdout.decode().strip() == str(ROOT / "addon" / "think.py")


def test_run_loads_the_addon_and_passes_every_argument_through():
    argv = cli.proxy_argv("mitmdump", ["--mode", "reverse:http://h:1", "--set", "x=y", "--help"])
    assert argv[0] == os.path.join(os.path.dirname(sys.executable), "mitmdump")
    assert argv[1:] == ["-s", str(cli.addon_path()), "--listen-host", "127.0.0.1",
                        "--mode", "reverse:http://h:1", "--set", "x=y", "--help"]


@pytest.mark.parametrize("given", [["--listen-host", "0.0.0.0"], ["--listen-host=::"], ["--set", "listen_host=::"]])
def test_run_listens_on_loopback_unless_told_a_host(given):
    argv = cli.proxy_argv("mitmweb", given)
    assert argv[-len(given):] == given and argv.count("127.0.0.1") == 0


def test_run_execs_the_tool_of_this_environment():
    r = run_cli(["run", "--version"])
    assert r.returncode == 0 and b"Mitmproxy:" in r.stdout


def env_lines(tmp_path, *args):
    r = run_cli(["env", "--confdir", str(tmp_path / "conf dir"), *args])
    assert r.returncode == 0, r.stderr
    return r.stdout.decode()


def test_env_creates_the_ca_first_and_points_every_client_at_the_proxy(tmp_path):
    out = env_lines(tmp_path, "--port", "18123")
    conf = tmp_path / "conf dir"
    ca, bundle = conf / "mitmproxy-ca-cert.pem", conf / "thinkwire-ca-bundle.pem"
    assert ca.exists() and (conf / "mitmproxy-ca.pem").exists()   # mitmproxy finds and uses it
    q = f"'{bundle}'"
    for line in ["export HTTPS_PROXY=http://127.0.0.1:18123", "export HTTP_PROXY=http://127.0.0.1:18123",
                 "export NO_PROXY=localhost,127.0.0.1,::1", f"export SSL_CERT_FILE={q}",
                 f"export REQUESTS_CA_BUNDLE={q}", f"export NODE_EXTRA_CA_CERTS='{ca}'", "export NODE_USE_ENV_PROXY=1"]:
        assert line in out.splitlines()
    # The bundle: the proxy's CA, then what the machine trusts (hosts the proxy does not open).
    assert bundle.read_bytes().startswith(ca.read_bytes()) and bundle.read_bytes().count(b"BEGIN CERTIFICATE") > 10
    before = ca.read_bytes()
    env_lines(tmp_path)
    assert ca.read_bytes() == before   # an existing CA is kept


@pytest.mark.parametrize("shell", ["sh", "fish"])
def test_env_says_that_local_servers_bypass_the_proxy_and_how_to_front_one(tmp_path, shell):
    lines = env_lines(tmp_path, "--shell", shell).splitlines()
    assert lines[1] == (
        "# thinkwire: local servers (localhost, 127.0.0.1, ::1) are reached directly (NO_PROXY), not through the "
        "proxy; for one, put thinkwire in front of it in reverse mode: run `thinkwire run --mode "
        "reverse:http://127.0.0.1:PORT --listen-port 8081` and give clients http://127.0.0.1:8081 as their base URL")


def test_env_output_runs_in_sh_and_its_undo_clears_it(tmp_path):
    script = (f'eval "$({sys.executable} -m thinkwire.cli env --confdir \'{tmp_path}/c\' --port 9)"; '
              'echo "$HTTPS_PROXY|$SSL_CERT_FILE"; '
              f'eval "$({sys.executable} -m thinkwire.cli env --undo)"; echo "[$HTTPS_PROXY$NODE_EXTRA_CA_CERTS]"')
    r = subprocess.run(["sh", "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.stdout.splitlines() == [f"http://127.0.0.1:9|{tmp_path}/c/thinkwire-ca-bundle.pem", "[]"]
    assert "nothing listens on 127.0.0.1:9" in r.stderr   # a hint, on stderr, not eval'd


def test_env_for_fish_quotes_and_undoes_its_way(tmp_path):
    out = env_lines(tmp_path, "--shell", "fish")
    assert f"set -gx NODE_EXTRA_CA_CERTS '{tmp_path}/conf dir/mitmproxy-ca-cert.pem'" in out
    assert cli.shell_lines({"A": "it's \\"}, "fish") == "set -gx A 'it\\'s \\\\'\n"
    assert run_cli(["env", "--shell", "fish", "--undo"]).stdout.decode().splitlines()[0] == "set -e HTTPS_PROXY"


def test_addon_reports_a_stream_whose_client_disconnected():
    from mitmproxy import flow as mflow
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.configure(tw)
        f = chat_flow("", stream=True)
        tw.responseheaders(f)
        f.response.stream(b'data: {"choices":[{"index":0,"delta":{"content":"<think>x</think>y"}}]}\n\n')
        f.error = mflow.Error("client disconnected")
        tw.error(f)
        assert f.marked == MARK_REWRITTEN and "stream ended early (client disconnected)" in f.comment


def test_addon_freezes_start_up_objects_once_running(monkeypatch):
    import gc
    calls = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append(1))
    ThinkWire().running()
    assert calls == [1]


def test_thinkwire_lines_skip_the_deprecated_add_log_event_only(monkeypatch):
    import logging
    from mitmproxy import log as mlog
    monkeypatch.setattr("gc.freeze", lambda: None)
    got = []

    class Legacy(mlog.LegacyLogEvents):   # what mitmproxy's master installs, without the master
        def __init__(self):
            logging.Handler.__init__(self)
            self._initiated_in_test = None

        def emit(self, record):
            got.append(record.name)
    h = Legacy()
    logging.getLogger().addHandler(h)
    try:
        ThinkWire().running()
        ThinkWire().running()   # (a reloaded script: one filter)
        assert len(h.filters) == 1
        logging.getLogger("thinkwire.addon").warning("a flow")
        logging.getLogger("someone.else").warning("hello")
    finally:
        logging.getLogger().removeHandler(h)
    assert got == ["someone.else"]


def test_addon_request_nested_past_the_stack_passes_unchanged():
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.configure(tw)
        f = chat_flow("<think>x</think>hi")
        f.request.method = "POST"
        f.request.content = b"[" * 200000
        tw.request(f)
        assert f.request.content == b"[" * 200000
        tw.responseheaders(f)
        tw.response(f)
        assert json.loads(f.response.content)["choices"][0]["message"]["reasoning_content"] == "x"
        assert not tw._requests


def test_addon_keeps_streaming_a_stream_it_cannot_decode():
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.configure(tw)
        f = chat_flow("", stream=True)
        f.response.headers["content-encoding"] = "compress"
        tw.responseheaders(f)
        assert f.response.stream is True and f.marked == MARK_FELL_BACK


def test_addon_hooks_never_raise(monkeypatch, caplog):
    from thinkwire import engine
    monkeypatch.setattr(engine, "new_context", lambda *a, **k: 1 / 0)
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.configure(tw)
        f = chat_flow("<think>x</think>hi")
        before = f.response.content
        for hook in (tw.request, tw.responseheaders, tw.response, tw.error):
            hook(f)
        assert f.response.content == before
        assert "hook failed (ZeroDivisionError)" in caplog.text


def test_parsed_request_is_kept_only_until_the_response():
    tw = ThinkWire()
    with taddons.context(tw) as tctx:
        tctx.configure(tw)
        for status in (200, 400):
            f = chat_flow("<think>x</think>hi", status=status)
            f.request.method = "POST"
            tw.request(f)
            assert f.id in tw._requests
            tw.responseheaders(f)
            tw.response(f)
            assert f.id not in tw._requests


def test_the_runtime_package_imports_no_sdk_and_ships_no_dev_tools():
    code = ("import pkgutil, sys, thinkwire\n"
            "for m in pkgutil.walk_packages(thinkwire.__path__, 'thinkwire.'): __import__(m.name)\n"
            "print(sorted(n for n in ('openai', 'anthropic', 'httpx', 'devtools') if n in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(ROOT / "addon")), cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    assert not (ROOT / "addon" / "thinkwire" / "demo.py").exists()


def test_switches_are_bools_and_policies_list_their_values(tmp_path):
    mitmdump = os.path.join(os.path.dirname(sys.executable), "mitmdump")
    out = subprocess.run([mitmdump, "-s", str(ROOT / "addon" / "think.py"), "--set", f"confdir={tmp_path}",
                          "--options"], capture_output=True, text=True, timeout=60).stdout
    flat = " ".join(out.replace("#", " ").split())     # --options folds the help text
    assert "Env: THINK_CHAT. Type bool. think_chat: true" in flat
    assert "Valid values are 'signed', 'unsigned', 'off', 'redacted'. think_signature: signed" in flat


@pytest.mark.parametrize("options,env", [({"think_chat": "maybe"}, None), ({}, {"THINK_STARTS_INSIDE": "perhaps"})])
def test_a_switch_that_means_nothing_stops_mitmdump_with_the_message(tmp_path, options, env):
    from harness import start_fails
    out = start_fails(options, tmp_path, env=env)
    assert "use on or off (also 1/0, true/false, yes/no)" in out and "[exit 0]" not in out


def test_every_surface_module_provides_the_surface_protocol():
    from thinkwire import engine
    from thinkwire.surfaces import Surface
    for name, module in engine.SURFACES.items():
        assert isinstance(module, Surface) and module.NAME == name


@pytest.mark.parametrize("value,want", [("2", 2.0), (" 0.25 ", 0.25), ("60", 60.0)])
def test_the_ask_deadline_is_seconds(value, want):
    assert make_settings(ask_timeout=value).ask_timeout == want


@pytest.mark.parametrize("value", ["0", "-1", "61", "nan", "inf", "2s", ""])
def test_a_bad_ask_deadline_says_how_to_fix_it(value):
    with pytest.raises(SettingError) as e:
        make_settings(ask_timeout=value)
    assert str(e.value) == (f"think_ask_timeout (env THINK_ASK_TIMEOUT) is {value!r}; use a number of seconds "
                            "above 0 and at most 60, e.g. 2 or 0.5")


def test_the_ask_deadline_defaults_to_2_s_and_reads_its_environment_variable(monkeypatch):
    assert Settings.from_values({}).ask_timeout == 2.0
    monkeypatch.setenv("THINK_ASK_TIMEOUT", "0.5")
    assert Settings.from_values({}).ask_timeout == 0.5


def test_a_bad_ask_deadline_stops_mitmdump_with_the_message(tmp_path):
    from harness import start_fails
    out = start_fails({"think_ask_timeout": "soon"}, tmp_path)
    assert "think_ask_timeout (env THINK_ASK_TIMEOUT) is 'soon'" in out and "[exit 0]" not in out


@pytest.mark.parametrize("options,env,line", [
    ({"think_signature": "bogus"}, None,
     "thinkwire: think_signature (env THINK_SIGNATURE) is 'bogus'; use one of: signed, unsigned, off, redacted"),
    ({}, {"THINK_TRIM": "maybe"},
     "thinkwire: think_trim (env THINK_TRIM) is 'maybe'; use on or off (also 1/0, true/false, yes/no)"),
])
def test_a_bad_option_value_is_one_line_and_mitmdump_exits_before_it_listens(tmp_path, options, env, line):
    from harness import start_fails
    out = start_fails(options, tmp_path, env=env)
    said = [s for s in out.splitlines() if s and not s.startswith("[")]   # not mitmproxy's timestamped lines
    assert said == [line]
    assert "Traceback" not in out and "listening at" not in out and out.endswith("[exit 2]")


SAVED = {   # one saved response of each API, as the CLI is given it
    "chat": b'{"choices": [{"index": 0, "message": {"content": "<think>x</think>y"}}]}',
    "responses": b'event: response.output_text.delta\ndata: {"type": "response.output_text.delta", "item_id": "m", '
                 b'"output_index": 0, "content_index": 0, "delta": "<think>x</think>y"}\n\n',
    "messages": b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
                b'"delta": {"type": "text_delta", "text": "<think>x</think>y"}}\n\n',
    "ollama": b'{"model": "m", "message": {"role": "assistant", "content": "<think>x"}, "done": false}\n'
              b'{"model": "m", "message": {"role": "assistant", "content": "</think>y"}, "done": true}\n',
}


@pytest.mark.parametrize("surface", sorted(SAVED))
def test_cli_rewrite_tells_the_surface_from_the_input(surface, tmp_path):
    told = run_cli(["rewrite", "--confdir", str(tmp_path)], SAVED[surface])
    said = run_cli(["rewrite", "--confdir", str(tmp_path), "--surface", surface], SAVED[surface])
    assert (told.returncode, told.stdout) == (0, said.stdout)   # (another surface refuses the input)


def test_cli_rewrite_that_cannot_tell_the_surface_says_how_to_name_it():
    r = run_cli(["rewrite"], b'{"object": "list"}')
    assert r.returncode == 2 and r.stderr.decode() == (
        "thinkwire: cannot tell which API the body is from (none of: chat: 'choices' list; messages: 'content' "
        "block list (type 'message') or message_start/content_block events; ollama: 'message' or 'response' "
        "next to a 'done' flag; responses: 'output' item list (object 'response') or response.* events); say "
        "which with --surface chat|messages|ollama|responses\n")


def test_cli_rewrite_ends_its_output_with_one_newline():
    r = run_cli(["rewrite", "--surface", "chat"], SAVED["chat"])
    assert r.stdout == b'{"choices":[{"index":0,"message":{"content":"y","reasoning_content":"x"}}]}\n'
    stream = run_cli(["rewrite"], b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n')
    assert stream.stdout == b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n'   # as it was
