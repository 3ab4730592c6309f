"""Print every stored result readably, and flag what a user would call wrong. A review aid, not a test.

    .venv/bin/python -m devtools.review [conformance|corpus|realworld ...] [--flagged] [-k TEXT] [--full]

For each case: its id, how it stands (against the peer, KNOWN_WRONG, the realworld XFAIL), the
model's output, then per mode `reasoning | answer` (several blocks as a list; "= body" where the
stream gives the same). conformance and corpus print their stored results (tests/conformance/
results.json, tests/corpus/results.json); realworld prints what the code gives now next to what
the case expects. The flags are heuristics about what a reader sees:
  glued          a letter, digit or punctuation against a letter or digit where a tag was removed
                 (`engaging.Hi`)
  markup         tag-like text in the answer outside code, before anything shaped like a tool call
  close-in-reasoning  a closing tag of the case's pairs left in the reasoning outside code
  markup-in-reasoning a special token (`<|...|>`) left in the reasoning outside code
  reasoning-in-answer the text before a closing tag is in the answer, or the answer opens like
                 reasoning ("Okay, the user ...")
  answer-lost    the text after the last closing tag is in the reasoning or missing, or an output
                 with no tag of the case's pairs is all reasoning
  code-changed   a code span or fenced block of the output is not in the result verbatim
  stream-differs the stream gives another result than the body
A summary of the flags, with the ids, ends the output.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "addon"), str(ROOT)]

TAGLIKE = re.compile(r"</?[A-Za-z][\w:.-]*>|<\|[^|<>\s]{1,40}\|>|<｜[^｜<>]{1,40}｜>|<\|[a-z_]+>|<[a-z_]+\|>"
                     r"|\[/?[A-Z][A-Z_ ]{2,}\]|◁/?think▷")
CODE = re.compile(r"^(```|~~~)[^\n]*\n.*?^\1[ \t]*$|(`+)[^`\n]+?\2", re.S | re.M)
# The start of a tool call: not a closing tag, nor gpt-oss's `<|call|>`, which ends one.
TOOL_CALL = re.compile(r"<(?!/|\|call\|>)[^<>\s]*(tool|TOOL|function|call|ACTION)[^<>]*>|\[TOOL_CALLS\]"
                       r"|to=functions\.|functools\[")
SPECIAL = re.compile(r"<\|[^|<>\s]{1,40}\|>|<｜[^｜<>]{1,40}｜>")
OPENERS = re.compile(r"(Okay\b|OK,|Alright,|Hmm+\b|Let me\b|Let's see\b|So,? the user\b|The user\b|We need\b|"
                     r"Wait,)")


# -- flags ---------------------------------------------------------------------------------------------
def _code_regions(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in CODE.finditer(text)]


def _in(regions, i: int) -> bool:
    return any(a <= i < b for a, b in regions)


def _outside_code(text: str) -> str:
    return CODE.sub(" ", text)


def _punct(c: str) -> bool:
    return not c.isalnum() and not c.isspace() and c not in "<>`|[]"


def flags(output: str, result: dict, tags: dict) -> list[tuple[str, str]]:
    """(kind, detail) for one mode's result {"reasoning": [...], "content": "..."}."""
    out: list[tuple[str, str]] = []
    answer, blocks = result["content"], result["reasoning"]
    fields = [answer] + blocks
    code = _code_regions(output)
    known = sorted(set(tags["opens"]) | set(tags["closes"]) | set(tags["strip"]), key=len, reverse=True)
    marks = [(m.start(), m.end()) for m in TAGLIKE.finditer(output)]
    for t in known:
        marks += [(m.start(), m.start() + len(t)) for m in re.finditer(re.escape(t), output)]
    merged: list[list[int]] = []
    for i, j in sorted(marks):      # adjacent or overlapping marks are one removal point
        if merged and i <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], j)
        else:
            merged.append([i, j])
    for i, j in merged:
        if i == 0 or j >= len(output) or _in(code, i):
            continue
        left, right = output[i - 1], output[j]
        if not ((left.isalnum() or _punct(left)) and right.isalnum() or left.isalnum() and _punct(right)):
            continue
        lctx = re.split(r"\s|>", output[max(0, i - 12):i])[-1][-4:]
        rctx = re.split(r"\s|<", output[j:j + 12])[0][:4]
        snippet = lctx + rctx
        if len(snippet) >= 3 and any(snippet in f for f in fields):
            out.append(("glued", snippet))
    head = answer      # a tool call and what follows it stay as written, for a tool parser
    for m in tuple(tags["ends"]):
        if m in head:
            head = head[:head.index(m)]
    call = TOOL_CALL.search(head)
    head = head[:call.start()] if call else head
    found = sorted(set(TAGLIKE.findall(_outside_code(head))) | {t for t in known if t in _outside_code(head)})
    if found:
        out.append(("markup", " ".join(found)))
    left_closes = sorted({t for t in tags["closes"] for b in blocks if t in _outside_code(b)})
    if left_closes:
        out.append(("close-in-reasoning", " ".join(left_closes)))
    special = sorted({t for b in blocks for t in SPECIAL.findall(_outside_code(b))})
    if special:
        out.append(("markup-in-reasoning", " ".join(special)))
    for t in tags["closes"]:
        for m in re.finditer(re.escape(t), output):
            if _in(code, m.start()):
                continue
            head_before = output[:m.start()]
            segment = re.split("|".join(map(re.escape, known)), head_before)[-1]
            opened_by = head_before[:len(head_before) - len(segment)]
            if TOOL_CALL.search(segment) or any(opened_by.endswith(t) for t in tags["strip"]):
                continue     # it closes a tool call, or an answer a header opened (gpt-oss final)
            before = segment.strip()[-30:]
            if len(before) >= 8 and before in answer:
                out.append(("reasoning-in-answer", f"{before!r} (before {t}) is in the answer"))
    if OPENERS.match(answer.lstrip()):
        out.append(("reasoning-in-answer", f"the answer opens {answer.lstrip()[:30]!r}"))
    positions = [(m.start(), kind) for kind in ("opens", "closes") for t in tags[kind]
                 for m in re.finditer(re.escape(t), output) if not _in(code, m.start())]
    if not positions:
        if blocks and not answer.strip() and output.strip():
            out.append(("answer-lost", "an output with no tag of its pairs is all reasoning"))
    elif max(positions)[1] == "closes":
        tail = output[max(positions)[0]:]
        tail = re.split("|".join(map(re.escape, known)), tail)[-1].strip()
        if tail and not answer.strip():
            out.append(("answer-lost", "empty answer, though text follows the last closing tag"))
        elif len(tail) >= 3 and any(tail[:30] in b for b in blocks) and tail[:30] not in answer:
            out.append(("answer-lost", f"{tail[:30]!r} after the last closing tag is in the reasoning"))
    for a, b in code:
        span = output[a:b]
        if not any(span in f for f in fields):
            out.append(("code-changed", span if len(span) < 60 else span[:57] + "..."))
    return out


# -- printing ------------------------------------------------------------------------------------------
def _s(text: str, full: bool) -> str:
    s = json.dumps(text, ensure_ascii=False)
    return s if full or len(s) <= 300 else s[:200] + " … " + s[-90:]


def _result(r: dict, full: bool) -> str:
    blocks = r["reasoning"]
    rs = _s(blocks[0], full) if len(blocks) == 1 else "[" + ", ".join(_s(b, full) for b in blocks) + "]"
    return f"{rs if blocks else '-'} | {_s(r['content'], full)}"


def _tags(request: dict | None, values: dict) -> dict:
    from conftest import make_ctx
    rules = make_ctx(request, **values).rules()
    return {"opens": [p.open for p in rules.pairs], "closes": [p.close for p in rules.pairs],
            "strip": list(rules.strip), "ends": list(rules.ends)}


def _differing_streams(modes: dict[str, dict]) -> list[str]:
    """The surfaces whose stream gives another result than their body ("" for the canonical one)."""
    from support import runs
    if "body" not in modes or "stream" not in modes:
        return []
    out = [""] if modes["body"] != modes["stream"] else []
    for surface in runs.BODIES:
        if surface == runs.CANONICAL:
            continue
        shown = [modes.get(f"{surface} {m}") or {"reasoning": list(runs.SHOWS[surface](tuple(modes[m]["reasoning"]))),
                                                 "content": modes[m]["content"]} for m in ("body", "stream")]
        if shown[0] != shown[1] and (out != [""] or f"{surface} body" in modes or f"{surface} stream" in modes):
            out.append(surface)
    return out


def show(key: str, status: str, output: str, modes: dict[str, dict], tags: dict, args, seen: dict,
         extra: list[str] = (), known: bool = False) -> None:
    found: list[tuple[str, str]] = []
    for mode, r in modes.items():
        same = [m for m, o in modes.items() if o == r]
        if same[0] == mode:   # modes with the same result are flagged once
            found += [(kind, f"{'+'.join(same)}: {detail}") for kind, detail in dict.fromkeys(flags(output, r, tags))]
    for surface in _differing_streams(modes):
        found.append(("stream-differs", surface))
    for kind, _ in found:
        seen[kind].add(key)
    if found:
        seen[" flagged"].add(key)
    if known:
        seen[" known"].add(key)
    if args.flagged and not found and not extra:
        return
    print(f"== {key}   [{status}]")
    print(f"   output   {_s(output, args.full)}")
    for mode, r in modes.items():
        same = mode != "body" and r == modes.get("body")
        print(f"   {mode:<8} {'= body' if same else _result(r, args.full)}")
    for line in extra:
        print(f"   {line}")
    for kind, detail in found:
        print(f"   ! {kind}: {detail}")
    print()


def review_conformance(args, seen) -> None:
    import test_conformance as tc
    for case in tc.CASES:
        if args.k not in case["id"]:
            continue
        result = tc.RESULTS.get(case["id"])
        if result is None:
            print(f"== {case['id']}   [no stored result]\n")
            continue
        v = tc.verdict(case, result)
        status = f"differs: {tc.DIFFERENCES.get(case['id'])}" if v == tc.DIFFERS else v
        request, values = tc.settings_for(case)
        extra = [f"peer {mode:<5} {peer!r}" for mode, peer in tc.expectations(case).items()]
        wrong = [f"KNOWN_WRONG: {tc.KNOWN_WRONG[case['id']]}"] if case["id"] in tc.KNOWN_WRONG else []
        show(case["id"], status, case["output"], every_surface(result), _tags(request, values), args, seen,
             extra + wrong if (wrong or not args.flagged) else [], bool(wrong))


def every_surface(result: dict) -> dict[str, dict]:
    """mode -> result of a stored result: "body", "stream", and "<surface> <mode>" for each surface
    whose result is not the canonical one's (all are flagged, not only the canonical surface)."""
    modes = {m: result[m] for m in ("body", "stream") if m in result}
    modes.update({f"{surface} {mode}": r for surface, m in (result.get("surfaces") or {}).items()
                  for mode, r in m.items()})
    return modes


def review_corpus(args, seen) -> None:
    import test_corpus as tk
    for path in tk.SAMPLES:
        if args.k not in path.name:
            continue
        model, text = tk.sample_output(path)
        request = {"model": model} if model else None
        result = tk.RESULTS.get(path.name) or {}
        modes = every_surface(result)
        recorded = tk.RESULTS.get(path.name + tk.RECORDED)
        if recorded is not None:
            modes["recorded"] = recorded
        extra = [f"KNOWN_WRONG: {tk.KNOWN_WRONG[k]}" for k in (path.name, path.name + tk.RECORDED) if k in tk.KNOWN_WRONG]
        show(path.name, f"model {model}", text, modes, _tags(request, {}), args, seen, extra, bool(extra))


def review_realworld(args, seen) -> None:
    from support import runs
    import test_realworld as tr
    for case in tr.CASES:
        if args.k not in case["id"]:
            continue
        request, values = tr.request_of(case)
        got = every_surface(runs.observe(case["output"], request, values, {"per character": list(case["output"])}))
        want = {m: runs.as_stored(tr.expected(case, m, runs.CANONICAL)) for m in ("body", "stream")}
        # (every surface is expected to show the canonical blocks its way: a surface in `got` differs)
        extra = [f"expected {k}: {_result(want[k.split()[-1]], args.full)}" for k in got
                 if got[k] != want[k.split()[-1]] or " " in k]
        show(case["id"], "as expected" if got == want else "NOT as expected", case["output"], got,
             _tags(request, values), args, seen, extra, case["id"] in tr.XFAIL)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("sets", nargs="*", metavar="conformance|corpus|realworld", help="default: all three")
    p.add_argument("--flagged", action="store_true", help="only cases with a flag or a note")
    p.add_argument("-k", default="", help="only ids containing this text")
    p.add_argument("--full", action="store_true", help="do not shorten long texts")
    args = p.parse_args(argv)
    seen: dict[str, set] = defaultdict(set)
    sets = {"conformance": review_conformance, "corpus": review_corpus, "realworld": review_realworld}
    for name in args.sets or list(sets):
        if name not in sets:
            p.error(f"no set {name!r}")
        sets[name](args, seen)
    flagged, known = seen.pop(" flagged", set()), seen.pop(" known", set())
    print("== flags")
    for kind, keys in sorted(seen.items()):
        print(f"{kind} ({len(keys)}): {' '.join(sorted(keys))}")
    print(f"\n== flagged, not listed as wrong (KNOWN_WRONG, XFAIL): read these ({len(flagged - known)})")
    print(" ".join(sorted(flagged - known)))
    print(f"\n== listed as wrong, not flagged: the flags miss it, or it is fixed ({len(known - flagged)})")
    print(" ".join(sorted(known - flagged)))


if __name__ == "__main__":
    main()
